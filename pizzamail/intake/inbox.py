"""A mail from the owner's own INBOX (``[mailbox] mode = "imap"``), taken like SMTP intake takes one.

Only mail to an agent's address (``me+bot@example.com``, a request's ``me+bot+NONCE@…``) is
pizzamail's; the rest of the inbox is the owner's business and is passed over unread (only its
addressing headers are fetched: :meth:`InboxIntake.for_an_agent`). A mail
pizzamail wrote itself (its Message-ID is in the store) is passed over too.

The owner's mail (:mod:`.owner`: found in Sent, or vouched for by Authentication-Results) goes the
ways an SMTP submission goes: a reply to an approval request is a decision, an approver's ``stop``
stops, anything else is a task (recorded only, when the agent is only in Cc). Anyone else's mail is
an outsider's: it starts a triage run under the outsider rules (``runs.source`` ``mailbox:AGENT``,
:mod:`pizzamail.triggers.policy`), and a reply of theirs to an approval request decides nothing:
it is refused, recorded, and the owner is told in the request's thread.

A pending ``draft_email`` the user sent from their own mail program is found in Sent
(:meth:`InboxIntake.take_sent`), or in INBOX when its copy reaches an agent: their approval with
edits, already sent by their provider.

Each mail is claimed (:func:`pizzamail.store.inbox.claim`) in the transaction of what it becomes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from email.message import EmailMessage
from email.utils import getaddresses

from pizzamail.account.wire import Fetched
from pizzamail.approvals.decide import parse_approval_header
from pizzamail.approvals.service import Approvals
from pizzamail.composer import MailContext
from pizzamail.config import Config
from pizzamail.errors import PizzamailError
from pizzamail.intake.control import record_stop
from pizzamail.intake.owner import SentFolder, Verdict, check_owner
from pizzamail.intake.tasks import store_task
from pizzamail.mail.parse import ParsedMail, header_text, parse_bytes, parsed_mail
from pizzamail.store import Store, Tx
from pizzamail.store.actions import HeldAction
from pizzamail.store.blobs import BlobStore
from pizzamail.store.inbox import Seen, claim, claimer, passed_over
from pizzamail.store.mailwriter import add_mail, message_row
from pizzamail.store.threads import find_message, log_event, thread_for_references, thread_subject
from pizzamail.triggers.post import TriggerMail, post_task
from pizzamail.triggers.watch_mail import carried, mail_facts, render, task_subject

log = logging.getLogger("pizzamail.intake")

#: headers naming who a mail reached besides To and Cc (a Bcc), as receiving servers add them
DELIVERY_HEADERS = ("Delivered-To", "X-Original-To", "Envelope-To")
#: all a mail's addressing: what is fetched of every new mail to see whether it is pizzamail's
ADDRESS_HEADERS = ("To", "Cc", *DELIVERY_HEADERS)
#: what is fetched of each new mail in Sent: whether it is a draft of pizzamail's, sent
APPROVAL_HEADERS = ("X-Pizzamail-Approval",)
#: text of an outsider's mail handed to its triage run at most
MAX_TRIAGE_CHARS = 20000


@dataclass(frozen=True, kw_only=True)
class Addressed:
    agent: str
    runs: bool
    """False: the agent is only in Cc, so the mail is recorded in its thread and runs nothing"""
    recipients: tuple[str, ...]


def agent_reached(address: str, agents: frozenset[str]) -> str | None:
    """The agent ``address`` is (``me+bot@x``) or a plus-address of (``me+bot+tok@x``), else None."""
    address = address.lower()
    if address in agents:
        return address
    local, _, domain = address.rpartition("@")
    found = [a for a in agents if _plus_of(local, domain, a)]
    return max(found, key=len, default=None)


def _plus_of(local: str, domain: str, agent: str) -> bool:
    agent_local, _, agent_domain = agent.rpartition("@")
    return domain == agent_domain and local.startswith(agent_local + "+")


def addressed(msg: EmailMessage, agents: frozenset[str]) -> Addressed | None:
    """Which agent a mail is for, like SMTP intake's routing: the first agent in To, else one it
    reached otherwise (a Bcc) that is not in Cc, else one in Cc only (runs nothing); None when it
    reached no agent."""
    to, cc, delivered = (_addresses(msg, *names) for names in (("To",), ("Cc",), DELIVERY_HEADERS))
    recipients = tuple(dict.fromkeys(to + cc + delivered))
    reached = {name: [a for a in map(lambda r: agent_reached(r, agents), found) if a]
               for name, found in (("to", to), ("cc", cc), ("delivered", delivered))}
    if reached["to"]:
        return Addressed(agent=reached["to"][0], runs=True, recipients=recipients)
    bcc = [a for a in reached["delivered"] if a not in reached["cc"]]
    if bcc:
        return Addressed(agent=bcc[0], runs=True, recipients=recipients)
    if reached["cc"]:
        return Addressed(agent=reached["cc"][0], runs=False, recipients=recipients)
    return None


def reaches_an_agent(header: bytes, agents: frozenset[str]) -> bool:
    """Whether header lines (:data:`ADDRESS_HEADERS` as a fetch brings them) address an agent."""
    return addressed(parse_bytes(header.rstrip(b"\r\n") + b"\r\n\r\n"), agents) is not None


def names_a_draft(header: bytes) -> bool:
    """Whether header lines (:data:`APPROVAL_HEADERS` as a fetch brings them) name a held action."""
    msg = parse_bytes(header.rstrip(b"\r\n") + b"\r\n\r\n")
    return parse_approval_header(header_text(msg, "X-Pizzamail-Approval")) is not None


def _addresses(msg: EmailMessage, *names: str) -> list[str]:
    """As written: a request's reply address carries its nonce, whose case counts."""
    values = [str(v) for name in names for v in msg.get_all(name) or []]
    return [addr for _, addr in getaddresses(values) if "@" in addr]


@dataclass(kw_only=True)
class InboxIntake:
    """Takes one fetched mail of the account's INBOX: what :class:`~.reader.InboxReader` calls."""

    store: Store
    blobs: BlobStore
    config: Config
    approvals: Approvals

    @property
    def agents(self) -> frozenset[str]:
        return frozenset(a.address.lower() for a in self.config.all_agents())

    def for_an_agent(self, header: bytes) -> bool:
        """Whether a mail whose :data:`ADDRESS_HEADERS` are ``header`` reaches an agent: only then is
        the whole mail fetched (the owner's other mail stays unread)."""
        return reaches_an_agent(header, self.agents)

    async def take(self, fetched: Fetched, seen: Seen, sent: SentFolder) -> str:
        """What the mail became, for the log."""
        msg, parsed = await asyncio.to_thread(_parse, fetched.raw)
        seen = replace(seen, message_id=parsed.message_id)
        to = addressed(msg, self.agents)
        if to is None or (parsed.message_id and await find_message(self.store, parsed.message_id)):
            await passed_over(self.store, seen)
            return "not for an agent" if to is None else "already in pizzamail (its own, or taken before)"
        verdict = await check_owner(msg, parsed, fetched.raw, owner=self.config.account.address,
                                    approvers=self.approvals.approvers,
                                    authserv_id=self.config.mailbox.imap.authserv_id,
                                    sent=sent)
        if not verdict.owner:
            return await self._outsider(fetched, msg, parsed, seen, to, verdict)
        try:
            return await self._owners(fetched.raw, msg, parsed, seen, to)
        except PizzamailError as exc:  # what SMTP would have refused (a reply naming two requests)
            return await self._refused(seen, exc.message)

    async def take_sent(self, fetched: Fetched, seen: Seen) -> str:
        """A mail of the account's Sent folder naming a pending ``draft_email`` (its
        X-Pizzamail-Approval, id and nonce): the user sent the draft from their own mail program.
        Being in Sent makes it the owner's; it is their approval with edits (``send``), and it
        already went out through their provider: the action is done with what they sent, and
        pizzamail relays nothing. Claimed in the decision's transaction."""
        msg, parsed = await asyncio.to_thread(_parse, fetched.raw)
        seen = replace(seen, message_id=parsed.message_id)
        action = await self.approvals.sent_draft(msg)
        if action is None:  # decided before (sent twice, or answered by a reply), or not ours
            await passed_over(self.store, seen)
            return "names no pending draft"
        try:
            return await self._draft_sent(fetched.raw, parsed, msg, seen, action)
        except PizzamailError as exc:  # not an approver's, or the draft was decided meanwhile
            return await self._refused(seen, exc.message)

    async def _draft_sent(self, raw: bytes, parsed: ParsedMail, msg: EmailMessage, seen: Seen,
                          action: HeldAction) -> str:
        decided = await self.approvals.decide(
            raw, parsed, msg, action=action, sender=self.config.main_agent.address,
            sent_to=_addresses(msg, "To", "Cc", "Bcc"), claim=claimer(seen, outcome="draft sent"),
            already_sent=True)
        return "taken before" if decided.duplicate else f"draft of action {action.id} sent by the owner"

    async def _owners(self, raw: bytes, msg: EmailMessage, parsed: ParsedMail, seen: Seen,
                      to: Addressed) -> str:
        draft = await self.approvals.sent_draft(msg)
        if draft is not None:  # a sent draft that also reached an agent (Cc): not a reply to read
            return await self._draft_sent(raw, parsed, msg, seen, draft)
        action = await self.approvals.routed(msg, list(to.recipients))
        if action is not None:
            decided = await self.approvals.decide(raw, parsed, msg, action=action, sender=to.agent,
                                                  claim=claimer(seen, outcome="decision"))
            return "taken before" if decided.duplicate else f"decision on action {action.id}"
        thread_id = await thread_for_references(self.store, parsed.thread_refs())
        if thread_id is not None and await self.approvals.stops(msg, parsed.sender or ""):
            stopped = await record_stop(self.store, self.blobs, self.approvals.composer, raw, parsed,
                                        thread_id=thread_id, bot=to.agent, domain=self.config.domain,
                                        claim=claimer(seen, outcome="stop"))
            return "taken before" if stopped.duplicate else f"stop in thread {thread_id}"
        stored = await store_task(self.store, self.blobs, raw, parsed, agent=to.agent,
                                  domain=self.config.domain, runs=to.runs,
                                  claim=claimer(seen, outcome="task" if to.runs else "noted"))
        if stored.duplicate:
            return "taken before"
        return f"task: run {stored.run_id}" if to.runs else f"recorded in thread {stored.thread_id}"

    async def _outsider(self, fetched: Fetched, msg: EmailMessage, parsed: ParsedMail, seen: Seen,
                        to: Addressed, verdict: Verdict) -> str:
        try:
            action = await self.approvals.routed(msg, list(to.recipients))
        except PizzamailError:  # names two requests: decides nothing either way
            action = None
        if action is not None:
            return await self._refuse_decision(parsed, seen, action, verdict, to.agent)
        triage = self._triage(fetched, parsed, to.agent)
        async with self.store.write() as db:
            if not await claim(db, seen, outcome=f"triage ({verdict.why})"):
                return "taken before"
            posted = await post_task(db, self.blobs, triage, thread_id=None)
        return f"outsider's mail ({verdict.why}): triage run {posted.run_id}"

    def _triage(self, fetched: Fetched, parsed: ParsedMail, agent: str) -> TriggerMail:
        files = carried(fetched, parsed)
        facts = mail_facts(parsed, max_chars=MAX_TRIAGE_CHARS, carried=files)
        text, _ = render("", facts, watch=agent, folder="INBOX")
        return TriggerMail(subject=task_subject(agent, facts, one_thread=False), text=text,
                           source=f"mailbox:{agent}", sender=self.config.account.address, agent=agent,
                           domain=self.config.domain, attachments=files.files)

    async def _refuse_decision(self, parsed: ParsedMail, seen: Seen, action: HeldAction, verdict: Verdict,
                               agent: str) -> str:
        """Recorded, never applied; the owner hears of it in the request's thread, in case it was
        their own reply whose copy their mail program did not keep in Sent."""
        by = parsed.sender or "an unknown sender"
        subject = await thread_subject(self.store, action.thread_id)  # not the stranger's words
        async with self.store.write() as db:
            if not await claim(db, seen, outcome=f"refused decision on action {action.id} ({verdict.why})"):
                return "taken before"
            await log_event(db, "approval.refused", thread_id=action.thread_id, run_id=action.run_id,
                            action=action.id, by=by, why=verdict.why)
            await self._tell_owner(db, action, subject, agent, text=(
                f"A reply from {by} to the request for action {action.id} ({action.label}) decided nothing:"
                f" it could not be shown to be yours ({verdict.why}). If it was yours, send it again from"
                " a mail program that keeps what it sends in your Sent folder."))
        log.warning("refused a decision on action %d from %s: %s", action.id, by, verdict.why)
        return f"refused decision on action {action.id}"

    async def _tell_owner(self, db: Tx, action: HeldAction, subject: str, agent: str,
                          *, text: str) -> None:
        ctx = MailContext(thread_id=action.thread_id, run_id=action.run_id, subject=subject,
                          in_reply_to=action.request_message_id, references=[],
                          agent=self.config.agent_at(agent))
        mail = self.approvals.composer.decision_reply(ctx, text)
        blob = await self.blobs.save(mail.as_bytes())
        await add_mail(db, action.thread_id, message_row(mail, blob, kind=mail.kind, sender=agent,
                                                         run_id=action.run_id))

    async def _refused(self, seen: Seen, why: str) -> str:
        async with self.store.write() as db:
            await claim(db, seen, outcome=f"refused: {why}")
        log.warning("mailbox: UID %d refused: %s", seen.uid, why)
        return f"refused: {why}"


def _parse(raw: bytes) -> tuple[EmailMessage, ParsedMail]:
    msg = parse_bytes(raw)
    return msg, parsed_mail(msg)
