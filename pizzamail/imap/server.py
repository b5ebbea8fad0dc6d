"""The asyncio IMAP listener: framing (lines and literals), one task per connection, shutdown.

Framing is the only place that reads the socket for commands: it reads a line, and while the line
announces a literal it answers ``+`` (for a synchronising one), reads the literal and the next
line. Limits apply here, and a violation is answered without dropping the connection when the
client can recover (RFC 7888 §4).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from pizzamail.auth import Accounts
from pizzamail.imap.commands import COMMANDS
from pizzamail.imap.parser import literal_at_end, peek_tag
from pizzamail.imap.session import Limits, Session, Shared
from pizzamail.mailbox import Mailbox

log = logging.getLogger(__name__)


class FramingError(Exception):
    """A command could not be read in full; ``response`` tells the client so."""

    def __init__(self, response: bytes) -> None:
        super().__init__(response.decode("ascii", "replace"))
        self.response = response


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limits: Limits) -> None:
        self.reader = reader
        self.writer = writer
        self.limits = limits

    async def send(self, data: bytes) -> None:
        if data:
            self.writer.write(data)
            await self.writer.drain()

    async def read_line(self) -> bytes | None:
        """One line with its CRLF; None at end of stream. A line over the limit is discarded."""
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

    async def read_command(self) -> bytes | None:
        """A whole command: its lines and literals, as sent. None at end of stream."""
        line = await self.read_line()
        if line is None:
            return None
        tag = peek_tag(line) or b"*"
        parts = [line]
        while (announced := literal_at_end(line)) is not None:
            size, sync = announced
            if size > self.limits.max_literal:
                await self._refuse_literal(tag, size, sync)
            if sync:
                await self.send(b"+ Ready for literal data\r\n")
            parts.append(await self.reader.readexactly(size))
            next_line = await self.read_line()
            if next_line is None:
                return None
            parts.append(next_line)
            line = next_line
        return b"".join(parts)

    async def _refuse_literal(self, tag: bytes, size: int, sync: bool) -> None:
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
        raise FramingError(tag + b" NO [TOOBIG] Literal too large\r\n")

    async def _discard(self, size: int) -> None:
        while size > 0:
            chunk = await self.reader.read(min(size, 1 << 16))
            if not chunk:
                raise asyncio.IncompleteReadError(b"", size)
            size -= len(chunk)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


class ImapServer:
    """Our IMAP listener; ``close()`` stops listening and ends every session, IDLE ones too."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.port = 0
        self._server: asyncio.Server | None = None
        self._sessions: set[asyncio.Future[None]] = set()
        self._handlers: set[asyncio.Task[None]] = set()

    @classmethod
    async def start(
        cls, *, host: str, port: int, mailbox: Mailbox, accounts: Accounts, limits: Limits | None = None
    ) -> ImapServer:
        limits = limits or Limits()
        self = cls(Shared(mailbox=mailbox, accounts=accounts, limits=limits))
        self._server = await asyncio.start_server(self._serve, host, port, limit=limits.max_line)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._sessions):
            task.cancel()
        await asyncio.gather(*self._sessions, *self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The conversation runs in a task of our own: close() cancels that one, never the task
        # asyncio created for this callback (Python 3.11 reports a cancelled one as an error).
        handler = asyncio.current_task()
        assert handler is not None
        conn = Connection(reader, writer, self.shared.limits)
        conversation = asyncio.ensure_future(self._converse(conn))
        self._sessions.add(conversation)
        self._handlers.add(handler)
        try:
            await conversation
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the server is closing: nothing more to say
        except Exception:
            log.exception("IMAP connection failed")
        finally:
            self._sessions.discard(conversation)
            await conn.close()
            self._handlers.discard(handler)

    async def _converse(self, conn: Connection) -> None:
        try:
            await self._commands(conn)
        except asyncio.CancelledError:
            with contextlib.suppress(ConnectionError, RuntimeError):
                conn.writer.write(b"* BYE pizzamail is shutting down\r\n")
            raise

    async def _commands(self, conn: Connection) -> None:
        session = Session(self.shared, conn, COMMANDS)
        await conn.send(session.greeting())
        while True:
            try:
                async with asyncio.timeout(self.shared.limits.idle_timeout):
                    raw = await conn.read_command()
            except FramingError as exc:
                await conn.send(exc.response)
                continue
            except TimeoutError:
                await conn.send(b"* BYE Autologout; idle for too long\r\n")
                return
            if raw is None or not await session.handle(raw):
                return


async def start_imap_server(*, host: str, port: int, mailbox: Mailbox, accounts: Accounts) -> ImapServer:
    """Listen for IMAP on ``host:port`` (0 picks a free port; see ``ImapServer.port``)."""
    return await ImapServer.start(host=host, port=port, mailbox=mailbox, accounts=accounts)
