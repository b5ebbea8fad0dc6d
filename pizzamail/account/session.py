"""An IMAP account, through a small typed session over IMAPClient (watches and the user's own mailbox).

IMAPClient is synchronous: each session has one worker thread of its own that makes every call, in
order, and the async methods here await it. What IMAPClient returns (untyped dicts and tuples) is
read by :mod:`.wire`, and every failure becomes one :class:`AccountError`, so the rest of
pizzamail never sees the library. An :class:`Account` says where the server is and where its
settings live, so that every error names its fix.

IDLE is spoken on the imaplib connection IMAPClient wraps: ``IMAPClient.idle()`` fails on an untagged
response before the server's ``+`` (allowed, and what our own server sends when mail came since the
last command), and ``idle_check()`` ignores responses imaplib has already buffered and takes a closed
connection for silence. The worker waits in ``select`` on the socket and on a wake-up socket pair:
no CPU while nothing happens, and stop ends the wait at once. Every other wait is bounded by the
socket timeout (``reply_seconds``).

A connection that dies without a word (a NAT mapping dropped, a laptop asleep, a server gone without
FIN or RST) would otherwise show only when IDLE is renewed, up to ``idle_seconds`` later: TCP
keepalive (:func:`keep_alive`) notices it within about two minutes and ends the wait with an error.
A server that offers IDLE but refuses it (some proxies and gateways do) is polled with NOOP instead,
like one without IDLE, for the rest of the session.

Reading never changes the remote ``\\Seen`` flags (``BODY.PEEK[]``; EXAMINE when opened read-only).
The writes are :meth:`ImapSession.mark_seen`, :meth:`~ImapSession.append`,
:meth:`~ImapSession.create_folder` and :meth:`~ImapSession.expunge`; a watch calls only the first,
and only when the user allowed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import imaplib
import io
import logging
import re
import selectors
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, cast

from imapclient import DELETED, SEEN, IMAPClient  # type: ignore[import-untyped]  # IMAPClient ships no py.typed
from imapclient.exceptions import LoginError  # type: ignore[import-untyped]

from pizzamail.account.wire import (
    Fetched,
    appended_uid,
    fetched,
    folder_delimiter,
    folder_names,
    folder_status,
    header_values,
    highest_modseq,
    special_folders,
)
from pizzamail.errors import PizzamailError

T = TypeVar("T")

#: bytes of a mail fetched at most: a larger mail gives its task only its start, without attachments
MAX_FETCH_BYTES = 2 * 1024 * 1024
#: the polite goodbye (DONE, LOGOUT) may take this long before the connection is simply dropped
CLOSE_SECONDS = 5.0
#: TCP keepalive: the first probe after this many seconds of silence (also keeps NAT mappings fresh;
#: the shortest common NAT timeouts are a few minutes), then one every ``KEEPALIVE_INTERVAL`` s; the
#: connection is dead after ``KEEPALIVE_PROBES`` unanswered ones: 60 + 3 * 20 s = 2 min of silence
KEEPALIVE_IDLE = 60
KEEPALIVE_INTERVAL = 20
KEEPALIVE_PROBES = 3

# IMAPClient logs every command and response at DEBUG (whole mails of the user's real inbox): none of
# it belongs in pizzamail's log, even with --verbose.
logging.getLogger("imapclient").setLevel(logging.WARNING)


class AccountError(PizzamailError):
    """An IMAP account cannot be used now. ``kind``: connect, tls, login, password, folder, store,
    protocol or internal (our own failure)."""

    def __init__(self, kind: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind

    @property
    def patient(self) -> bool:
        """Retrying soon cannot help (and a wrong password retried fast may lock the account)."""
        return self.kind in ("login", "password")

    @property
    def outcome(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


@dataclass(frozen=True, kw_only=True)
class Account:
    """Where an IMAP account is, and where its settings live (named in the hints of its errors)."""

    name: str
    """names the session's worker thread: ``pizzamail-NAME``"""
    host: str
    port: int
    security: str
    """ssl, starttls or none"""
    user: str
    section: str
    """the config table of these settings, such as ``watches.work`` or ``mailbox.imap``"""
    secret: str
    """the password's keyring entry, such as ``watch:work``: ``pizzamail keys set SECRET``"""
    test: str
    """the command that checks the account and lists its folders, such as ``pizzamail watch test work``"""
    read_only_setting: bool = False
    """whether ``read_only = true`` in :attr:`section` is the fix for a folder the server keeps read-only"""


@dataclass(frozen=True, kw_only=True)
class FolderStatus:
    uidvalidity: int
    uidnext: int
    exists: int
    highest_modseq: int | None = None
    """CONDSTORE's HIGHESTMODSEQ when the server reports it"""


def keep_alive(sock: socket.socket) -> None:
    """TCP keepalive on ``sock`` with our timing where the platform lets us set it (Linux has all
    three options; macOS has no ``TCP_KEEPIDLE`` but ``TCP_KEEPALIVE``, the same in seconds; Windows
    before 10 1709 refuses the timing: its defaults stay). For TLS, the options go on the socket
    under the TLS layer."""
    setopt = socket.socket.setsockopt  # the plain socket's own method, also for an SSLSocket
    setopt(sock, socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    idle = getattr(socket, "TCP_KEEPIDLE", getattr(socket, "TCP_KEEPALIVE", None))
    timing = ((idle, KEEPALIVE_IDLE), (getattr(socket, "TCP_KEEPINTVL", None), KEEPALIVE_INTERVAL),
              (getattr(socket, "TCP_KEEPCNT", None), KEEPALIVE_PROBES))
    for option, value in timing:
        if option is not None:
            with contextlib.suppress(OSError):  # keepalive with the system's timing still helps
                setopt(sock, socket.IPPROTO_TCP, option, value)


def client_context(cafile: str | None = None) -> ssl.SSLContext:
    """Certificates verified against the system's CAs, or only against ``cafile`` when given."""
    return ssl.create_default_context(cafile=cafile)


class ImapSession:
    """A logged-in connection to one account; use :meth:`open`, then ``async with``. One folder is
    open at a time (:meth:`open_folder`): the mail methods work on it."""

    def __init__(self, account: Account, *, reply_seconds: float, poll_seconds: float) -> None:
        self.account = account
        self.poll_seconds = poll_seconds
        self._timeout = reply_seconds
        self._password = ""
        self._client: Any = None  # the IMAPClient, made (and only ever used) in the worker thread
        self._capabilities: frozenset[bytes] = frozenset()
        self._idle_refusal: str | None = None  # the server's NO or BAD to IDLE: poll from then on
        self._changed = False
        self._broken = False  # the connection failed: no LOGOUT at close
        self._closed = False
        self._selected: str | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"pizzamail-{account.name}")
        self._wake_in, self._wake_out = socket.socketpair()
        self._wake_out.setblocking(False)

    @classmethod
    async def open(
        cls, account: Account, *, tls: ssl.SSLContext | None = None,
        reply_seconds: float = 30.0, poll_seconds: float = 60.0,
    ) -> ImapSession:
        """Connected and greeted (with TLS as configured), not yet logged in; ``reply_seconds``
        bounds the wait for each answer of the server."""
        session = cls(account, reply_seconds=reply_seconds, poll_seconds=poll_seconds)
        context = (tls or client_context()) if account.security != "none" else None
        try:
            await session._call(lambda: session._connect(context))
        except BaseException:
            await session.close()
            raise
        return session

    async def __aenter__(self) -> ImapSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def can_idle(self) -> bool:
        """Offered by the server and not refused so far."""
        return b"IDLE" in self._capabilities and self._idle_refusal is None

    @property
    def idle_refusal(self) -> str | None:
        """Why the IDLE the server offers cannot be used (its refusal), or None."""
        return self._idle_refusal

    @property
    def where(self) -> str:
        return f"{self.account.host}:{self.account.port}"

    def offers(self, capability: str) -> bool:
        """Whether the server offered ``capability`` (such as UIDPLUS or CONDSTORE) after login."""
        return capability.upper().encode("ascii") in self._capabilities

    @property
    def selected(self) -> str | None:
        """The folder open now, None before :meth:`open_folder`."""
        return self._selected

    async def login(self, password: str) -> None:
        self._password = password  # only to keep it out of error texts
        self._capabilities = await self._call(lambda: self._login(password))

    async def open_folder(self, folder: str, *, read_only: bool) -> FolderStatus:
        """SELECT (EXAMINE when ``read_only``) ``folder``: the mail methods work on it until the next one."""
        return await self._call(lambda: self._open_folder(folder, read_only))

    async def folder_names(self) -> list[str]:
        return await self._call(lambda: folder_names(self._client.list_folders()))

    async def special_folders(self) -> dict[str, str]:
        """Special use (``\\Sent``, ``\\Drafts``, ``\\Trash``, ...) -> the account's folder for it
        (RFC 6154); a use the server marks on no folder is missing."""
        return await self._call(lambda: special_folders(self._list_special_use()))

    async def delimiter(self) -> str | None:
        """The separator of folder levels (``/`` or ``.``), None on a server without levels."""
        return await self._call(lambda: folder_delimiter(self._client.list_folders("", "")))

    async def create_folder(self, folder: str) -> bool:
        """CREATE ``folder`` and subscribe to it, so mail clients show it; False if it was there."""
        return await self._call(lambda: self._create(folder))

    async def append(
        self, folder: str, raw: bytes, *, flags: Iterable[str] = (), when: datetime | None = None
    ) -> tuple[int, int] | None:
        """APPEND ``raw`` to ``folder`` (open or not), ``when`` its INTERNALDATE: its (UIDVALIDITY,
        UID) when the server says (UIDPLUS), else None. Not idempotent by itself: look first with
        :meth:`search_header`."""
        flag_list = list(flags)
        return await self._call(lambda: self._append(folder, raw, flag_list, when))

    async def search_header(self, field: str, value: str) -> list[int]:
        """UIDs in the open folder whose header ``field`` contains ``value`` (UID SEARCH HEADER)."""
        return sorted(int(uid) for uid in await self._call(
            lambda: self._client.search(["HEADER", field, value])))

    async def headers(self, uids: list[int], fields: tuple[str, ...]) -> dict[int, bytes]:
        """UID -> those header fields of each mail still there, as raw header lines (no flags change)."""
        if not uids:
            return {}
        item = f"BODY.PEEK[HEADER.FIELDS ({' '.join(f.upper() for f in fields)})]"
        return await self._call(lambda: header_values(self._client.fetch(uids, [item])))

    async def expunge(self, uids: list[int]) -> None:
        """Remove mails of the open folder for good: ``\\Deleted``, then UID EXPUNGE (UIDPLUS) so
        that other mails someone else marked deleted stay; plain EXPUNGE on a server without it."""
        if uids:
            await self._call(lambda: self._expunge(uids))

    def begin_pass(self) -> None:
        """A look at the folder starts: changes announced from now on mean look again."""
        self._changed = False

    @property
    def changed(self) -> bool:
        return self._changed

    async def uids_after(self, uid: int) -> list[int]:
        # "n:*" also names the highest UID when it is below n (RFC 3501 §6.4.8): filtered here.
        return sorted(u for u in await self._call(lambda: self._search(f"{uid + 1}:*")) if u > uid)

    async def present(self, uids: Iterable[int]) -> set[int]:
        """Which of ``uids`` the open folder still holds (one UID SEARCH, however large the folder).
        A NOOP first: the open folder's view drops what other clients expunged only between commands."""
        wanted = sorted(set(uids))
        if not wanted:
            return set()

        def search() -> list[int]:
            self._client.noop()
            return self._search(",".join(map(str, wanted)))
        return set(await self._call(search)) & set(wanted)

    async def fetch(self, uid: int) -> Fetched | None:
        """The mail (its first :data:`MAX_FETCH_BYTES`) and its size, unseen flags untouched; None if gone."""
        items = [f"BODY.PEEK[]<0.{MAX_FETCH_BYTES}>", "RFC822.SIZE"]
        return await self._call(lambda: fetched(self._client.fetch([uid], items), uid, limit=MAX_FETCH_BYTES))

    async def mark_seen(self, uid: int) -> None:
        """``\\Seen`` on one mail; a refusal is an AccountError of kind ``store``."""
        await self._call(lambda: self._mark_seen(uid))

    async def wait_for_change(self, seconds: float) -> None:
        """Until the server announces new mail or ``seconds`` pass: IDLE, else NOOP polls. A refused
        IDLE returns at once (see :attr:`idle_refusal`); :attr:`can_idle` is False from then on."""
        if self.can_idle:
            await self._call(lambda: self._idle(seconds))
            return
        await asyncio.sleep(min(seconds, self.poll_seconds))
        await self._call(lambda: self._client.noop())

    async def close(self) -> None:
        """LOGOUT politely (ending IDLE first) when the connection still works, then drop it."""
        if self._closed:
            return
        self._closed = True
        self._wake()
        polite = False
        try:
            async with asyncio.timeout(CLOSE_SECONDS):
                await self._call(self._logout)
            polite = True
        except Exception:  # going away either way: nothing here is worth telling the user
            pass
        finally:
            self._drop(interrupt=not polite)

    # -- the async side of the worker -----------------------------------------------------------

    async def _call(self, work: Callable[[], T]) -> T:
        """``work`` in the worker thread, after what is already there; its failure is an AccountError."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._worker, self._guarded, work)
        except asyncio.CancelledError:
            self._wake()  # a wait there ends now; any other call within the socket timeout
            raise

    def _wake(self) -> None:
        """End the worker's current (or next) IDLE wait; a stale wake costs one extra look."""
        with contextlib.suppress(OSError):  # full: a wake is pending anyway; closed: nothing waits
            self._wake_out.send(b"\0")

    def _drop(self, *, interrupt: bool) -> None:
        """Let the worker go; ``interrupt`` shuts the socket first, ending any read it is stuck in."""
        client = self._client
        if interrupt and client is not None:
            with contextlib.suppress(OSError):  # the socket's own method: the TLS layer stays the worker's
                socket.socket.shutdown(client.socket(), socket.SHUT_RDWR)
        self._worker.submit(self._release)
        self._worker.shutdown(wait=False)

    # -- in the worker thread --------------------------------------------------------------------

    def _guarded(self, work: Callable[[], T]) -> T:
        try:
            result = work()
            if self._client is not None:
                self._note_changes()
            return result
        except Exception as exc:
            if isinstance(exc, OSError | imaplib.IMAP4.abort):
                self._broken = True
            raise self._problem(exc) from None  # the library's text may quote a command (a password)

    @property
    def _imap(self) -> imaplib.IMAP4:
        """The imaplib connection inside IMAPClient: IDLE and the untagged responses are read on it."""
        imap: imaplib.IMAP4 = self._client._imap
        return imap

    def _connect(self, context: ssl.SSLContext | None) -> None:
        s = self.account
        self._client = IMAPClient(s.host, port=s.port, ssl=s.security == "ssl", ssl_context=context,
                                  timeout=self._timeout)
        keep_alive(self._client.socket())  # the descriptor stays the same through STARTTLS
        if s.security == "starttls":
            # Never fall back to clear text: the password would cross the network readable.
            if not self._client.has_capability("STARTTLS"):
                raise AccountError("tls", f"{self.where} does not offer STARTTLS",
                                   hint=f'use security = "ssl" (usually port 993) in [{s.section}]')
            self._client.starttls(context)  # IMAPClient asks CAPABILITY again: the clear text one is void

    def _login(self, password: str) -> frozenset[bytes]:
        client, user = self._client, self.account.user
        try:
            if (user + password).isascii():
                client.login(user, password)
            elif client.has_capability("AUTH=PLAIN"):
                client.plain_login(user, password)  # SASL PLAIN is UTF-8; imaplib's LOGIN is ASCII only
            else:
                raise AccountError("login", f"{self.where} offers no AUTH=PLAIN, which a user name or"
                                            " password beyond ASCII needs", hint=self._login_hint)
        except LoginError as exc:
            if isinstance(exc.__context__, imaplib.IMAP4.abort):  # lost, not refused
                raise exc.__context__ from None
            raise AccountError("login", f"{self.where} refused the login of {user!r}: {self._reason(exc)}",
                               hint=self._login_hint) from None
        return frozenset(bytes(c).upper() for c in client.capabilities())  # IDLE may come only now

    @property
    def _login_hint(self) -> str:
        return (f"check user in [{self.account.section}] and set the password with"
                f" `pizzamail keys set {self.account.secret}`")

    def _open_folder(self, folder: str, read_only: bool) -> FolderStatus:
        account = self.account
        self._selected = None
        try:
            answer = self._client.select_folder(folder, readonly=read_only)  # EXAMINE when read-only
        except imaplib.IMAP4.readonly:
            fix = f"set read_only = true in [{account.section}]" if account.read_only_setting else None
            raise AccountError("folder", f"{self.where} opens {folder!r} only read-only", hint=fix) from None
        except imaplib.IMAP4.abort:
            raise
        except imaplib.IMAP4.error as exc:
            raise AccountError("folder", f"{self.where} cannot open folder {folder!r}: {self._reason(exc)}",
                               hint=f"check folder in [{account.section}] (`{account.test}` lists the"
                                    " server's folders)") from None
        uidvalidity, uidnext, exists = folder_status(answer)
        if uidvalidity is None:
            raise AccountError("protocol", f"{self.where} gave no UIDVALIDITY for {folder!r}")
        if uidnext is None:  # optional before IMAP4rev2: one past the highest UID
            uidnext = max(self._search("*"), default=0) + 1
        self._selected = folder
        return FolderStatus(uidvalidity=uidvalidity, uidnext=uidnext, exists=exists,
                            highest_modseq=highest_modseq(answer))

    def _search(self, uids: str) -> list[int]:
        return [int(uid) for uid in self._client.search(["UID", uids])]

    def _mark_seen(self, uid: int) -> None:
        self._refused_as("store", "STORE", lambda: self._client.add_flags([uid], [SEEN], silent=True))

    def _list_special_use(self) -> list[tuple[object, object, object]]:
        """LIST with RETURN (SPECIAL-USE) where offered: plain LIST need not carry the attributes."""
        if not self.offers("SPECIAL-USE"):
            return cast(list[tuple[object, object, object]], self._client.list_folders())
        command = "LIST"
        typ, data = self._imap._simple_command(command, '""', '"*"', "RETURN", "(SPECIAL-USE)")
        self._client._checkok(command, typ, data)
        typ, data = self._imap._untagged_response(typ, data, command)
        return cast(list[tuple[object, object, object]], self._client._proc_folder_list(data))

    def _create(self, folder: str) -> bool:
        try:
            self._client.create_folder(folder)
        except imaplib.IMAP4.abort:
            raise
        except imaplib.IMAP4.error as exc:
            # ALREADYEXISTS (RFC 5530) where the server says so; else whether LIST names it
            if "ALREADYEXISTS" not in str(exc).upper() and not self._client.folder_exists(folder):
                raise AccountError("folder", f"{self.where} cannot create folder {folder!r}:"
                                             f" {self._reason(exc)}") from None
            return False
        with contextlib.suppress(imaplib.IMAP4.error):  # unsubscribed it still works; clients hide it
            self._client.subscribe_folder(folder)
        return True

    def _append(
        self, folder: str, raw: bytes, flags: list[str], when: datetime | None
    ) -> tuple[int, int] | None:
        answer = self._refused_as("folder", f"APPEND to {folder!r}",
                                  lambda: self._client.append(folder, raw, flags=flags, msg_time=when))
        return appended_uid(answer)

    def _expunge(self, uids: list[int]) -> None:
        self._refused_as("store", "STORE", lambda: self._client.add_flags(uids, [DELETED], silent=True))
        if self.offers("UIDPLUS"):
            self._refused_as("store", "EXPUNGE", lambda: self._client.uid_expunge(uids))
        else:
            self._refused_as("store", "EXPUNGE", lambda: self._client.expunge())

    def _refused_as(self, kind: str, command: str, work: Callable[[], T]) -> T:
        """``work``, with the server's NO or BAD to it an AccountError of ``kind``."""
        try:
            return work()
        except imaplib.IMAP4.abort:
            raise
        except imaplib.IMAP4.error as exc:
            raise AccountError(kind, f"{self.where} refused {command}: {self._reason(exc)}") from None

    def _idle(self, seconds: float) -> None:
        """IDLE (RFC 2177) until new mail is announced, ``seconds`` pass or :meth:`_wake`; then DONE.
        A completion instead of the ``+`` is a refusal: noted, and the connection is still in step."""
        imap = self._imap
        tag = imap._command("IDLE")
        while imap._get_response() is not None:  # untagged responses may come before the "+"
            if (completion := imap.tagged_commands.get(tag)) is not None:
                del imap.tagged_commands[tag]
                result, data = cast(tuple[str, list[object]], completion)  # typeshed says list[bytes]
                words = b" ".join(d for d in data if isinstance(d, bytes)).decode("utf-8", "replace")
                self._idle_refusal = f"{self.where} refused IDLE ({f'{result} {words}'.strip()})"
                return
        self._wait(seconds)
        imap.send(b"DONE\r\n")
        result, _ = imap._command_complete("IDLE", tag)
        if result != "OK":
            raise AccountError("protocol", f"{self.where} ended IDLE with {result}")

    def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_in, selectors.EVENT_READ)
            selector.register(self._client.socket(), selectors.EVENT_READ)
            while not self._note_changes():
                if self._buffered():
                    self._imap._get_response()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                ready = [key.fileobj for key, _ in selector.select(remaining)]
                if self._wake_in in ready:
                    self._wake_in.recv(4096)
                    return
                if ready:  # a response, or the end of the connection (imaplib raises "EOF")
                    self._imap._get_response()

    def _buffered(self) -> bool:
        """Whether imaplib (or TLS) already holds bytes of a response: ``select`` cannot see those."""
        sock = self._client.socket()
        chunks = getattr(self._imap, "_readbuf", None)  # Python 3.14+: imaplib's own read buffer
        if chunks is not None:
            return any(chunks) or (isinstance(sock, ssl.SSLSocket) and sock.pending() > 0)
        reader = cast(io.BufferedReader, self._imap.file)  # up to 3.13: a BufferedReader on the socket
        sock.setblocking(False)
        try:
            return bool(reader.peek(1))  # what is buffered, else what the socket has now (no waiting)
        except (BlockingIOError, ssl.SSLWantReadError):
            return False
        finally:
            sock.settimeout(self._timeout)

    def _note_changes(self) -> bool:
        """Whether the server announced new mail (EXISTS) since the last look; the other untagged
        responses (imaplib keeps them all) are dropped."""
        responses = self._imap.untagged_responses
        found = "EXISTS" in responses
        responses.clear()
        self._changed = self._changed or found
        return found

    def _logout(self) -> None:
        if self._client is not None and not self._broken:
            self._client.logout()

    def _release(self) -> None:
        """The worker's last task: close the connection (if LOGOUT did not) and the wake-up pair."""
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.shutdown()
        self._wake_in.close()
        self._wake_out.close()

    def _problem(self, exc: Exception) -> AccountError:
        if isinstance(exc, AccountError):
            return exc
        where, section = self.where, self.account.section
        if isinstance(exc, ssl.SSLCertVerificationError):
            untrusted = f"the TLS certificate of {where} is not trusted ({exc.verify_message})"
            return AccountError("tls", untrusted,
                                hint="check host (the certificate must name it); for a server with its own"
                                     f" certificate, `{self.account.test} --cafile CERT` checks it")
        if isinstance(exc, ssl.SSLError):
            return AccountError("tls", f"TLS with {where} failed ({exc.reason or exc})",
                                hint=f"check port and security in [{section}]: 993 is ssl, 143 starttls")
        if isinstance(exc, TimeoutError) and exc.errno is None:  # the socket timeout, not keepalive's
            return AccountError("connect", f"{where} did not answer within {self._timeout:g} s",
                                hint=f"check host and port in [{section}] and that the server is up")
        if isinstance(exc, OSError | imaplib.IMAP4.abort):
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else self._reason(exc)
            if self._client is not None:
                return AccountError("connect", f"the connection to {where} was lost ({reason})")
            return AccountError("connect", f"cannot connect to {where} ({reason})",
                                hint=f"check host and port in [{section}] and the network")
        return AccountError("protocol", f"{where}: {self._reason(exc)}")

    def _reason(self, exc: BaseException) -> str:
        """The server's words in a library error, without "select failed: b'...'" around them."""
        text = re.sub(r"^\w+ failed: ", "", str(exc).strip())
        if quoted := re.fullmatch(r"b'(.*)'|b\"(.*)\"", text, re.DOTALL):
            text = quoted[1] if quoted[1] is not None else quoted[2]
        text = text.replace(self._password, "***") if self._password else text
        return text.strip() or type(exc).__name__
