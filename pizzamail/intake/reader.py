"""The owner's own INBOX, read (``[mailbox] mode = "imap"``): IDLE, and each new mail to
:class:`~.inbox.InboxIntake`.

Built like a watch (:mod:`pizzamail.triggers.watch`): one connection in IDLE on INBOX, opened
read-only (pizzamail never changes the flags of the owner's mail), a second one on the Sent folder
for the owner check and for the drafts the user sends from any mail program (looked for after
every pass over INBOX, and at least every :data:`SENT_LOOK_SECONDS`: Gmail puts no copy into
INBOX); any failure closes both and reconnects with exponential backoff and jitter; a refused
login or a missing password waits longest. Problems are logged once per change.

Where it is in INBOX and in Sent is kept in the store (:mod:`pizzamail.store.inbox`). The first
connect starts at UIDNEXT: the mail already there is the owner's past, not tasks. A changed
UIDVALIDITY (the folder was recreated or renumbered) restarts at UIDNEXT too, reported, never a
flood of old mail.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from pizzamail.account.retry import retry_delay
from pizzamail.account.session import Account, AccountError, FolderStatus, ImapSession
from pizzamail.approvals.service import Approvals
from pizzamail.config import Config
from pizzamail.intake.inbox import ADDRESS_HEADERS, APPROVAL_HEADERS, InboxIntake, names_a_draft
from pizzamail.mail.ids import bare, first_id
from pizzamail.mail.parse import header_text, parse_bytes
from pizzamail.remote.account import mailbox_account, mailbox_password
from pizzamail.secrets import SecretStore
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.inbox import Place, Seen, find_place, passed_over, start_at

log = logging.getLogger("pizzamail.intake")

INBOX = "INBOX"
#: seconds between looks in Sent for a mail From the owner that is not there yet: a mail program
#: files its copy in Sent after sending, and the delivery into INBOX may come first
SENT_WAITS = (1.0, 2.0, 4.0, 8.0, 15.0)
#: seconds at most between looks for new mail in Sent, where a draft the user sent from any mail
#: program shows up: a provider such as Gmail delivers no copy into INBOX that would wake us sooner
SENT_LOOK_SECONDS = 30.0


@dataclass(kw_only=True)
class SentCopies:
    """The account's Sent folder (``\\Sent`` by SPECIAL-USE) over a connection of its own."""

    session: ImapSession
    folder: str | None
    """None: the account marks no folder \\Sent, so nothing is ever found there"""
    waits: tuple[float, ...] = SENT_WAITS

    async def copy_of(self, message_id: str) -> bytes | None:
        if self.folder is None:
            return None
        for wait in (0.0, *self.waits):
            await asyncio.sleep(wait)
            found = await self._look(message_id)
            if found is not None:
                return found
        return None

    async def _look(self, message_id: str) -> bytes | None:
        assert self.folder is not None
        await self.session.open_folder(self.folder, read_only=True)  # again: mail may have come
        for uid in await self.session.search_header("Message-ID", message_id):  # a substring search
            fetched = await self.session.fetch(uid)
            if fetched is not None and _message_id(fetched.raw) == bare(message_id):
                return fetched.raw
        return None


def _message_id(raw: bytes) -> str | None:
    return first_id(header_text(parse_bytes(raw), "Message-ID"))


@dataclass(kw_only=True)
class InboxReader:
    """The long-lived part (``async with``): reads the account's INBOX until the service stops."""

    intake: InboxIntake
    store: Store
    account: Account
    password: Callable[[], str]
    """the account's password (the keyring's ``mailbox`` entry), looked up at every connect; its
    absence is an :class:`AccountError` of kind ``password``"""
    tls: ssl.SSLContext | None = None
    """None: certificates are checked against the system's trusted CAs"""
    retry_initial: float = 5.0
    retry_max: float = 300.0
    idle_seconds: float = 1500.0
    timeout: float = 30.0
    sent_waits: tuple[float, ...] = SENT_WAITS
    sent_seconds: float = SENT_LOOK_SECONDS
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _problem: str | None = field(default=None, init=False)
    _connected: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    async def __aenter__(self) -> InboxReader:
        self._task = asyncio.create_task(self.run(), name="pizzamail-mailbox-inbox")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    @property
    def mailbox(self) -> str:
        """The identity of the INBOX read: UIDs belong to it."""
        return self.mailbox_of(INBOX)

    def mailbox_of(self, folder: str) -> str:
        a = self.account
        return f"{a.user}@{a.host}:{a.port}/{folder}"

    async def connected(self) -> None:
        """Until the reader is in IDLE (or polling) on INBOX: for tests and ``mailbox test``."""
        await self._connected.wait()

    async def run(self) -> None:
        attempt = 0
        while True:
            problem = await self._read_until_failure()
            if self._connected.is_set():
                attempt = 0  # it worked for a while: back off from the start again
            self._connected.clear()
            self._report(problem)
            await asyncio.sleep(retry_delay(attempt, initial=self.retry_initial, longest=self.retry_max,
                                            patient=problem.patient, jitter=random.random()))
            attempt += 1

    async def _read_until_failure(self) -> AccountError:
        try:
            await self._read()
        except AccountError as problem:
            return problem
        except Exception as exc:  # our bug or a store failure: logged, never the end of the reader
            failure = AccountError("internal", f"reading the mailbox failed ({type(exc).__name__}: {exc})")
            if failure.outcome != self._problem:
                log.exception("mailbox: reading INBOX failed")
            return failure
        raise AssertionError("the reader returns only by failing")

    async def _read(self) -> None:
        password = self.password()
        async with await self._session(password) as inbox, await self._session(password) as other:
            sent = SentCopies(session=other, folder=(await other.special_folders()).get("\\Sent"),
                              waits=self.sent_waits)
            if sent.folder is None:
                log.warning("mailbox: %s marks no folder \\Sent: only Authentication-Results can show"
                            " a mail is the owner's", inbox.where)
            if sent.folder is not None:  # sent from now on is looked at: a draft sent from elsewhere
                await self._begin(sent.folder, await other.open_folder(sent.folder, read_only=True))
            status = await inbox.open_folder(INBOX, read_only=True)
            last = await self._begin(INBOX, status)
            if self._problem is not None:
                log.info("mailbox: connected again to %s", inbox.where)
            self._problem = None
            self._connected.set()
            await self._follow(inbox, status, sent, last)

    async def _session(self, password: str) -> ImapSession:
        session = await ImapSession.open(self.account, tls=self.tls, reply_seconds=self.timeout)
        try:
            await session.login(password)
        except BaseException:
            await session.close()
            raise
        return session

    async def _begin(self, folder: str, status: FolderStatus) -> int:
        """The last UID of ``folder`` looked at, deciding the start on a first connect or a new
        UIDVALIDITY."""
        mailbox = self.mailbox_of(folder)
        saved = await find_place(self.store, folder)
        if saved is not None and saved.mailbox == mailbox and saved.uidvalidity == status.uidvalidity:
            return saved.last_uid
        start = status.uidnext - 1
        if saved is None or saved.mailbox != mailbox:
            note = (f"started at UID {status.uidnext} of {mailbox}: the {status.exists} mail(s)"
                    " already there are left alone")
            log.info("mailbox: %s", note)
        else:
            note = (f"UIDVALIDITY of {mailbox} changed from {saved.uidvalidity} to {status.uidvalidity}"
                    f" (the folder was recreated or renumbered): restarted at UID {status.uidnext};"
                    " mail already there is left alone")
            log.warning("mailbox: %s", note)
        place = Place(mailbox=mailbox, uidvalidity=status.uidvalidity, last_uid=start)
        await start_at(self.store, folder, place, note=note)
        return start

    async def _follow(self, inbox: ImapSession, status: FolderStatus, sent: SentCopies, last: int) -> None:
        while True:
            inbox.begin_pass()
            for uid in await inbox.uids_after(last):
                await self._take(inbox, status.uidvalidity, uid, sent)
                last = max(last, uid)
            await self._look_in_sent(sent)
            if not inbox.changed:  # else something arrived while we looked: look again first
                await inbox.wait_for_change(min(self.idle_seconds, self.sent_seconds))

    async def _take(self, inbox: ImapSession, uidvalidity: int, uid: int, sent: SentCopies) -> None:
        seen = Seen(mailbox=self.mailbox, folder=INBOX, uidvalidity=uidvalidity, uid=uid, message_id=None)
        header = (await inbox.headers([uid], ADDRESS_HEADERS)).get(uid)
        fetched = await inbox.fetch(uid) if header is not None and self.intake.for_an_agent(header) else None
        if fetched is None:  # not pizzamail's, or expunged before we got to it
            await passed_over(self.store, seen)
            return
        outcome = await self.intake.take(fetched, seen, sent)
        log.info("mailbox: UID %d: %s", uid, outcome)

    async def _look_in_sent(self, sent: SentCopies) -> None:
        """The drafts the user sent from any mail program since the last look (each mail's
        X-Pizzamail-Approval header is fetched, nothing else of the owner's sent mail)."""
        if sent.folder is None:
            return
        status = await sent.session.open_folder(sent.folder, read_only=True)  # again: shows new mail
        last = await self._begin(sent.folder, status)
        uids = await sent.session.uids_after(last)
        headers = await sent.session.headers(uids, APPROVAL_HEADERS)
        for uid in uids:
            seen = Seen(mailbox=self.mailbox_of(sent.folder), folder=sent.folder,
                        uidvalidity=status.uidvalidity, uid=uid, message_id=None)
            named = names_a_draft(headers.get(uid, b""))
            fetched = await sent.session.fetch(uid) if named else None
            if fetched is None:  # the owner's own sent mail, not pizzamail's business
                await passed_over(self.store, seen)
                continue
            outcome = await self.intake.take_sent(fetched, seen)
            log.info("mailbox: UID %d of %s: %s", uid, sent.folder, outcome)

    def _report(self, problem: AccountError) -> None:
        if problem.outcome != self._problem:
            self._problem = problem.outcome
            log.warning("mailbox: %s", problem.outcome)


def inbox_reader(config: Config, *, store: Store, blobs: BlobStore, approvals: Approvals,
                 secrets: SecretStore, tls: ssl.SSLContext | None = None) -> InboxReader:
    """The part ``serve`` runs in IMAP mode: ``[mailbox.imap]``'s INBOX, its password from the keyring."""
    intake = InboxIntake(store=store, blobs=blobs, config=config, approvals=approvals)
    account = mailbox_account(config.mailbox.imap, name="mailbox-inbox")
    return InboxReader(intake=intake, store=store, account=account, tls=tls,
                       password=lambda: mailbox_password(secrets))
