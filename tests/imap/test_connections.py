"""Many clients at once, and the cap on how many one server serves."""

from __future__ import annotations

import asyncio

from imaptools import ACCOUNTS, READ_TIMEOUT, Client, connect

from pizzamail.guard import Gate
from pizzamail.imap import ImapServer, Limits
from pizzamail.mailbox import Mailbox


async def test_a_hundred_clients_work_at_once(server: ImapServer, sample: list[bytes]) -> None:
    async def one(n: int) -> bytes:
        client = await connect(server)
        try:
            await client.command(f"S{n} SELECT INBOX".encode())
            lines = await client.command(f"F{n} FETCH 1 (UID RFC822.SIZE)".encode())
            return lines[0]
        finally:
            await client.close()

    answers = await asyncio.gather(*(one(n) for n in range(100)))
    assert len(set(answers)) == 1 and answers[0].startswith(b"* 1 FETCH (UID 1 RFC822.SIZE ")


async def test_a_login_beyond_the_cap_closes_the_oldest(mailbox: Mailbox) -> None:
    """A runaway client of the owner's (hundreds of IDLE connections) once filled the cap, and every
    new connection, the owner's real client too, was told to come back, for the 31 minutes of
    autologout. Only the password gets anyone past the gate, so the oldest connection goes instead."""
    server = await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS,
                                    limits=Limits(login_delay=0.01, max_connections=2))
    held: list[Client] = []
    try:
        held = [await connect(server), await connect(server)]
        await held[0].send(b"i IDLE\r\n")
        assert await held[0].line() == b"+ idling\r\n"
        held.append(await connect(server))  # asserts the login
        assert await held[0].line() == (
            b"* BYE [UNAVAILABLE] Too many connections are open; this one, the oldest, is closed\r\n")
        assert await asyncio.wait_for(held[0].reader.read(), READ_TIMEOUT) == b""
        for client in held[1:]:  # the others go on
            assert await client.command(b"N NOOP") == [b"N OK NOOP completed\r\n"]
        assert server.logged_in() == 2
    finally:
        for client in held:
            await client.close()
        await server.close()


async def test_idle_connections_never_lock_the_owner_out(mailbox: Mailbox, sample: list[bytes]) -> None:
    # more than max_connections (256) idle connections that never log in
    server = await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS,
                                    limits=Limits(login_delay=0.01))
    idle = [await connect(server, login=False) for _ in range(300)]
    try:
        owner = await connect(server)  # asserts the login
        lines = await owner.command(b"S SELECT INBOX")
        assert lines[-1].startswith(b"S OK") and f"* {len(sample)} EXISTS\r\n".encode() in lines
        await owner.close()
        # the room holds 128: the oldest idle ones were sent away to make room
        assert await idle[0].line() == b"* BYE Too many connections are waiting to log in\r\n"
        assert await idle[-1].command(b"N NOOP") == [b"N OK NOOP completed\r\n"]
    finally:
        for client in idle:
            await client.close()
        await server.close()


async def test_a_connection_must_log_in_within_the_deadline(mailbox: Mailbox) -> None:
    server = await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS,
                                    limits=Limits(login_delay=0.01), gate=Gate(deadline=2))
    try:
        # the owner must log in within the deadline: seconds, not a fraction, on a loaded machine
        owner = await connect(server)
        idle = await connect(server, login=False)
        # the idle one came later: once it is dropped, the owner is past the deadline too
        assert await idle.line() == b"* BYE Log in within 2 seconds\r\n"
        assert await asyncio.wait_for(idle.reader.read(), READ_TIMEOUT) == b""
        await idle.close()
        assert await owner.command(b"N NOOP") == [b"N OK NOOP completed\r\n"]
        await owner.close()
    finally:
        await server.close()
