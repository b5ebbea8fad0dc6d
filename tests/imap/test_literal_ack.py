"""What the connection does for latency. A literal is ACKed at once: imaplib writes a literal and
its closing CRLF in two sends, and under Nagle the CRLF waits for our ACK, which Linux delays up to
40 ms after we spoke (the "+"). Measured: APPEND took 48 ms a mail, Dovecot's 2 ms; with this
2.3 ms. Answers to pipelined commands go out together."""

from __future__ import annotations

import asyncio
import socket
from typing import Any, cast

import pytest

from pizzamail.imap.server import Connection


class _Socket:
    def __init__(self) -> None:
        self.options: list[tuple[int, int, int]] = []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options.append((level, option, value))


class _Writer:
    """What Connection uses of a StreamWriter, recording what is written and set."""

    def __init__(self) -> None:
        self.sock = _Socket()
        self.events: list[Any] = []
        self.wrote = asyncio.Event()

    def get_extra_info(self, name: str) -> object:
        return self.sock if name == "socket" else None

    def write(self, data: bytes) -> None:
        self.events.append(data)
        self.wrote.set()

    async def drain(self) -> None:
        pass


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="Linux only")
async def test_the_continuation_and_the_literal_are_acked_at_once() -> None:
    reader = asyncio.StreamReader()
    writer = _Writer()
    conn = Connection(reader, cast(asyncio.StreamWriter, writer), secure=False, local=True, peer="test")
    reader.feed_data(b"a APPEND INBOX {5}\r\n")
    command = asyncio.ensure_future(conn.read_command(1 << 20))
    await writer.wrote.wait()
    assert writer.events == [b"+ Ready for literal data\r\n"]
    quickack = (socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    assert writer.sock.options == [quickack]  # right after the "+": the literal is ACKed on arrival
    reader.feed_data(b"hello")
    reader.feed_data(b"\r\n")
    assert await command == b"a APPEND INBOX {5}\r\nhello\r\n"
    assert writer.sock.options == [quickack, quickack]  # and once it is in


async def test_answers_to_pipelined_commands_share_a_write() -> None:
    """A client that sends its next command before our answer (mbsync: one FETCH per message)
    gets the answers in one write once its commands run out, as from Dovecot; not one each."""
    reader = asyncio.StreamReader()
    writer = _Writer()
    conn = Connection(reader, cast(asyncio.StreamWriter, writer), secure=False, local=True, peer="test")
    reader.feed_data(b"a NOOP\r\nb NOOP\r\n")
    assert await conn.read_line() == b"a NOOP\r\n"
    await conn.send(b"a OK\r\n")
    assert await conn.read_line() == b"b NOOP\r\n"
    assert writer.events == []
    await conn.send(b"b OK\r\n")
    reader.feed_eof()
    assert await conn.read_line() is None
    assert writer.events == [b"a OK\r\nb OK\r\n"]


async def test_a_command_already_here_is_read_without_an_idle_timer() -> None:
    """The idle timer is armed only when reading may wait: not for a pipelined command whose line
    is buffered whole, but for one still to come or whose literal is still to come."""
    reader = asyncio.StreamReader()
    conn = Connection(reader, cast(asyncio.StreamWriter, _Writer()), secure=False, local=True, peer="test")
    assert not conn.command_here()
    reader.feed_data(b"a NOOP\r\nb APPEND INBOX {5}\r\n")
    assert conn.command_here()
    assert await conn.read_line() == b"a NOOP\r\n"
    assert not conn.command_here()  # its literal may be slow to come
    reader.feed_data(b"c NO")
    await conn.read_line()
    assert not conn.command_here()
