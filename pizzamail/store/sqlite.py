"""The embedded backend: one SQLite file through aiosqlite, in WAL mode.

One writer connection (``BEGIN IMMEDIATE`` per transaction, serialised by the store's lock) and one
reader connection; in WAL mode readers never see a half-done write and never block the writer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from pizzamail.store import Row, Tx, migrations, now
from pizzamail.store.events import CommitEvent
from pizzamail.store.sql import SQLITE, statements


async def connect(path: Path) -> aiosqlite.Connection:
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
class SqliteBackend:
    path: Path
    dialect: str = SQLITE
    _writer: aiosqlite.Connection | None = None
    _reader: aiosqlite.Connection | None = None

    async def open(self) -> None:
        self._writer = await connect(self.path)
        self.path.chmod(0o600)
        await migrate(self._writer)
        self._reader = await connect(self.path)

    async def close(self) -> None:
        for db in (self._reader, self._writer):
            if db is not None:
                await db.close()
        self._reader = self._writer = None

    @asynccontextmanager
    async def transaction(self, *, serial: bool = True) -> AsyncIterator[Tx]:
        """Always serial (one writer). aiosqlite runs statements in order on its own thread, so a
        rollback queued after a BEGIN whose await was cancelled still follows it (and is a no-op
        when none is open)."""
        assert self._writer is not None, "store is not open"
        await self._writer.execute("BEGIN IMMEDIATE")
        yield self._writer

    async def announce(self, tx: Tx, changes: list[CommitEvent]) -> None:
        """Nothing to do: another process finds SQLite's commits by :meth:`data_version`."""

    async def fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Row]:
        """Not ``execute`` then ``fetchall``: a caller cancelled between the two left a statement
        half-read, whose open read transaction kept the reader's next query in the past."""
        assert self._reader is not None, "store is not open"
        return list(await self._reader.execute_fetchall(sql, params))

    async def data_version(self) -> int:
        """Moves when another connection commits; the reader never writes, so it also moves on this
        store's own commits."""
        rows = await self.fetchall("PRAGMA data_version", ())
        return int(rows[0][0]) if rows else 0


async def migrate(db: aiosqlite.Connection) -> list[str]:
    """Run every migration not yet recorded, each in its own transaction. Returns the names run."""
    await db.execute(
        "CREATE TABLE IF NOT EXISTS migrations(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    await db.commit()
    async with db.execute("SELECT name FROM migrations") as cursor:
        done = {row[0] for row in await cursor.fetchall()}
    ran = []
    for name, sql in migrations.MIGRATIONS:
        if name in done:
            continue
        await db.execute("BEGIN IMMEDIATE")
        for statement in statements(migrations.script(sql, SQLITE)):
            await db.execute(statement)
        await db.execute("INSERT INTO migrations VALUES (?, ?)", (name, now()))
        await db.commit()
        ran.append(name)
    return ran
