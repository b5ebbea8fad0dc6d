"""Abuse before login against a real ``pizzamail serve``: hundreds of idle connections, oversized
literals, a guessing flood over many connections of both protocols. The server's RSS stays within
50 MB of where it started, and the owner still logs in and is served after each.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import imaplib
import resource
import smtplib
from pathlib import Path

import pytest

from tests.e2e.harness import Served

pytestmark = pytest.mark.slow

MB = 1024 * 1024
Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def rss(pid: int) -> int:
    """Resident memory of the server process, bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def owner_is_served(served: Served) -> None:
    """The owner logs in to IMAP and opens INBOX, and logs in to SMTP (clients' own timeouts)."""
    with imaplib.IMAP4("127.0.0.1", served.imap, timeout=60) as imap:
        assert imap.login("me", served.password)[0] == "OK"
        assert imap.select("INBOX")[0] == "OK"
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=60) as smtp:
        assert smtp.login("me", served.password)[0] == 235


async def opened(port: int) -> Conn:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await asyncio.wait_for(reader.readuntil(b"\n"), 30)  # greeting
    return reader, writer


async def close(conns: list[Conn]) -> None:
    for _, writer in conns:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def oversized_literals(port: int) -> list[Conn]:
    """``LOGIN {60 MB}`` is refused without a continuation; 16 MB sent anyway is discarded."""
    conns = [await opened(port) for _ in range(8)]
    for reader, writer in conns:
        writer.write(b"a LOGIN {62914560}\r\n")
        assert await asyncio.wait_for(reader.readuntil(b"\n"), 30) == (
            b"a NO [TOOBIG] Literal too large; before login at most 8192 bytes\r\n")
        writer.write(b"b LOGIN {62914560+}\r\n")
        for _ in range(16):
            writer.write(b"x" * MB)
            await writer.drain()
    return conns


async def guesses(served: Served) -> list[Conn]:
    conns = []
    for n in range(40):
        conn = await opened(served.imap)
        conn[1].write(f"g LOGIN me guess-{n}\r\n".encode())
        conns.append(conn)
    for n in range(20):
        conn = await opened(served.smtp)
        conn[1].write(b"EHLO guesser\r\nAUTH PLAIN " + base64.b64encode(b"\0me\0guess-%d" % n) + b"\r\n")
        conns.append(conn)
    return conns


async def test_abuse_before_login_neither_grows_the_server_nor_locks_the_owner_out(served: Served) -> None:
    served.start()
    assert served.proc is not None
    pid = served.proc.pid
    await asyncio.to_thread(owner_is_served, served)  # warm: every code path loaded once
    baseline = rss(pid)
    growth: list[int] = []
    held: list[Conn] = []
    try:
        held += [await opened(served.imap) for _ in range(400)]  # more than the 256 logged-in cap
        held += [await opened(served.smtp) for _ in range(200)]
        await asyncio.to_thread(owner_is_served, served)
        growth.append(rss(pid) - baseline)
        assert growth[-1] < 50 * MB

        held += await oversized_literals(served.imap)
        await asyncio.to_thread(owner_is_served, served)
        growth.append(rss(pid) - baseline)
        assert growth[-1] < 50 * MB

        held += await guesses(served)
        await asyncio.to_thread(owner_is_served, served)  # behind at most the 60 guesses before it
        growth.append(rss(pid) - baseline)
        assert growth[-1] < 50 * MB
    finally:
        await close(held)
    await asyncio.to_thread(owner_is_served, served)
    growth.append(rss(pid) - baseline)
    print(f"RSS {baseline // MB} MB at start; after idle, literals, guesses, all closed: +"
          + ", +".join(f"{g / MB:.1f}" for g in growth) + " MB")
    assert growth[-1] < 50 * MB


async def test_idle_smtp_connections_cannot_use_up_the_servers_descriptors(served: Served) -> None:
    """SMTP had no cap at all: a thousand idle connections took every descriptor of a server with
    the common limit of 1024, so IMAP and SMTP could accept no one, the owner included."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2400:  # this test's own end of the connections
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    served.start()
    assert served.proc is not None
    resource.prlimit(served.proc.pid, resource.RLIMIT_NOFILE, (1024, 1024))
    held: list[Conn] = []
    try:
        held += [await opened(served.smtp) for _ in range(1100)]
        await asyncio.to_thread(owner_is_served, served)
    finally:
        await close(held)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
