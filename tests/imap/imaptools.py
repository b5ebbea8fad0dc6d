"""Helpers for the IMAP tests: the sample Maildir, and a raw client for transcripts."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

from pizzamail.auth import Accounts
from pizzamail.imap import ImapServer
from pizzamail.mailbox import Mailbox
from pizzamail.mailbox.maildir import split_name

SAMPLE = Path(__file__).resolve().parent / "sample_maildir"
ACCOUNTS = Accounts(user="me", password="pw", addresses=frozenset({"me@pizzamail.localhost"}))
#: how long a read waits for the server: only a hung server should fail it, never a busy 2-core CI
#: machine (a command's answer there can take seconds)
READ_TIMEOUT = 30


def sample_files(folder: str = "") -> list[Path]:
    """The sample messages of a folder in delivery order (the time prefix of their names)."""
    base = SAMPLE / folder if folder else SAMPLE
    files = [p for sub in ("cur", "new") for p in (base / sub).glob("*") if p.is_file()]
    return sorted(files, key=lambda p: p.name)


async def seed(mailbox: Mailbox) -> list[bytes]:
    """Deliver the sample INBOX (flags from the names, dates from the time prefix) as mail already
    looked at by some earlier session, so none of it is \\Recent any more."""
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    bodies = []
    uids = []
    for path in sample_files():
        data = path.read_bytes()
        flags = split_name(path.name)[1]
        stamp = int(path.name.split(".")[0])
        uids.append(await mailbox.deliver(inbox, data, flags=flags, internaldate=stamp))
        bodies.append(data)
    await mailbox.claim_recent(inbox, uids)
    return bodies


@dataclass
class Client:
    """A raw IMAP connection for transcript tests: send exact bytes, read exact bytes."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def line(self) -> bytes:
        return await asyncio.wait_for(self.reader.readuntil(b"\n"), READ_TIMEOUT)

    async def until(self, tag: bytes) -> list[bytes]:
        """Every line up to and including the tagged response for ``tag``."""
        lines = []
        while True:
            line = await self.line()
            lines.append(line)
            if line.startswith(tag + b" "):
                return lines

    async def command(self, text: bytes) -> list[bytes]:
        tag = text.split(b" ", 1)[0]
        await self.send(text + b"\r\n")
        return await self.until(tag)

    async def read_exactly(self, n: int) -> bytes:
        return await asyncio.wait_for(self.reader.readexactly(n), READ_TIMEOUT)

    async def close(self) -> None:
        if self in _OPEN:
            _OPEN.remove(self)
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


#: clients not closed yet: a test that fails midway leaves its own open (see close_leftovers)
_OPEN: list[Client] = []


async def close_leftovers() -> None:
    """Close what a failed test left open, while its event loop still runs: left to the garbage
    collector, an open transport warns (an error here) in whichever later test it is collected."""
    while _OPEN:
        await _OPEN[-1].close()


async def connect(server: ImapServer, *, login: bool = True) -> Client:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    client = Client(reader, writer)
    _OPEN.append(client)
    await client.line()  # greeting
    if login:
        lines = await client.command(b"L LOGIN me pw")
        assert lines[-1].startswith(b"L OK"), lines
    return client
