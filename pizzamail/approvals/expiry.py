"""Optional expiry and one reminder for requests nobody decided, checked by the approvals sweep.

Off by default: without ``[approvals] expires`` (or ``[mcp.servers.NAME] expires``) a request waits
for ever, and without ``remind_after`` no reminder is sent. An expired action is a decision like any
other (``expire``, by pizzamail): recorded, its run resumes and the agent is told, and its copy leaves
``Action``. Only ``held`` actions expire; an interrupted one (``unknown``) always waits for the user.
The reminder is guarded by ``reminded_at``, so it is sent once. Times come from an injected clock.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from pizzamail.approvals.decide import Decision, approval_header
from pizzamail.approvals.ledger import STATE_TEXT, apply_decision, pending
from pizzamail.approvals.request import reply_address
from pizzamail.composer import Composer, MailContext
from pizzamail.config import Config, duration_seconds
from pizzamail.store import Store
from pizzamail.store.actions import HeldAction, held_actions, mark_reminded
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailwriter import add_mail, message_row
from pizzamail.store.threads import find_message

log = logging.getLogger("pizzamail.approvals")

EXPIRED_NOTE = "expired unanswered"
STOPPED_NOTE = "its run was stopped"


def age_seconds(action: HeldAction, now: datetime) -> float:
    held = datetime.strptime(action.created_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return (now - held).total_seconds()


async def expire_and_remind(store: Store, blobs: BlobStore, composer: Composer, config: Config, *,
                            now: datetime) -> tuple[int, int]:
    """Expire the held actions past their expiry, remind about those past ``remind_after``.
    Returns (expired, reminded)."""
    remind = duration_seconds(config.approvals.remind_after)
    if remind is None and not config.approvals.expires and not any(
            s.expires for s in config.mcp.servers.values()):
        return 0, 0  # the default: requests wait for ever, nobody is nagged
    expired = reminded = 0
    for action in await pending(store):
        if action.status != "held":
            continue
        age = age_seconds(action, now)
        expiry = config.expiry_seconds(action.server)
        if expiry is not None and age >= expiry:
            expired += await _expire(store, action)
        elif remind is not None and action.reminded_at is None and age >= remind:
            reminded += await _remind(store, blobs, composer, config, action)
    return expired, reminded


async def withdraw(store: Store, run_id: int) -> int:
    """The held calls of a run that ends stopped expire: a late decision is answered "expired",
    never released into a run that is over."""
    return sum([await _expire(store, a, note=STOPPED_NOTE)
                for a in await held_actions(store, run_id=run_id, status="held")])


async def _expire(store: Store, action: HeldAction, *, note: str = EXPIRED_NOTE) -> int:
    async with store.write() as db:
        applied = await apply_decision(db, action, Decision(kind="expire", note=note),
                                       by="pizzamail", via=action.request_message_id or "")
    if applied.applied:
        log.info("action %d (%s) expired: %s", action.id, action.label, note)
    return int(applied.applied)


async def _remind(store: Store, blobs: BlobStore, composer: Composer, config: Config,
                  action: HeldAction) -> int:
    request = await find_message(store, action.request_message_id or "")
    if request is None:
        return 0
    agent = config.agent_at(request.sender) or config.main_agent  # the agent that asked reminds
    ctx = MailContext(
        thread_id=action.thread_id, run_id=action.run_id, subject=request.subject, agent=agent,
        in_reply_to=action.request_message_id, references=request.refs,
        headers=(("Reply-To", reply_address(agent.address, action.nonce)),
                 ("X-Pizzamail-Approval", approval_header(action.id, action.nonce))),
    )
    mail = composer.decision_reply(ctx, reminder_text(action, config))
    blob = await blobs.save(mail.as_bytes())
    async with store.write() as db:
        if not await mark_reminded(db, action.id):
            return 0
        row = message_row(mail, blob, kind="reminder", sender=agent.address, run_id=action.run_id)
        await add_mail(db, action.thread_id, row)
    log.info("reminded about action %d (%s)", action.id, action.label)
    return 1


def reminder_text(action: HeldAction, config: Config) -> str:
    expiry = config.expiry(action.server)
    end = (f"It expires unanswered {expiry} after it was made." if expiry
           else "Doing nothing never denies: it waits until you decide.")
    return (f"Reminder: action {action.id} ({action.label}) is {STATE_TEXT['held']}.\n\n"
            "Reply to this mail or to the request with `approve`, `deny` [reason] or your feedback. "
            + end)
