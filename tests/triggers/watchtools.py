"""Helpers for the watch tests: a real IMAP server as the "remote", the watchers as the service
runs them, a relay that keeps what crosses the wire, and a bounded wait.

The remote has a store and Maildir of its own; pizzamail's state is the usual test store. Tests wait
on the store (or the remote mailbox) with a bounded poll, never with fixed sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pizzamail.auth import Accounts
from pizzamail.config import Config, parse_config
from pizzamail.imap import ImapServer, Limits
from pizzamail.mailbox import Folder, Mailbox
from pizzamail.secrets import SecretStore
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.events import RunQueued
from pizzamail.triggers.watch import Watchers
from tests.imap.imaptools import ACCOUNTS
from tests.imap.tlstools import Certificate, self_signed

T = TypeVar("T")

#: the name prefix of every session's worker thread (ImapSession names them after the watch)
WORKER_PREFIX = "pizzamail-watch-"


async def eventually(check: Callable[[], Awaitable[T | None]], *, within: float = 30.0) -> T:
    """The first truthy result of ``check``, polled until ``within`` seconds have passed."""
    async with asyncio.timeout(within):
        while True:
            found = await check()
            if found:
                return found
            await asyncio.sleep(0.02)


def mail(subject: str, text: str, *, sender: str = "Ada <ada@example.com>") -> bytes:
    return (f"From: {sender}\r\nTo: me@example.com\r\nSubject: {subject}\r\n"
            f"Date: {email.utils.formatdate()}\r\nMessage-ID: <{abs(hash(subject))}@example.com>\r\n"
            f"\r\n{text}\r\n").encode()


def workers() -> list[threading.Thread]:
    """The IMAP sessions' worker threads alive now."""
    return [t for t in threading.enumerate() if t.name.startswith(WORKER_PREFIX)]


def all_ended(threads: list[threading.Thread], *, within: float = 10.0) -> bool:
    """Whether each of ``threads`` has ended, waiting up to ``within`` seconds for each."""
    for thread in threads:
        thread.join(within)
    return not any(t.is_alive() for t in threads)


@dataclass
class Remote:
    """Somebody's real mail server: our IMAP server over a store and Maildir of its own."""

    mailbox: Mailbox
    tls: Certificate
    folder_root: Path
    accounts: Accounts = ACCOUNTS
    server: ImapServer | None = None
    port: int = 0
    tls_port: int = 0

    async def start(self) -> None:
        self.server = await ImapServer.start(
            host="127.0.0.1", port=self.port, mailbox=self.mailbox, accounts=self.accounts,
            limits=Limits(login_delay=0.01), tls=self.tls.server_context(self.folder_root),
            tls_port=self.tls_port)
        self.port, self.tls_port = self.server.port, self.server.tls_port or 0

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.close()
            self.server = None

    async def folder(self, name: str = "INBOX") -> Folder:
        found = await self.mailbox.folder(name)
        assert found is not None
        return found

    async def deliver(self, subject: str, text: str = "", folder: str = "INBOX") -> int:
        data = mail(subject, text or f"about {subject}")
        return await self.mailbox.deliver(await self.folder(folder), data)

    async def flags(self, folder: str = "INBOX") -> list[frozenset[str]]:
        return [row.flags for row in await self.mailbox.messages(await self.folder(folder))]


@contextlib.asynccontextmanager
async def remote_server(root: Path, *, accounts: Accounts = ACCOUNTS) -> AsyncIterator[Remote]:
    """A started :class:`Remote` with its state under ``root``, stopped on leaving."""
    await asyncio.to_thread(root.mkdir)
    async with Store(path=root / "state.db") as store:
        box = await Mailbox(root=root / "Maildir", store=store).open()
        server = Remote(mailbox=box, tls=self_signed(), folder_root=root, accounts=accounts)
        await server.start()
        try:
            yield server
        finally:
            await server.stop()


class Listening(Protocol):
    port: int


def watch_config(remote: Listening, **settings: Any) -> Config:
    """A config with one watch, ``remote``, on ``remote``'s port: clear text, user ``me``, fast retries."""
    values = {"host": "127.0.0.1", "port": remote.port, "security": "none", "user": "me",
              "retry_initial": 0.05, "retry_max": 0.3, **settings}
    return parse_config({"watches": {"remote": values}})


@dataclass
class Running:
    """pizzamail's side: its store, and the watchers when the test runs them itself."""

    store: Store
    watchers: Watchers | None = None
    posted: list[int] = field(default_factory=list)

    async def row(self) -> dict[str, Any]:
        found = await self.store.fetchone("SELECT * FROM watches WHERE name = 'remote'")
        return dict(found) if found is not None else {}

    async def until_state(self, state: str) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            row = await self.row()
            return row if row.get("state") == state else None
        return await eventually(check)

    async def until_outcome(self, text: str) -> str:
        async def check() -> str | None:
            outcome = (await self.row()).get("last_outcome") or ""
            return outcome if text in outcome else None
        return await eventually(check)

    async def tasks(self) -> list[dict[str, Any]]:
        rows = await self.store.fetchall(
            "SELECT m.thread_id, m.message_id, m.in_reply_to, m.refs, m.subject, m.body, m.sender,"
            " r.status AS run_status FROM messages m JOIN runs r ON r.message_id = m.id"
            " WHERE m.kind = 'task' ORDER BY m.id")
        return [dict(r) for r in rows]

    async def until_tasks(self, count: int) -> list[dict[str, Any]]:
        async def check() -> list[dict[str, Any]] | None:
            found = await self.tasks()
            assert len(found) <= count, [t["subject"] for t in found]
            return found if len(found) == count else None
        return await eventually(check)


@contextlib.asynccontextmanager
async def watching(
    store: Store, blobs: BlobStore, config: Config, secrets: SecretStore, **options: Any
) -> AsyncIterator[Running]:
    running = Running(store=store)
    unsubscribe = store.events.subscribe(RunQueued, lambda e: running.posted.append(e.run))
    watchers = Watchers(store=store, blobs=blobs, config=config, secrets=secrets, **options)
    running.watchers = watchers
    try:
        async with watchers:
            yield running
    finally:
        unsubscribe()


@dataclass
class Relay:
    """Between the watcher and the remote: passes bytes both ways and keeps what each side sent."""

    target: int
    sent: bytearray = field(default_factory=bytearray)
    """what the client sent"""
    received: bytearray = field(default_factory=bytearray)
    """what the server sent"""
    server: asyncio.Server | None = None
    port: int = 0

    async def start(self) -> Relay:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        await asyncio.gather(self._pipe(reader, up_writer, self.sent),
                             self._pipe(up_reader, writer, self.received), return_exceptions=True)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, keep: bytearray) -> None:
        try:
            while data := await src.read(65536):
                keep += data
                dst.write(data)
                await dst.drain()
        finally:
            dst.close()

    async def idling(self) -> bool:
        """Whether the client's last command is IDLE and the server's last word its ``+``."""
        answered = re.search(rb"\r\n\+ [^\r\n]*\r\n$", self.received) is not None
        return self.sent.endswith(b" IDLE\r\n") and answered

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()
