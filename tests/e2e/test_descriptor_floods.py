"""Floods that once took every descriptor of a real ``pizzamail serve`` (limited to the common 1024),
so that nobody, the owner included, could connect to anything: connections to the webhook port that
send their headers a byte at a time, TLS handshakes never finished on the implicit-TLS port, and a
client holding a thousand logged-in SMTP connections. The owner is served while each is held.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import resource
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from tests.e2e.harness import Served
from tests.e2e.test_prelogin_abuse import Conn, close, opened, owner_is_served
from tests.polling import until

pytestmark = pytest.mark.slow

FLOOD = 1100


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture
async def limited(served: Served) -> AsyncIterator[Served]:
    """The server with 1024 descriptors; this test process with room for its own ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    served.start()
    assert served.proc is not None
    resource.prlimit(served.proc.pid, resource.RLIMIT_NOFILE, (1024, 1024))
    yield served
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def flood(served: Served, connect: Callable[[], Awaitable[Conn]]) -> None:
    """Hold FLOOD connections made by ``connect`` while the owner logs in to IMAP and SMTP."""
    assert served.proc is not None
    held: list[Conn] = []
    try:
        for _ in range(FLOOD):
            with contextlib.suppress(ConnectionError):  # the server may drop some at once
                held.append(await connect())
        pid = served.proc.pid
        print(f"server descriptors with {FLOOD} held: {descriptors(pid)}")
        # a busy machine lets the server fall behind in dropping the excess; it must catch up while
        # all FLOOD are still held (it stayed at 1024 when they took them all)
        await until(lambda: descriptors(pid) < 400)
        await asyncio.to_thread(owner_is_served, served)
    finally:
        await close(held)


async def test_slow_http_headers_cannot_use_up_the_servers_descriptors(limited: Served) -> None:
    async def slowloris() -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", limited.http)
        writer.write(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")  # and never the rest
        return reader, writer

    await flood(limited, slowloris)


async def test_unfinished_tls_handshakes_cannot_use_up_the_servers_descriptors(limited: Served) -> None:
    async def silent() -> Conn:
        return await asyncio.open_connection("127.0.0.1", limited.imaps)

    await flood(limited, silent)
    # a handshake cut short by the gate once left a task waiting for a close never reported
    assert await asyncio.to_thread(limited.stop) == 0


async def test_logged_in_smtp_connections_cannot_use_up_the_servers_descriptors(limited: Served) -> None:
    """A mail program that never closes its connections, or the owner's runaway client: its oldest
    connections are closed, and a new login of the same user (the owner's, here) still works."""
    plain = base64.b64encode(b"\0me\0" + limited.password.encode())

    async def logged_in() -> Conn:
        reader, writer = await opened(limited.smtp)
        writer.write(b"EHLO runaway\r\nAUTH PLAIN " + plain + b"\r\n")
        while not (line := await asyncio.wait_for(reader.readuntil(b"\n"), 30)).startswith(b"235"):
            assert line.startswith(b"250"), line
        return reader, writer

    await flood(limited, logged_in)
