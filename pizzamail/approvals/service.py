"""Approvals as one service: what the runner and intake call, and the sweep that runs on its own.

The runner holds a gated call (:meth:`Approvals.hold`, inside its checkpoint), lets standing rules
release calls (:meth:`~Approvals.standing`), settles decided calls when a run resumes
(:meth:`~Approvals.settle`) and writes the request (:meth:`~Approvals.request`). Intake finds the
action a reply answers (:meth:`~Approvals.routed`, :meth:`~Approvals.sent_draft`) and records its
decision (:meth:`~Approvals.decide`). :class:`Sweep` is a long-lived part of its own: on a timer (or
when poked) it expires and reminds (:mod:`expiry`) and keeps ``Action`` = the waiting requests.
A worker's Approvals has no mailbox: the front (``serve``) keeps ``Action`` and files the mail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage

from pizzamail.approvals.decide import asks_to_stop
from pizzamail.approvals.expiry import expire_and_remind, withdraw
from pizzamail.approvals.intake import (
    Decided,
    draft_action,
    record_decision,
    routed_action,
    send_decision,
)
from pizzamail.approvals.ledger import decision_headers
from pizzamail.approvals.outbox import DRAFTS_FOLDER, Outbox, draft_message
from pizzamail.approvals.release import Waiting, settle
from pizzamail.approvals.request import request_mail, sync_action_folder
from pizzamail.auth import approvers
from pizzamail.composer import Composed, Composer, MailContext
from pizzamail.config import Config
from pizzamail.errors import RunError
from pizzamail.mail.parse import ParsedMail
from pizzamail.mailbox.writing import MailFolders
from pizzamail.providers.types import ToolCall
from pizzamail.secrets import SecretStore
from pizzamail.store import Store, Tx
from pizzamail.store.actions import HeldAction, NewHeldAction, action_for_call, canonical_json, hold_action
from pizzamail.store.approvals import matching_rule, record_release, was_released
from pizzamail.store.blobs import BlobStore
from pizzamail.store.inbox import Claim
from pizzamail.tools import Offered, Toolbox
from pizzamail.transcript import HeldStep, Transcript

__all__ = ["DRAFTS_FOLDER", "Approvals", "Sweep", "Waiting", "draft_message"]

log = logging.getLogger("pizzamail.approvals")


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(kw_only=True)
class Approvals:
    store: Store
    blobs: BlobStore
    config: Config
    composer: Composer
    mailbox: MailFolders | None = None
    """where ``Action`` is kept; None in a worker (the front keeps it)"""
    file_mail: Callable[[], Awaitable[object]] | None = None
    """files committed mail into the Maildir (a reminder); the service's one filer (None in a
    worker: the front files it)"""
    secrets: SecretStore | None = None
    """where the relay password is looked up (the keyring entry ``relay``)"""
    outbox: Outbox | None = None
    """sends approved drafts; default: one over ``[relay]``"""
    clock: Callable[[], datetime] = _utcnow
    """now: expiry, reminders and the date of a relayed draft"""
    keeps_action: Callable[[], bool] = lambda: True
    """whether this process keeps ``Action`` now: of several serves on one database only the
    leader does (its sweep copies a standby's requests there)"""
    _syncing: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def __post_init__(self) -> None:
        if self.outbox is None:
            keys = self.secrets
            self.outbox = Outbox(settings=self.config.relay, sender=self.config.account.address,
                                 domain=self.config.domain, blobs=self.blobs,
                                 password=lambda: keys.get("relay") if keys is not None else None)

    @property
    def approvers(self) -> frozenset[str]:
        return approvers(self.config)

    # -- the runner ----------------------------------------------------------------------------

    async def hold(self, db: Tx, *, run_id: int, thread_id: int, step: HeldStep,
                   idempotent: bool) -> None:
        """The held action of ``step``, in the transaction that records the step: both or neither.
        A call a standing rule released before a crash is held ``unknown``: it may have run."""
        await hold_action(db, NewHeldAction(
            run_id=run_id, thread_id=thread_id, call_id=step.call_id, tool=step.name, server=step.source,
            original=step.tool, arguments=step.arguments, reason=step.reason, idempotent=idempotent,
            interrupted=await was_released(db, run_id, step.call_id),
        ))

    async def standing(self, run_id: int, offered: Offered, call: ToolCall) -> bool:
        """Whether a standing rule lets ``call`` run; if one does, that is recorded first (the run's
        mail then carries it as a decision).

        A call released before a crash cut it off may have happened: like an approved call left
        ``executing``, it runs again only if its tool is idempotent; otherwise it is held, and its
        held action starts ``unknown`` (:meth:`hold`): the user is asked."""
        arguments = canonical_json(dict(call.arguments))
        rule = await matching_rule(self.store, server=offered.source, tool=offered.original or offered.name,
                                   arguments=arguments)
        if rule is None:
            return False
        async with self.store.write() as db:
            first = await record_release(db, run_id=run_id, call_id=call.id, rule=rule, arguments=arguments)
        if not first:
            log.warning("run %d: the call %s a standing rule released was interrupted", run_id, call.id)
        return first or offered.idempotent

    async def settle(self, run_id: int, transcript: Transcript, toolbox: Toolbox,
                     interruptible: Callable[[], AbstractContextManager[object]]) -> Waiting | None:
        """Resolve the transcript's decided held calls (:mod:`release`); what still waits, or None."""
        return await settle(store=self.store, run_id=run_id, transcript=transcript, toolbox=toolbox,
                            interruptible=interruptible, outbox=self.outbox, clock=self.clock)

    async def waiting_for(self, run_id: int, held: HeldStep) -> Waiting:
        action = await action_for_call(self.store, run_id, held.call_id)
        if action is None:
            raise RunError(f"the held call {held.call_id} has no held action in the store")
        return Waiting(action=action, why="unknown" if action.status == "unknown" else "request")

    def request(self, ctx: MailContext, waiting: Waiting, toolbox: Toolbox,
                transcript: Transcript) -> Composed:
        """The request mail for what ``waiting`` waits on."""
        return request_mail(self.composer, ctx, waiting=waiting, toolbox=toolbox, transcript=transcript,
                            bot=(ctx.agent or self.config.main_agent).address,
                            expires=self.config.expiry(waiting.action.server))

    async def decision_headers(self, run_id: int) -> list[str]:
        """``X-Pizzamail-Decision`` values for what decided this run's gated calls."""
        return await decision_headers(self.store, run_id)

    # -- intake ---------------------------------------------------------------------------------

    async def routed(self, msg: EmailMessage, recipients: list[str]) -> HeldAction | None:
        """The action a reply answers, or None (then it is a task)."""
        return await routed_action(self.store, msg, recipients)

    async def stops(self, msg: EmailMessage, sender: str) -> bool:
        """Whether ``msg`` is an approver's "stop" for its thread's working run (read by the rule of
        an approval: nothing else said). Anyone else's "stop" is an ordinary mail."""
        if sender.lower() not in self.approvers:
            return False
        return await asyncio.to_thread(asks_to_stop, msg)  # pure, but a long reply takes a while

    async def sent_draft(self, msg: EmailMessage) -> HeldAction | None:
        """The pending ``draft_email`` a mail to someone else is the sent draft of, or None."""
        return await draft_action(self.store, msg)

    async def decide(self, raw: bytes, parsed: ParsedMail, msg: EmailMessage, *, action: HeldAction,
                     sender: str, sent_to: list[str] | None = None, claim: Claim | None = None,
                     already_sent: bool = False) -> Decided:
        """Record what a reply decides, or (``sent_to``) the sending of the draft to those
        addresses; committed before intake answers 250 (with ``claim``, a mail of the owner's own
        mailbox: in the same transaction). ``already_sent``: the user's own provider sent it (found
        in the account's Sent): the action is done with it, and nothing is relayed."""
        decision = (await send_decision(self.blobs, raw, msg, sent_to, sent=already_sent)
                    if sent_to is not None else None)
        return await record_decision(
            self.store, self.blobs, raw, parsed, msg, action=action, approvers=self.approvers,
            composer=self.composer, sender=sender, domain=self.config.domain, decision=decision, claim=claim)

    # -- the Action folder, expiry and reminders ------------------------------------------------

    async def sync(self) -> bool:
        """Make ``Action`` hold exactly the waiting requests; True when a deleted request was
        taken as "ignore" (its run is queued again)."""
        if self.mailbox is None or not self.keeps_action():
            return False
        async with self._syncing:
            return await sync_action_folder(self.store, self.mailbox, self.blobs,
                                            owner=self.config.account.address)

    async def withdraw(self, run_id: int) -> None:
        """A run ending ``stopped`` asks nothing any more: its held calls expire, their requests
        leave ``Action``."""
        if await withdraw(self.store, run_id):
            await self.sync()

    async def sweep(self) -> bool:
        """Expire and remind, then :meth:`sync`; True when a run was queued again."""
        async with self._syncing:
            expired, reminded = await expire_and_remind(self.store, self.blobs, self.composer, self.config,
                                                        now=self.clock())
            if reminded and self.file_mail is not None:
                await self.file_mail()
        return await self.sync() or bool(expired)


@dataclass(kw_only=True)
class Sweep:
    """The long-lived part (``async with``) that runs :meth:`Approvals.sweep` every ``interval`` and
    when poked. A run it queues again (an expired or ignored request) is announced by the store."""

    approvals: Approvals
    interval: float = 2.0
    _poked: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _stopping: bool = field(default=False, init=False)

    async def __aenter__(self) -> Sweep:
        self._stopping = False
        self._task = asyncio.create_task(self._loop(), name="pizzamail-approvals-sweep")
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Not cancelled: a sweep under way finishes its writes (a Maildir copy, its record)."""
        self._stopping = True
        self._poked.set()
        if self._task is not None:
            await self._task
            self._task = None

    def poke(self) -> None:
        """Look now instead of at the next tick."""
        self._poked.set()

    async def once(self) -> None:
        await self.approvals.sweep()

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._poked.wait()
            if self._stopping:
                return
            self._poked.clear()
            try:
                await self.once()
            except Exception:  # the next tick tries again; nothing is decided by a failed look
                log.exception("could not sweep the approval requests")
