"""A decision arriving by SMTP: routed to its held action and committed before the 250.

The SMTP handler has already checked AUTH and that the sender may send as this address; here the
sender must also be an approver. The decision is read only from the body the user wrote in this
authenticated submission — quoted request text, attachments and tool output never count — and it
applies only to the action whose nonce (or request Message-ID) the reply carries.

The reply mail, the decision row, the action's transition and the run's re-queueing share one
transaction; a decision that changes nothing gets a short reply in the same transaction.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from email.message import EmailMessage

from pizzamail.approvals.decide import Decision, parse_approval_header, read_decision, route
from pizzamail.approvals.ledger import STATE_TEXT, Applied, actions_named, apply_decision
from pizzamail.approvals.outbox import sent_arguments, sent_by_user, strip_for_relay
from pizzamail.composer import Composer, MailContext
from pizzamail.errors import SmtpRefusal
from pizzamail.mail.ids import new_message_id
from pizzamail.mail.parse import ParsedMail, header_text
from pizzamail.store import Store, Tx
from pizzamail.store.actions import HeldAction, action_by_id, action_named, transition
from pizzamail.store.blobs import BlobStore
from pizzamail.store.inbox import Claim
from pizzamail.store.mailwriter import add_mail, message_row, received_row
from pizzamail.store.threads import log_event, message_direction

#: how to answer an action that still waits (the reply was not read as a decision)
STILL_HELD = ("Nothing was run. To run it, reply with `approve` on its own (a courtesy such as \"thanks\" and"
              " a signature below a `-- ` line are fine); reply `deny` and a reason to refuse it; anything"
              " else you write goes to the agent as feedback.")


@dataclass(frozen=True, kw_only=True)
class Decided:
    thread_id: int
    applied: bool
    duplicate: bool = False


async def routed_action(store: Store, msg: EmailMessage, recipients: list[str]) -> HeldAction | None:
    """The one action a reply answers. A reply whose clues name two (it answers one request but is
    addressed to another's nonce) is refused: which one its words are about cannot be known."""
    named = await actions_named(store, route(msg, recipients))
    if len(named) > 1:
        ids = " and ".join(str(a.id) for a in named)
        raise SmtpRefusal(550, "5.7.1", f"this reply names more than one approval request (actions {ids});"
                          " nothing was decided. Reply to the request you mean, to its own address")
    return named[0] if named else None


async def draft_action(store: Store, msg: EmailMessage) -> HeldAction | None:
    """The pending ``draft_email`` a sent draft names by its X-Pizzamail-Approval header (id and
    nonce must both match), or None."""
    named = parse_approval_header(header_text(msg, "X-Pizzamail-Approval"))
    if named is None:
        return None
    action = await action_named(store, *named)
    return action if action is not None and action.is_draft and action.status == "held" else None


async def send_decision(blobs: BlobStore, raw: bytes, msg: EmailMessage, recipients: list[str], *,
                        sent: bool = False) -> Decision:
    """Sending the draft: approve with the user's edits, the bytes kept to be relayed as sent
    (``sent``: already sent by the user's own provider, kept as the record of what went out)."""
    kept = await blobs.save(strip_for_relay(raw))
    arguments = sent_arguments(msg)
    return Decision(kind="send", arguments=arguments, outgoing=kept.digest, recipients=tuple(recipients),
                    sent=sent_by_user(arguments, recipients) if sent else "")


async def record_decision(
    store: Store, blobs: BlobStore, raw: bytes, parsed: ParsedMail, msg: EmailMessage, *,
    action: HeldAction, approvers: frozenset[str], composer: Composer, sender: str, domain: str,
    decision: Decision | None = None, claim: Claim | None = None,
) -> Decided:
    """Record the decision a reply makes (or ``decision``, for a sent draft). A sent draft that
    no longer applies is refused (550) and nothing is stored: it must never be relayed. ``claim``: the
    mail's record in the owner's own mailbox, made in the same transaction."""
    by = (parsed.sender or "").lower()
    if by not in approvers:
        raise SmtpRefusal(550, "5.7.1", f"<{by}> is not an approver; only {', '.join(sorted(approvers))}"
                          " may decide (config: [approvals] approvers)")
    message_id = parsed.message_id or new_message_id(domain)
    if decision is None:  # pure, but a long reply takes a while: off the event loop
        decision = await asyncio.to_thread(read_decision, msg)
    blob = await blobs.save(raw)
    async with store.write() as db:
        if claim is not None and not await claim(db):  # taken from the owner's mailbox before
            return Decided(thread_id=action.thread_id, applied=False, duplicate=True)
        seen = await message_direction(db, message_id)
        if seen == "in":  # a client retrying: decided once already
            return Decided(thread_id=action.thread_id, applied=False, duplicate=True)
        if seen is not None:  # our own draft's id, kept by a client that sent the draft: still new
            message_id = new_message_id(domain)
        row = received_row(parsed, blob, message_id=message_id, kind="decision", sender=by, body=parsed.body)
        await add_mail(db, action.thread_id, row)
        current = await action_by_id(db, action.id)  # re-read inside the transaction
        applied = await apply_decision(db, current or action, decision, by=by, via=message_id)
        if decision.kind == "send" and not applied.applied:  # raised inside: all of it rolls back
            raise SmtpRefusal(550, "5.7.1", f"not sent: {applied.why} (action {action.id})")
        if decision.sent and applied.applied:  # it went out already: approved is done, nothing to relay
            await transition(db, action.id, "approved", "done", result=decision.sent)
        await log_event(db, "approval.decision", thread_id=action.thread_id, run_id=action.run_id,
                        action=action.id, decision=decision.kind, applied=applied.applied)
        if not applied.applied:
            await _state_reply(db, blobs, composer, applied, parsed, message_id, sender=sender)
    return Decided(thread_id=action.thread_id, applied=applied.applied)


async def _state_reply(db: Tx, blobs: BlobStore, composer: Composer, applied: Applied,
                       parsed: ParsedMail, message_id: str, *, sender: str) -> None:
    action = applied.action
    text = (f"Nothing changed: {applied.why}.\n\nAction {action.id} ({action.label}) is"
            f" {STATE_TEXT.get(applied.state, applied.state)}.")
    if applied.state == "held":
        text += "\n\n" + STILL_HELD
    ctx = MailContext(thread_id=action.thread_id, run_id=action.run_id, subject=parsed.subject,
                      in_reply_to=message_id, references=parsed.references,
                      agent=composer.config.agent_at(sender))
    mail = composer.decision_reply(ctx, text)
    # its text depends on the decision just applied: saved inside the transaction, before it commits
    blob = await blobs.save(mail.as_bytes())
    await add_mail(db, action.thread_id, message_row(mail, blob, kind=mail.kind, sender=sender,
                                                     run_id=action.run_id))
