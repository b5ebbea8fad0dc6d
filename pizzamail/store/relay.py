"""Commit events between ``serve`` and its runner process on a SQLite home (``[runner] separate``).

SQLite has no LISTEN/NOTIFY. The two processes are joined by a socket pair instead, and each
commit's events (ids and names only: :func:`~pizzamail.store.events.encode`) travel over it as one
line. The other side publishes them to its own subscribers, as a PostgreSQL store does with the
NOTIFYs of other processes, and never sends them back. An event arrives after its commit, so the
row it names is there to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from pizzamail.store.events import CommitEvent, Events, decode, encode

log = logging.getLogger("pizzamail.store")

#: the longest line sent: a commit with more events is sent as several (the reader takes 64 KiB)
LINE_BYTES = 32_000


@dataclass(kw_only=True)
class Relay:
    """``async with``: this process's commit events sent over ``sock``, and the other side's published
    here, until left. ``closed`` is called when the other side closes the socket (its process ended)."""

    events: Events
    sock: socket.socket
    closed: Callable[[], None] = lambda: None
    _writer: asyncio.StreamWriter | None = field(default=None, init=False)
    _hearing: asyncio.Task[None] | None = field(default=None, init=False)
    _unsubscribe: Callable[[], None] = field(default=lambda: None, init=False)

    async def __aenter__(self) -> Relay:
        reader, self._writer = await asyncio.open_unix_connection(sock=self.sock)
        self._unsubscribe = self.events.relay(self._send)
        self._hearing = asyncio.create_task(self._hear(reader), name="pizzamail-relay")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._unsubscribe()
        if self._hearing is not None:
            self._hearing.cancel()
            await asyncio.gather(self._hearing, return_exceptions=True)
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()

    def _send(self, batch: list[CommitEvent]) -> None:
        writer = self._writer
        if not batch or writer is None or writer.is_closing():
            return  # the other side sees a commit without events in its data_version
        writer.writelines(payload.encode() + b"\n"
                          for payload in encode(batch, origin="relay", limit=LINE_BYTES))

    async def _hear(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                try:
                    _, events = decode(line.decode())
                except (ValueError, UnicodeDecodeError):
                    log.warning("store: a line on the relay that is not a commit's events was ignored")
                    continue
                self.events.publish(events, heard=True)
        except (OSError, ValueError) as exc:  # the connection broke; a line over the limit
            log.warning("store: the relay of commit events broke (%s)", exc)
        self.closed()
