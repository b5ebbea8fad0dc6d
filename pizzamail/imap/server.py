"""The asyncio IMAP listener: framing (lines and literals), one task per connection, shutdown.

Framing is the only place that reads the socket for commands: it reads a line, and while the line
announces a literal it answers ``+`` (for a synchronising one), reads the literal and the next
line. Limits apply here, and a violation is answered without dropping the connection when the
client can recover (RFC 7888 §4).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import ssl
from collections.abc import Callable

from pizzamail.auth import Accounts, peer_text
from pizzamail.guard import Gate, Visitor
from pizzamail.imap.capabilities import peer_is_loopback
from pizzamail.imap.commands import COMMANDS
from pizzamail.imap.parser import literal_at_end, peek_tag
from pizzamail.imap.session import Limits, Session, Shared
from pizzamail.mailbox import MailIndex

log = logging.getLogger(__name__)


class FramingError(Exception):
    """A command could not be read in full; ``response`` tells the client so."""

    def __init__(self, response: bytes) -> None:
        super().__init__(response.decode("ascii", "replace"))
        self.response = response


class Connection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, secure: bool, local: bool,
        peer: str,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.secure = secure
        self.local = local
        self.peer = peer
        #: its place at the gate until it logs in (set as soon as the server admits it)
        self.visitor: Visitor
        #: what the client is told when the server ends the conversation
        self.farewell = b"* BYE pizzamail is shutting down\r\n"
        self._out = bytearray()
        self._unclosable = False

    async def start_tls(self, context: ssl.SSLContext, handshake_timeout: float) -> None:
        # Bytes already read but not yet parsed were sent in the clear after STARTTLS: a
        # man in the middle may have put them there (CVE-2011-0411 style), so they are dropped.
        # The writer is drained (send() awaits that), so nothing yields between this and the
        # transport pausing its reads inside start_tls: no plain-text byte can slip in between.
        await self.flush()
        _discard_buffered(self.reader)
        try:
            await self.writer.start_tls(context, ssl_handshake_timeout=handshake_timeout)
        except BaseException:
            # asyncio closed the socket, but our stream is never told: waiting for it would hang
            self._unclosable = True
            raise
        self.secure = True

    async def send(self, data: bytes) -> None:
        """Queue a response. Responses go out in batches: a 20,000-line FETCH is a few hundred
        writes, not 20,000. Whatever is queued is flushed before the next read from the client
        (so every command's responses are out before we wait for the next command)."""
        self._out += data
        if len(self._out) >= _BATCH:
            await self.flush()

    async def flush(self) -> None:
        if self._out:
            # handed over as it is (never changed after: a new one takes the next responses),
            # not copied first
            out, self._out = self._out, bytearray()
            self.writer.write(out)
            await self.writer.drain()

    async def read_line(self) -> bytes | None:
        """One line with its CRLF; None at end of stream. A line over the limit is discarded.

        What is queued goes out first, unless the client's next line is here already (it
        pipelines, as mbsync does, one FETCH per message): its answer then joins the same write,
        as Dovecot corks its output until its input runs dry."""
        if not _line_buffered(self.reader):
            await self.flush()
        try:
            return await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError as exc:
            head = await self.reader.readexactly(exc.consumed)
            await self._skip_line()
            tag = peek_tag(head) or b"*"
            raise FramingError(tag + b" BAD [TOOBIG] Line too long\r\n") from None

    async def _skip_line(self) -> None:
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)

    def command_here(self) -> bool:
        """A whole command line is buffered and announces no literal: reading it cannot wait."""
        return self.waiting_line() is not None

    def waiting_line(self) -> bytes | None:
        buffered = vars(self.reader).get("_buffer")
        if not isinstance(buffered, bytearray):
            return None
        end = buffered.find(b"\n")
        if end < 0:
            return None
        line = bytes(buffered[:end + 1])
        return line if literal_at_end(line) is None else None

    async def read_command(self, limit: int, refusal: bytes = b"Literal too large") -> bytes | None:
        """A whole command: its lines and literals, as sent. None at end of stream.

        Its literals together may have ``limit`` bytes; a command with more is answered with
        ``NO [TOOBIG] refusal`` and no continuation (so nothing larger is ever held)."""
        line = await self.read_line()
        if line is None:
            return None
        tag = peek_tag(line) or b"*"
        parts = [line]
        while (announced := literal_at_end(line)) is not None:
            size, sync = announced
            if size > limit:
                await self._refuse_literal(tag, size, sync, refusal)
            limit -= size
            if sync:
                await self.send(b"+ Ready for literal data\r\n")
                await self.flush()
                self._ack_now()
            parts.append(await self.reader.readexactly(size))
            self._ack_now()
            next_line = await self.read_line()
            if next_line is None:
                return None
            parts.append(next_line)
            line = next_line
        return b"".join(parts)

    def _ack_now(self) -> None:
        """ACK what arrived at once. A client such as imaplib writes a literal and its closing
        CRLF in two sends; under Nagle the CRLF waits for the literal's ACK, which Linux delays by
        up to 40 ms after we spoke (the "+" continuation). Leaving that delayed-ACK mode sends
        the pending ACK now (and ACKs what comes next at once)."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None and hasattr(socket, "TCP_QUICKACK"):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)

    async def _refuse_literal(self, tag: bytes, size: int, sync: bool, refusal: bytes) -> None:
        """Too big: a synchronising literal is simply not asked for; a LITERAL+ one is already
        on its way, so it and the rest of its command are read and dropped."""
        if not sync:
            while True:
                await self._discard(size)
                line = await self.read_line()
                announced = literal_at_end(line) if line else None
                if announced is None or announced[1]:
                    break
                size = announced[0]
        raise FramingError(tag + b" NO [TOOBIG] " + refusal + b"\r\n")

    async def _discard(self, size: int) -> None:
        while size > 0:
            chunk = await self.reader.read(min(size, 1 << 16))
            if not chunk:
                raise asyncio.IncompleteReadError(b"", size)
            size -= len(chunk)

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.flush()
        self.writer.close()
        if self._unclosable:
            return
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


#: bytes of queued responses that are written without waiting for the end of the command
#: (a header listing of 2,000 mails, 800 KB, ran 5-10 % quicker in writes of 256 KB than of 64 KB)
_BATCH = 256 * 1024


def _line_buffered(reader: asyncio.StreamReader) -> bool:
    buffered = vars(reader).get("_buffer")
    return isinstance(buffered, bytearray) and b"\n" in buffered


def _discard_buffered(reader: asyncio.StreamReader) -> None:
    # StreamReader offers no public way to drop what it has buffered; its buffer is a bytearray.
    buffered = vars(reader).get("_buffer")
    if isinstance(buffered, bytearray):
        buffered.clear()


class ImapServer:
    """Our IMAP listener; ``close()`` stops listening and ends every session, IDLE ones too.

    ``port`` is the plain listener (STARTTLS when a TLS context is given), ``tls_port`` the
    implicit-TLS one (None when not listening for it). A connection waits at the ``gate`` (shared
    with SMTP) until it logs in; ``Limits.max_connections`` counts only logged-in ones, so nobody
    without the password can fill it, and a login beyond it closes the oldest.
    """

    def __init__(self, shared: Shared, is_local: Callable[[object], bool]) -> None:
        self.shared = shared
        self.is_local = is_local
        self.port = 0
        self.tls_port: int | None = None
        self._servers: list[asyncio.Server] = []
        self._sessions: dict[asyncio.Future[None], Connection] = {}
        self._handlers: set[asyncio.Task[None]] = set()

    @classmethod
    async def start(
        cls, *, host: str | None = None, port: int | None = None, sock: socket.socket | None = None,
        mailbox: MailIndex, accounts: Accounts, limits: Limits | None = None,
        tls: ssl.SSLContext | None = None, tls_port: int | None = None, tls_sock: socket.socket | None = None,
        is_local: Callable[[object], bool] = peer_is_loopback, gate: Gate | None = None,
    ) -> ImapServer:
        """``is_local`` decides from a peer address whether plain-text passwords are safe. ``sock``
        and ``tls_sock`` are listening sockets bound beforehand, instead of ``host`` and its ports."""
        limits = limits or Limits()
        shared = Shared(mailbox=mailbox, accounts=accounts, limits=limits, tls=tls, gate=gate or Gate())
        self = cls(shared, is_local)
        shared.on_login = self._make_room
        try:
            plain = await asyncio.start_server(
                functools.partial(self._serve, secure=False), host, port, sock=sock, limit=limits.max_line)
            self._servers.append(plain)
            self.port = plain.sockets[0].getsockname()[1]
            if tls is not None and (tls_port is not None or tls_sock is not None):
                # TLS is set up by the conversation, at the gate: asyncio's own ssl= would shake
                # hands before we hear of the connection, with no bound on how many at once
                implicit = await asyncio.start_server(
                    functools.partial(self._serve, secure=True), host, tls_port, sock=tls_sock,
                    limit=limits.max_line)
                self._servers.append(implicit)
                self.tls_port = implicit.sockets[0].getsockname()[1]
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._sessions):
            task.cancel()
        await asyncio.gather(*self._sessions, *self._handlers, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        self._servers = []

    def logged_in(self) -> int:
        """Connections past the gate."""
        return len(self._past_gate())

    def _past_gate(self) -> list[tuple[asyncio.Future[None], Connection]]:
        """Logged-in connections, oldest first."""
        return [(task, conn) for task, conn in self._sessions.items()
                if not self.shared.gate.inside(conn.visitor)]

    def _make_room(self, newcomer: object) -> None:
        """Over ``max_connections``, the oldest logged-in connections are closed for a new one: only
        the password lets anyone in here, so the runaway client is the owner's own, and its newest
        connection is the one in use."""
        others = [(task, conn) for task, conn in self._past_gate() if conn is not newcomer]
        for task, conn in others[:len(others) + 1 - self.shared.limits.max_connections]:
            _drop(conn, task, "[UNAVAILABLE] Too many connections are open; this one, the oldest,"
                  " is closed")

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, secure: bool
    ) -> None:
        # The conversation runs in a task of our own: close() cancels that one, never the task
        # asyncio created for this callback (Python 3.11 reports a cancelled one as an error).
        handler = asyncio.current_task()
        assert handler is not None
        transport = writer.transport
        if secure and isinstance(transport, asyncio.ReadTransport):
            transport.pause_reading()  # no byte may reach the reader before the handshake has it
        peer = writer.get_extra_info("peername")
        conn = Connection(reader, writer, secure=False, local=self.is_local(peer), peer=peer_text(peer))
        conversation = asyncio.ensure_future(self._converse(conn, implicit_tls=secure))
        conn.visitor = self.shared.gate.admit(functools.partial(_drop, conn, conversation))
        self._sessions[conversation] = conn
        self._handlers.add(handler)
        try:
            await conversation
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the server is closing: nothing more to say
        except Exception:
            log.exception("IMAP connection failed")
        finally:
            self.shared.gate.leave(conn.visitor)
            del self._sessions[conversation]
            await conn.close()
            self._handlers.discard(handler)

    async def _converse(self, conn: Connection, *, implicit_tls: bool) -> None:
        try:
            if implicit_tls and not await self._handshake(conn):
                return
            await self._commands(conn)
        except asyncio.CancelledError:
            with contextlib.suppress(ConnectionError, RuntimeError):
                conn.writer.write(conn.farewell)
            raise

    async def _handshake(self, conn: Connection) -> bool:
        """Implicit TLS, within the gate's deadline and the handshake's own; False when it failed."""
        assert self.shared.tls is not None
        try:
            await conn.start_tls(self.shared.tls, self.shared.limits.tls_handshake_timeout)
        except (ssl.SSLError, ConnectionError, TimeoutError):
            return False  # not a client of ours, or gone: there is no channel to say anything on
        return True

    async def _commands(self, conn: Connection) -> None:
        session = Session(self.shared, conn, COMMANDS)
        await conn.send(session.greeting())
        while True:
            # A command that is here already cannot keep us waiting: no idle timer for it (a timer
            # a command cost mbsync's pull, 20,000 pipelined FETCHes, a fifteenth of our time).
            limit = self.shared.limits.idle_timeout
            idle = contextlib.nullcontext() if conn.command_here() else asyncio.timeout(limit)
            try:
                async with idle:
                    raw = await conn.read_command(*session.literal_limit())
            except FramingError as exc:
                await conn.send(exc.response)
                continue
            except TimeoutError:
                await conn.send(b"* BYE Autologout; idle for too long\r\n")
                return
            if raw is None or not await session.handle(raw):
                return


def _drop(conn: Connection, conversation: asyncio.Future[None], why: str) -> None:
    """The gate ends a connection that has not logged in."""
    conn.farewell = b"* BYE " + why.encode("ascii", "replace") + b"\r\n"
    conversation.cancel()


async def start_imap_server(
    *, host: str | None = None, port: int | None = None, sock: socket.socket | None = None,
    mailbox: MailIndex, accounts: Accounts, tls: ssl.SSLContext | None = None, tls_port: int | None = None,
    tls_sock: socket.socket | None = None, gate: Gate | None = None,
) -> ImapServer:
    """Listen for IMAP on ``host:port`` (0 picks a free port; see ``ImapServer.port``), or on
    ``sock``, bound beforehand (``serve`` binds every port before it starts anything).

    With ``tls`` the plain port offers STARTTLS, and ``tls_port`` (0 = any free port, see
    ``ImapServer.tls_port``) or ``tls_sock`` also listens for implicit TLS. Without TLS, passwords
    are accepted only from loopback peers. ``gate`` is where connections wait until they log in
    (``serve`` shares one with SMTP).
    """
    return await ImapServer.start(host=host, port=port, sock=sock, mailbox=mailbox, accounts=accounts,
                                  tls=tls, tls_port=tls_port, tls_sock=tls_sock, gate=gate)
