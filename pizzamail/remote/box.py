"""The user's own IMAP account as pizzamail's mailbox: :class:`RemoteMailbox`, the
:class:`~pizzamail.mailbox.MailFolders` that filing, the Action folder and the Activity board write to.

Folders: INBOX is INBOX; Drafts, Sent, Trash, Archive and Junk are the account's own, found by
SPECIAL-USE; every other folder (Action, Activity) is pizzamail's, under ``[mailbox.imap] prefix``.
pizzamail changes only its own mails: :meth:`~RemoteMailbox.messages` lists and
:meth:`~RemoteMailbox.expunge` removes only mails it APPENDed (:mod:`pizzamail.store.remote`).

Every APPEND is idempotent. The mail is written down before it (its name and Message-ID), and the
folder is searched for the Message-ID first; a crash, or a connection lost, between the APPEND and
its record is resolved by that search, never by a second copy. All of it runs on one connection of
its own (the reader of INBOX keeps another), one operation at a time; a lost connection is opened
again once and the operation repeated, which the search makes safe.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesHeaderParser
from typing import TypeVar

from pizzamail.account.session import AccountError, FolderStatus, ImapSession
from pizzamail.config import ImapAccountSettings
from pizzamail.mailbox.writing import Delivery
from pizzamail.remote.account import mailbox_account
from pizzamail.store import Store
from pizzamail.store.mailindex import Folder
from pizzamail.store.remote import RemoteFolder, forget, intend, place, placed, placed_named, save_folder

T = TypeVar("T")

#: pizzamail's folders that are the account's own, by their SPECIAL-USE (RFC 6154)
SPECIAL_USE = {"Drafts": "\\Drafts", "Sent": "\\Sent", "Trash": "\\Trash", "Archive": "\\Archive",
               "Junk": "\\Junk"}


@dataclass(frozen=True, kw_only=True)
class RemoteMail:
    """A mail pizzamail put into a remote folder: its UID there, and the name it was delivered under."""

    uid: int
    name: str


def message_id_of(data: bytes) -> str | None:
    """The Message-ID field of a mail, as written (angle brackets included), None without one."""
    value = BytesHeaderParser().parsebytes(data).get("Message-ID")
    return (str(value).strip() or None) if value is not None else None


@dataclass(kw_only=True)
class RemoteMailbox:
    """pizzamail's folders in the account of ``settings``; use :meth:`open`, then ``async with``."""

    store: Store
    settings: ImapAccountSettings
    password: str
    tls: ssl.SSLContext | None = None
    reply_seconds: float = 30.0
    _session: ImapSession | None = field(default=None, init=False)
    _special: dict[str, str] = field(default_factory=dict, init=False)
    _delimiter: str = field(default="/", init=False)
    _folders: dict[int, RemoteFolder] = field(default_factory=dict, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    @property
    def account_key(self) -> str:
        """Whose UIDs the store's rows are: those of another account or server are others."""
        return f"{self.settings.user}@{self.settings.host}:{self.settings.port}"

    async def open(self) -> RemoteMailbox:
        """Logged in, the account's special folders known; a problem is an AccountError naming its fix."""
        async with self._lock:
            await self._connect()
        return self

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> RemoteMailbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- MailFolders ------------------------------------------------------------------------------

    async def folder(self, name: str) -> Folder | None:
        return await self._use(lambda session: self._folder(session, name))

    async def create_folder(self, name: str) -> Folder:
        async def create(session: ImapSession) -> Folder:
            await session.create_folder(self.remote_name(name))
            found = await self._folder(session, name)
            if found is None:
                raise AccountError("folder", f"{session.where} made folder {self.remote_name(name)!r}"
                                             " but cannot open it")
            return found
        return await self._use(create)

    async def messages(self, folder: Folder) -> list[RemoteMail]:
        return await self._use(lambda session: self._messages(session, folder))

    async def deliver(
        self, folder: Folder, data: bytes, *, flags: Iterable[str] = (), base: str | None = None,
        internaldate: int | None = None, message_ref: int | None = None,
    ) -> int:
        """Written down, then searched for by Message-ID, and APPENDed only if not found. A mail
        without a Message-ID (pizzamail's own all have one) cannot be searched for: it is APPENDed
        unless written down with its UID."""
        message_id = message_id_of(data) or ""
        name = base or message_id
        known = await placed_named(self.store, folder.id, name)
        if known is not None and known.uid is not None:
            uid = known.uid
        else:
            if known is None:
                await intend(self.store, folder.id, name, message_id)
            when = datetime.fromtimestamp(internaldate, UTC) if internaldate is not None else None
            uid = await self._use(lambda session: self._append_once(
                session, folder, data, flags=list(flags), when=when, message_id=message_id))
        await place(self.store, folder.id, name, uid, message_ref=message_ref)
        return uid

    async def deliver_each(self, folder: Folder, mails: Sequence[Delivery]) -> list[int]:
        """One by one: each APPEND is checked for and written down on its own."""
        return [await self.deliver(folder, mail.data, flags=mail.flags, base=mail.base,
                                   internaldate=mail.internaldate, message_ref=mail.message_ref)
                for mail in mails]

    async def expunge(self, folder: Folder, uids: Iterable[int]) -> list[int]:
        """Only pizzamail's own mails go; any other UID is left alone."""
        wanted = set(uids)
        ours = {p.uid: p.name for p in await placed(self.store, folder.id) if p.uid in wanted}

        async def remove(session: ImapSession) -> None:
            await self._open(session, folder)
            await session.expunge(sorted(ours))
        if ours:
            await self._use(remove)
            await forget(self.store, folder.id, ours.values())
        return sorted(ours)

    def remote_name(self, name: str) -> str:
        """The account's folder for pizzamail's folder ``name``."""
        if name.upper() == "INBOX":
            return "INBOX"
        use = SPECIAL_USE.get(name)
        if use is not None and use in self._special:
            return self._special[use]
        return f"{self.settings.prefix}{self._delimiter}{name}"

    # -- on the connection -------------------------------------------------------------------------

    async def _use(self, work: Callable[[ImapSession], Awaitable[T]]) -> T:
        """``work`` on the connection, one at a time; a lost connection is opened again and the work
        repeated once (each work here looks before it writes)."""
        async with self._lock:
            for attempt in range(2):
                session = self._session or await self._connect()
                try:
                    return await work(session)
                except AccountError as exc:
                    if exc.kind != "connect" or attempt:
                        raise
                    await self.close()
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def _connect(self) -> ImapSession:
        session = await ImapSession.open(mailbox_account(self.settings, name="mailbox-writer"), tls=self.tls,
                                         reply_seconds=self.reply_seconds)
        try:
            await session.login(self.password)
            self._special = await session.special_folders()
            self._delimiter = await session.delimiter() or "/"
        except BaseException:
            await session.close()
            raise
        self._session = session
        return session

    async def _folder(self, session: ImapSession, name: str) -> Folder | None:
        remote = self.remote_name(name)
        try:
            status = await session.open_folder(remote, read_only=False)
        except AccountError as exc:
            if exc.kind == "folder":
                return None
            raise
        saved = await self._remember(name, remote, status)
        use = SPECIAL_USE.get(name)
        special = use if use is not None and use in self._special else None
        return Folder(id=saved.id, name=name, uidvalidity=status.uidvalidity, uidnext=status.uidnext,
                      modseq=status.highest_modseq or 0, special_use=special, subscribed=True,
                      first_recent=status.uidnext)

    async def _open(self, session: ImapSession, folder: Folder) -> RemoteFolder:
        """``folder`` selected, its UIDVALIDITY checked (a new one voids the UIDs written down)."""
        remote = self.remote_name(folder.name)
        if session.selected == remote and folder.id in self._folders:
            return self._folders[folder.id]
        return await self._remember(folder.name, remote, await session.open_folder(remote, read_only=False))

    async def _remember(self, name: str, remote: str, status: FolderStatus) -> RemoteFolder:
        saved = await save_folder(self.store, self.account_key, name, remote=remote,
                                  uidvalidity=status.uidvalidity)
        self._folders[saved.id] = saved
        return saved

    async def _messages(self, session: ImapSession, folder: Folder) -> list[RemoteMail]:
        await self._open(session, folder)
        known: list[RemoteMail] = []
        for mail in await placed(self.store, folder.id):
            uid = mail.uid
            if uid is None:  # a crash between the APPEND (if it came) and its record
                uid = await self._find(session, mail.message_id)
                if uid is None:
                    await forget(self.store, folder.id, [mail.name])
                    continue
                await place(self.store, folder.id, mail.name, uid)
            known.append(RemoteMail(uid=uid, name=mail.name))
        present = await session.present(m.uid for m in known)
        return [m for m in known if m.uid in present]

    async def _append_once(
        self, session: ImapSession, folder: Folder, data: bytes, *, flags: list[str],
        when: datetime | None, message_id: str,
    ) -> int:
        saved = await self._open(session, folder)
        if message_id and (uid := await self._find(session, message_id)) is not None:
            return uid
        appended = await session.append(saved.remote, data, flags=flags, when=when)
        if appended is not None and appended[0] == saved.uidvalidity:
            return appended[1]
        uid = await self._find(session, message_id) if message_id else None
        if uid is None:
            raise AccountError("protocol", f"{session.where} took a mail into {saved.remote!r} and gave"
                                           " no UID for it, and it cannot be found by its Message-ID")
        return uid

    async def _find(self, session: ImapSession, message_id: str) -> int | None:
        """The first mail of the open folder with exactly this Message-ID (the search is by substring)."""
        if not message_id:
            return None
        candidates = await session.search_header("Message-ID", message_id)
        headers = await session.headers(candidates, ("Message-ID",))
        return next((uid for uid in candidates if message_id_of(headers.get(uid, b"")) == message_id), None)
