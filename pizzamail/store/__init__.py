"""The store: SQLite through aiosqlite, the one source of truth for state.

One writer connection (serialised by a lock, ``BEGIN IMMEDIATE`` per transaction) and one reader
connection; in WAL mode readers never see a half-done write and never block the writer. What a
transaction changed is published to ``Store.events`` after its commit (:mod:`pizzamail.store.events`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite

from pizzamail.store.events import CommitEvent, Events, collecting
from pizzamail.store.migrations import migrate


def now() -> str:
    """Timestamps are UTC ISO 8601 with seconds, so they sort as text."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _connect(path: Path) -> aiosqlite.Connection:
    connecting = aiosqlite.connect(path, isolation_level=None)
    try:
        db = await connecting
    except BaseException:
        # aiosqlite stops its thread without waiting for it: waited for here, or it reports to a
        # loop already closed (a traceback after serve's one-line error)
        await asyncio.to_thread(connecting._thread.join)
        raise
    db.row_factory = aiosqlite.Row
    await db.execute("PRAGMA journal_mode=WAL")
    await db.execute("PRAGMA synchronous=FULL")
    await db.execute("PRAGMA foreign_keys=ON")
    await db.execute("PRAGMA busy_timeout=10000")
    return db


@dataclass(kw_only=True)
class Store:
    path: Path
    _writer: aiosqlite.Connection | None = None
    _reader: aiosqlite.Connection | None = None
    events: Events = field(default_factory=Events)
    """commit events: subscribe here to follow what the service's own transactions change"""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def open(self) -> Store:
        self._writer = await _connect(self.path)
        self.path.chmod(0o600)
        await migrate(self._writer)
        self._reader = await _connect(self.path)
        return self

    async def close(self) -> None:
        for db in (self._reader, self._writer):
            if db is not None:
                await db.close()
        self._reader = self._writer = None

    async def __aenter__(self) -> Store:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction: committed on normal exit, rolled back on an exception. The events
        recorded in it are published once it is committed, never for a rollback.

        Safe under cancellation: aiosqlite runs statements in order on its own thread, so the
        rollback (or commit) queued here always follows the BEGIN, even one whose await was
        cancelled; both are no-ops when no transaction is open.
        """
        assert self._writer is not None, "store is not open"
        db = self._writer
        async with self._lock:
            with collecting(db) as changes:
                try:
                    await db.execute("BEGIN IMMEDIATE")
                    yield db
                except BaseException:
                    await asyncio.shield(db.rollback())
                    raise
                await self._commit(db, changes)

    async def _commit(self, db: aiosqlite.Connection, changes: list[CommitEvent]) -> None:
        """A commit whose caller is cancelled meanwhile still happens, so its events are published
        when it is done (before the caller resumes, when it is not cancelled)."""
        commit = asyncio.ensure_future(db.commit())

        def committed(done: asyncio.Future[None]) -> None:
            if not done.cancelled() and done.exception() is None:
                self.events.publish(changes)

        commit.add_done_callback(committed)
        await asyncio.shield(commit)

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        """All rows of one query, read to the end in one step of the reader's thread.

        Not ``execute`` then ``fetchall``: a caller cancelled between the two left a statement
        half-read, whose open read transaction kept the reader's next query in the past (a run
        just claimed was "not there", and stayed ``running`` with nobody on it).
        """
        assert self._reader is not None, "store is not open"
        return list(await self._reader.execute_fetchall(sql, tuple(params)))

    async def fetchone(self, sql: str, params: Iterable[Any] = ()) -> aiosqlite.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def data_version(self) -> int:
        """A counter that moves when another connection commits (no table is read: cheap to poll).
        The reader never writes, so it also moves on this store's own commits."""
        row = await self.fetchone("PRAGMA data_version")
        return int(row[0]) if row is not None else 0
