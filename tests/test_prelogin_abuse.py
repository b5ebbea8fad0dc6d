"""Abuse before login over real sockets, with SMTP and IMAP sharing one gate as in ``serve``:
a guessing flood over many connections of both protocols, and connections that never log in.

The gate's clock is injected, so the tests count the guesses checked per window of that clock.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import smtplib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from pizzamail.auth import Accounts, Login
from pizzamail.guard import Gate
from pizzamail.imap import ImapServer, Limits
from pizzamail.intake.smtp import IntakeHandler, start_smtp_server
from pizzamail.mailbox import Mailbox
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from tests.polling import until

OWNER = "me@pizzamail.localhost"


@dataclass(frozen=True, kw_only=True)
class Recording(Accounts):
    """The owner's account, noting every password it is asked to check, in order."""

    checked: list[str] = field(default_factory=list)

    def check(self, user: str | bytes, password: str | bytes) -> bool:
        self.checked.append(f"imap {_text(password)}")
        return super().check(user, password)

    def smtp_login(self, user: str | bytes, password: str | bytes) -> Login | None:
        self.checked.append(f"smtp {_text(password)}")
        return super().smtp_login(user, password)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Servers:
    imap: ImapServer
    smtp: int
    gate: Gate
    clock: Clock
    accounts: Recording


@pytest.fixture
async def servers(mailbox: Mailbox, store: Store, blobs: BlobStore) -> AsyncIterator[Servers]:
    clock = Clock()
    gate = Gate(burst=10, rate=10, clock=clock, deadline=600)
    accounts = Recording(user="me", password="pw", addresses=frozenset({OWNER}))
    imap = await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox, accounts=accounts,
                                  limits=Limits(login_delay=0.0), gate=gate)
    handler = IntakeHandler(store=store, blobs=blobs, accounts=accounts,
                            agents=frozenset({"bot@pizzamail.localhost"}), domain="pizzamail.localhost")
    smtp = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=10_000, gate=gate)
    try:
        yield Servers(imap=imap, smtp=smtp.sockets[0].getsockname()[1], gate=gate, clock=clock,
                      accounts=accounts)
    finally:
        smtp.close()
        await imap.close()
        await smtp.wait_closed()


@dataclass
class Raw:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    @classmethod
    async def open(cls, port: int) -> Raw:
        raw = cls(*await asyncio.open_connection("127.0.0.1", port))
        await raw.line()  # greeting
        return raw

    async def line(self) -> bytes:
        return await asyncio.wait_for(self.reader.readuntil(b"\n"), 30)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


async def imap_login(port: int, password: str) -> Raw:
    raw = await Raw.open(port)
    await raw.send(f"L LOGIN me {password}\r\n".encode())
    return raw


async def smtp_login(port: int, password: str) -> Raw:
    raw = await Raw.open(port)
    await raw.send(b"EHLO guesser\r\n")
    while not (await raw.line()).startswith(b"250 "):
        pass
    await raw.send(b"AUTH PLAIN " + base64.b64encode(b"\0me\0" + password.encode()) + b"\r\n")
    return raw


async def test_a_guessing_flood_over_both_protocols_shares_one_budget_and_the_owner_gets_in(
    servers: Servers,
) -> None:
    gate, clock, checked = servers.gate, servers.clock, servers.accounts.checked
    guessers = [await imap_login(servers.imap.port, f"imap-guess-{n}") for n in range(40)]
    guessers += [await smtp_login(servers.smtp, f"smtp-guess-{n}") for n in range(20)]
    try:
        await until(lambda: gate.waiting == 50)
        assert len(checked) == 10  # 60 connections, one budget: the burst, then nothing while time stands
        owner_imap = await imap_login(servers.imap.port, "pw")
        owner_smtp = await smtp_login(servers.smtp, "pw")
        guessers += [owner_imap, owner_smtp]  # closed with them
        await until(lambda: gate.waiting == 52)
        answers = asyncio.gather(owner_imap.line(), owner_smtp.line())
        while not answers.done():
            clock.now += 1.0
            await until(lambda: answers.done() or len(checked) >= 10 + 10 * clock.now)
            failures = len([c for c in checked if "guess" in c])
            assert failures <= 10 + 10 * clock.now  # the burst, then 10 a second
        assert await answers == [b"L OK [CAPABILITY IMAP4rev1 SASL-IR LITERAL+ ID ENABLE IDLE NAMESPACE"
                                 b" UNSELECT UIDPLUS MOVE CHILDREN SPECIAL-USE CONDSTORE QRESYNC"
                                 b" LIST-EXTENDED LIST-STATUS BINARY] Logged in\r\n",
                                 b"235 2.7.0 Authentication successful\r\n"]
        # the owner waited for the 60 guesses asked before it, and for nothing else
        assert checked[60:62] == ["imap pw", "smtp pw"]
        await owner_imap.send(b"S SELECT INBOX\r\n")
        while not (line := await owner_imap.line()).startswith(b"S "):
            pass
        assert line.startswith(b"S OK")
    finally:
        for raw in guessers:
            await raw.close()


async def test_smtp_connections_that_do_not_log_in_are_dropped_at_the_deadline(
    store: Store, blobs: BlobStore
) -> None:
    accounts = Accounts(user="me", password="pw", addresses=frozenset({OWNER}))
    handler = IntakeHandler(store=store, blobs=blobs, accounts=accounts,
                            agents=frozenset({"bot@pizzamail.localhost"}), domain="pizzamail.localhost")
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=10_000,
                                     gate=Gate(deadline=2, room=4))  # the crowd and the owner come in time
    port = server.sockets[0].getsockname()[1]
    try:
        idle = await Raw.open(port)
        assert await idle.line() == b"421 4.7.0 Log in within 2 seconds; closing\r\n"
        assert await asyncio.wait_for(idle.reader.read(), 30) == b""
        await idle.close()
        crowd = [await Raw.open(port) for _ in range(6)]  # the room holds 4: the oldest leave
        assert await crowd[0].line() == b"421 4.7.0 Too many connections are waiting to log in; closing\r\n"

        def owner_sends() -> int:
            with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
                client.login("me", "pw")
                return client.noop()[0]

        assert await asyncio.to_thread(owner_sends) == 250
        for raw in crowd:
            await raw.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_an_overlong_auth_answer_is_refused_as_such(store: Store, blobs: BlobStore) -> None:
    """A 5 MB answer to AUTH's 334 challenge once got "554 … could not take this mail (an internal
    error …)" and a traceback in the log: it is a bad answer, and the connection goes on."""
    accounts = Accounts(user="me", password="pw", addresses=frozenset({OWNER}))
    handler = IntakeHandler(store=store, blobs=blobs, accounts=accounts,
                            agents=frozenset({"bot@pizzamail.localhost"}), domain="pizzamail.localhost")
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=10_000)
    try:
        raw = await Raw.open(server.sockets[0].getsockname()[1])
        await raw.send(b"EHLO client\r\nAUTH PLAIN\r\n")
        while (line := await raw.line()).startswith(b"250"):
            pass
        assert line == b"334 \r\n"
        await raw.send(b"A" * 5_000_000 + b"\r\n")
        assert await raw.line() == b"501 5.5.2 Answer too long; AUTH cancelled\r\n"
        await raw.send(b"AUTH PLAIN " + base64.b64encode(b"\0me\0pw") + b"\r\nNOOP\r\n")
        while (line := await raw.line()).startswith(b"500 "):
            pass  # the rest of the long answer, read as commands
        assert line == b"235 2.7.0 Authentication successful\r\n"
        assert await raw.line() == b"250 OK\r\n"
        await raw.close()
    finally:
        server.close()
        await server.wait_closed()
