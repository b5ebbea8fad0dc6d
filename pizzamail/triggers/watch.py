"""Watched remote mailboxes: new mail in a remote IMAP folder becomes input to a task.

Each enabled ``[watches.NAME]`` gets one asyncio task that connects, logs in, opens the folder
(EXAMINE unless ``read_only = false``), turns every mail past the last UID handled into a task,
then waits in IDLE (or polls with NOOP where IDLE is missing or refused) and looks again on new mail.
Any failure closes the connection and retries with exponential backoff and jitter, from
``retry_initial`` to ``retry_max``; a refused login or a missing password waits ``retry_max``
between tries. Problems are logged and recorded once per change, not per retry.

Parts: :mod:`pizzamail.account` (the typed IMAP session), :mod:`.watch_state` (what it remembers,
through :mod:`pizzamail.store.watches`), :mod:`.watch_mail` (the task text); this module runs them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import ssl
from dataclasses import dataclass, field
from typing import Any

from pizzamail.account.retry import retry_delay
from pizzamail.account.session import Account, AccountError, FolderStatus, ImapSession
from pizzamail.account.wire import Fetched
from pizzamail.config import Config, WatchSettings
from pizzamail.mail.build import AttachedFile
from pizzamail.mail.parse import parse_mail
from pizzamail.secrets import SecretStore
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.watches import Handled, list_watches, set_state
from pizzamail.triggers.post import TriggerMail
from pizzamail.triggers.watch_mail import carried, mail_facts, render, task_subject
from pizzamail.triggers.watch_state import begin, record

log = logging.getLogger("pizzamail.triggers")

#: how often a server without IDLE is asked for new mail
POLL_SECONDS = 60.0


def password_of(secrets: SecretStore, name: str) -> str:
    password = secrets.get(f"watch:{name}")
    if not password:
        raise AccountError("password", f"watch {name!r} has no password",
                           hint=f"set it with `pizzamail keys set watch:{name}`")
    return password


def watch_account(name: str, settings: WatchSettings) -> Account:
    """The watch's server as an :class:`Account`, its errors naming ``[watches.NAME]``."""
    return Account(name=f"watch-{name}", host=settings.host, port=settings.port, security=settings.security,
                   user=settings.user, section=f"watches.{name}", secret=f"watch:{name}",
                   test=f"pizzamail watch test {name}", read_only_setting=True)


@dataclass(kw_only=True)
class Watcher:
    """One watch's loop; it ends only when cancelled."""

    name: str
    settings: WatchSettings
    store: Store
    blobs: BlobStore
    config: Config
    secrets: SecretStore
    tls: ssl.SSLContext | None
    poll_seconds: float = POLL_SECONDS
    timeout: float = 30.0
    _problem: str | None = None
    _state: str | None = None
    _last_uid: int = 0

    async def run(self) -> None:
        attempt = 0
        while True:
            problem = await self._watch_until_failure()
            if self._state in ("watching", "polling"):
                attempt = 0  # it worked for a while: start the backoff again from retry_initial
            await self._report(problem)
            await asyncio.sleep(retry_delay(attempt, initial=self.settings.retry_initial,
                                            longest=self.settings.retry_max, patient=problem.patient,
                                            jitter=random.random()))
            attempt += 1

    async def _watch_until_failure(self) -> AccountError:
        try:
            await self._watch()
        except AccountError as problem:
            return problem
        except Exception as exc:  # our bug or a store failure: reported, never the end of the watch
            failure = AccountError("internal", f"watching failed ({type(exc).__name__}: {exc})")
            if failure.outcome != self._problem:  # the traceback once, like every problem
                log.exception("watch %s failed", self.name)
            return failure
        raise AssertionError("a watch returns only by failing")

    async def _watch(self) -> None:
        password = password_of(self.secrets, self.name)
        session = await ImapSession.open(watch_account(self.name, self.settings), tls=self.tls,
                                         reply_seconds=self.timeout, poll_seconds=self.poll_seconds)
        async with session:
            await session.login(password)
            status = await session.open_folder(self.settings.folder, read_only=self.settings.read_only)
            self._last_uid = await begin(self.store, self.name, status, mailbox=self._mailbox)
            await self._connected(session)
            await self._follow(session, status)

    async def _connected(self, session: ImapSession) -> None:
        state = "watching" if session.can_idle else "polling"
        recovered = self._problem is not None
        if recovered:
            log.info("watch %s: connected again to %s", self.name, session.where)
        await self._set_state(state, outcome="connected again" if recovered else None)
        self._problem = None

    async def _follow(self, session: ImapSession, status: FolderStatus) -> None:
        while True:
            session.begin_pass()
            for uid in await session.uids_after(self._last_uid):
                await self._handle(session, status.uidvalidity, uid)
            if not session.changed:  # else something arrived while we looked: look again first
                await session.wait_for_change(self.settings.idle_seconds)
                await self._note_idle_refused(session)

    async def _note_idle_refused(self, session: ImapSession) -> None:
        """A server that offered IDLE and refused it is polled from then on: said once a connection."""
        if self._state != "watching" or session.idle_refusal is None:
            return
        outcome = f"{session.idle_refusal}; polling every {session.poll_seconds:g} s instead"
        log.warning("watch %s: %s", self.name, outcome)
        await self._set_state("polling", outcome=outcome)

    async def _handle(self, session: ImapSession, uidvalidity: int, uid: int) -> None:
        fetched = await session.fetch(uid)
        posted = None
        if fetched is not None:  # else expunged before we got to it
            handled = Handled(watch=self.name, uidvalidity=uidvalidity, uid=uid)
            posted = await record(self.store, self.blobs, *self._task(handled, fetched),
                                  one_thread=self.settings.thread == "one")
        self._last_uid = max(self._last_uid, uid)
        if posted is None:
            return
        log.info("watch %s: UID %d became run %d", self.name, uid, posted.run_id)
        if not self.settings.read_only:
            await self._mark_seen(session, uid)

    def _task(self, handled: Handled, fetched: Fetched) -> tuple[Handled, TriggerMail]:
        """The record of the mail (with its Message-ID) and the task mail its prompt renders, carrying
        the mail and its attachments."""
        parsed = parse_mail(fetched.raw)  # once, for the text and the attachments both
        files = carried(fetched, parsed)
        facts = mail_facts(parsed, max_chars=self.settings.max_chars, carried=files)
        text, problem = render(self.settings.prompt, facts, watch=self.name, folder=self.settings.folder)
        if problem:
            log.warning("watch %s: UID %d: %s", self.name, handled.uid, problem)
        handled = dataclasses.replace(handled, message_id=facts["message_id"] or None)
        return handled, self._mail(facts, text, files.files)

    async def _mark_seen(self, session: ImapSession, uid: int) -> None:
        """Only now: the task is stored. A server that refuses costs a warning, not the watch."""
        try:
            await session.mark_seen(uid)
        except AccountError as exc:
            if exc.kind != "store":
                raise
            log.warning("watch %s: UID %d could not be marked seen: %s", self.name, uid, exc.message)

    @property
    def _mailbox(self) -> str:
        s = self.settings
        return f"{s.user}@{s.host}:{s.port}/{s.folder}"

    def _mail(self, facts: dict[str, Any], text: str, files: tuple[AttachedFile, ...]) -> TriggerMail:
        config = self.config
        return TriggerMail(
            subject=task_subject(self.name, facts, one_thread=self.settings.thread == "one"), text=text,
            source=f"watch:{self.name}", sender=config.account.address, agent=config.agent.address,
            domain=config.domain, attachments=files, model=self.settings.model,
        )

    async def _report(self, problem: AccountError) -> None:
        """Log and record a problem when it differs from the last one (not at every retry)."""
        if problem.outcome == self._problem:
            return
        self._problem = problem.outcome
        log.warning("watch %s: %s", self.name, problem.outcome)
        state = "waiting for a password" if problem.kind == "password" else "retrying"
        try:
            await self._set_state(state, outcome=problem.outcome)
        except Exception:  # a store that fails too must not end the watch: it retries all the same
            log.exception("watch %s: its state could not be recorded", self.name)

    async def _set_state(self, state: str, *, outcome: str | None = None) -> None:
        if state != self._state or outcome is not None:
            await set_state(self.store, self.name, state, outcome=outcome)
            self._state = state


@dataclass(kw_only=True)
class Watchers:
    """Every enabled watch, each in its own task, in the service's lifecycle."""

    store: Store
    blobs: BlobStore
    config: Config
    secrets: SecretStore
    tls: ssl.SSLContext | None = None
    """None: certificates are checked against the system's trusted CAs"""
    poll_seconds: float = POLL_SECONDS
    timeout: float = 30.0
    _tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    async def __aenter__(self) -> Watchers:
        for name, settings in sorted(self.config.watches.items()):
            if not settings.enabled:
                continue
            watcher = Watcher(name=name, settings=settings, store=self.store, blobs=self.blobs,
                              config=self.config, secrets=self.secrets, tls=self.tls,
                              poll_seconds=self.poll_seconds, timeout=self.timeout)
            self._tasks[name] = asyncio.create_task(watcher.run(), name=f"pizzamail-watch-{name}")
            log.info("watch %s: %s@%s:%d/%s (%s)", name, settings.user, settings.host, settings.port,
                     settings.folder, "read-only" if settings.read_only else "marks mail seen")
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Cancel every watch; each logs out of its server on the way (bounded)."""
        tasks = list(self._tasks.items())
        self._tasks.clear()
        for _, task in tasks:
            task.cancel()
        await asyncio.gather(*(task for _, task in tasks), return_exceptions=True)
        for name, _ in tasks:
            await set_state(self.store, name, "stopped")


@dataclass(frozen=True, kw_only=True)
class Probe:
    """What ``pizzamail watch test`` found."""

    exists: int
    uidnext: int
    uidvalidity: int
    idle: bool


async def probe(name: str, settings: WatchSettings, password: str, *, tls: ssl.SSLContext | None) -> Probe:
    """Connect, log in and examine the folder (read-only, whatever the watch's setting)."""
    async with await ImapSession.open(watch_account(name, settings), tls=tls) as session:
        await session.login(password)
        try:
            status = await session.open_folder(settings.folder, read_only=True)
        except AccountError as exc:
            if exc.kind == "folder":
                exc.hint = "set folder in [watches.{}] to one of: {}".format(
                    name, ", ".join(await session.folder_names()) or "(the server lists none)")
            raise
        return Probe(exists=status.exists, uidnext=status.uidnext, uidvalidity=status.uidvalidity,
                     idle=session.can_idle)


async def watch_rows(store: Store | None, config: Config) -> list[dict[str, Any]]:
    """Each configured watch for ``pizzamail triggers``: where, state, last time and outcome."""
    saved = {w.name: w for w in await list_watches(store)} if store is not None else {}
    rows = []
    for name, s in sorted(config.watches.items()):
        row = saved.get(name)
        state = ((row and row.state) or "not started") if s.enabled else "disabled"
        rows.append({"kind": "watch", "name": name, "where": f"{s.user}@{s.host}:{s.port}/{s.folder}",
                     "host": s.host, "folder": s.folder, "read_only": s.read_only, "thread": s.thread,
                     "state": state, "last_at": row.last_at if row else None,
                     "last_outcome": row.last_outcome if row else None})
    return rows
