"""The embedded backend: one SQLite file in WAL mode.

One writer connection through aiosqlite (``BEGIN IMMEDIATE`` per transaction, serialised by the
store's lock), on a thread of its own: a commit waits for its fsync there. One reader connection,
used on the event loop's own thread: in WAL mode a read never waits for the writer and never sees
a half-done write, and the store's reads (indexed, and in chunks where a folder is large) take less
than a trip to a thread and back, which costs 0.5-1 ms on a busy loop (each hands the GIL over
twice); a 2,000-mail header listing spent a fifth of its time on those trips.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Coroutine, Generator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiosqlite

from pizzamail.errors import TransactionLost
from pizzamail.store import Cursor, Row, T, Tx, Work, migrations, now
from pizzamail.store.commit import Outcome, to_the_end
from pizzamail.store.events import CommitEvent, collecting, dropped_on_error
from pizzamail.store.sql import SQLITE, statements

#: both connections': wait for a lock instead of failing; temporary b-trees in memory (ORDER BY, and
#: the writer's savepoint journals: on disk each batch of the group commit made, and deleted, a file
#: in /var/tmp, 107 for 600 mails)
_EITHER = ("busy_timeout=10000", "temp_store=MEMORY")


def _reader(path: Path) -> sqlite3.Connection:
    reader = sqlite3.connect(path, isolation_level=None)
    reader.row_factory = sqlite3.Row
    for pragma in ("query_only=ON", *_EITHER):  # query_only: data_version counts on it never writing
        reader.execute(f"PRAGMA {pragma}")
    return reader


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
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON", *_EITHER):
        await db.execute(f"PRAGMA {pragma}")
    return db


@dataclass(kw_only=True)
class SqliteBackend:
    path: Path
    dialect: str = SQLITE
    _writer: aiosqlite.Connection | None = None
    _reader: sqlite3.Connection | None = None
    _tuples: sqlite3.Cursor | None = None  # the reader's, making plain tuples

    async def open(self) -> None:
        self._writer = await connect(self.path)
        self.path.chmod(0o600)
        await migrate(self._writer)
        self._reader = _reader(self.path)
        self._tuples = self._reader.cursor()
        self._tuples.row_factory = None

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self._writer is not None:
            await self._writer.close()
        self._reader = self._writer = self._tuples = None

    @asynccontextmanager
    async def transaction(self, *, serial: bool = True) -> AsyncIterator[Tx]:
        """Always serial (one writer). A BEGIN whose caller is cancelled still runs (aiosqlite's
        queue): it is waited for and rolled back, or the connection would stay in a transaction
        that nobody ends, and the next writer's BEGIN fails."""
        writer = self._writer
        assert writer is not None, "store is not open"
        begin = asyncio.ensure_future(writer.execute("BEGIN IMMEDIATE"))
        try:
            await to_the_end(begin)
        except asyncio.CancelledError:
            if not begin.cancelled() and begin.exception() is None:
                await to_the_end(writer.execute("ROLLBACK"))
            raise
        yield writer

    async def at_once(self, works: list[Work[Any]]) -> tuple[list[Outcome], list[CommitEvent]]:
        """:meth:`Store.write_at_once`: a batch of works in one transaction, in one step of the
        writer's thread (aiosqlite's own queue of steps, so it runs in turn with the connection's
        other statements)."""
        assert self._writer is not None, "store is not open"
        conn = self._writer._conn
        # aiosqlite's (untyped) step queue, the one way into its thread
        done = await self._writer._execute(in_thread, conn, works)  # type: ignore[no-untyped-call]
        return cast(tuple[list[Outcome], list[CommitEvent]], done)

    async def announce(self, tx: Tx, changes: list[CommitEvent]) -> None:
        """Nothing to do: another process finds SQLite's commits by :meth:`data_version`."""

    async def fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Row]:
        """Read to the end at once, on this thread (see the module's text): no statement is ever
        left half-read, whose open read transaction would keep the next query in the past."""
        assert self._reader is not None, "store is not open"
        return self._reader.execute(sql, params).fetchall()

    async def fetch_tuples(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        assert self._tuples is not None, "store is not open"
        return self._tuples.execute(sql, params).fetchall()

    async def write_alone(self, sql: str, params: tuple[Any, ...]) -> None:
        """SQLite has one writer, and a task inside a write would wait for itself here."""
        raise NotImplementedError("a SQLite home keeps its blobs and run files on disk")

    async def data_version(self) -> int:
        """Moves when another connection commits; the reader never writes, so it also moves on this
        store's own commits."""
        rows = await self.fetchall("PRAGMA data_version", ())
        return int(rows[0][0]) if rows else 0


def in_thread(conn: sqlite3.Connection, works: list[Work[Any]]) -> tuple[list[Outcome], list[CommitEvent]]:
    """``works`` in one transaction of ``conn``, each in a savepoint, on the connection's own thread;
    returns their outcomes and the events of those that succeeded. Raises (nothing committed) when
    the transaction as a whole failed."""
    tx = _InThread(conn)
    with collecting(tx) as changes:
        conn.execute("BEGIN IMMEDIATE")
        try:
            outcomes = [_part(conn, tx, work) for work in works]
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # a failed COMMIT too: the connection is left with none open
                conn.execute("ROLLBACK")
            raise
    return outcomes, changes


def _part(conn: sqlite3.Connection, tx: _InThread, work: Work[Any]) -> Outcome:
    """One work of a batch: on an exception its statements and events are rolled back, the others
    stay; :class:`TransactionLost` when the failure ended the whole transaction (SQLite's own
    rollback on a full disk, an I/O error, memory short)."""
    conn.execute("SAVEPOINT work")
    try:
        with dropped_on_error(tx):
            result = _run_through(work(tx))
    except Exception as failed:
        if not conn.in_transaction:
            raise TransactionLost() from failed
        conn.execute("ROLLBACK TO SAVEPOINT work")
        conn.execute("RELEASE SAVEPOINT work")
        return False, failed
    conn.execute("RELEASE SAVEPOINT work")
    return True, result


def _run_through(step: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine whose awaits all finish at once (statements of :class:`_InThread`)."""
    try:
        step.send(None)
    except StopIteration as finished:
        return cast(T, finished.value)
    step.close()
    raise RuntimeError("work run at once awaited something besides its statements")


class _Ran:
    """A cursor of :class:`_InThread`: its rows are there already."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    async def fetchone(self) -> Row | None:
        return cast(Row | None, self._cursor.fetchone())

    async def fetchall(self) -> list[Row]:
        return self._cursor.fetchall()


class _Statement:
    """A statement run already: awaited, or entered, it gives its cursor without suspending."""

    def __init__(self, cursor: _Ran) -> None:
        self._cursor = cursor

    def __await__(self) -> Generator[Any, None, Cursor]:
        yield from ()
        return self._cursor

    async def __aenter__(self) -> Cursor:
        return self._cursor

    async def __aexit__(self, *exc: Any) -> None:
        return None


@dataclass(frozen=True)
class _InThread:
    """A transaction's statements run in the thread that owns the connection, each when sent."""

    conn: sqlite3.Connection
    on_writer_thread: bool = True

    def execute(self, sql: str, parameters: Iterable[Any] | None = None, /) -> _Statement:
        return _Statement(_Ran(self.conn.execute(sql, tuple(parameters or ()))))

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]], /) -> None:
        self.conn.executemany(sql, [tuple(row) for row in parameters])

    async def commit(self) -> None:
        raise RuntimeError("work run at once is committed when it returns")

    async def rollback(self) -> None:
        raise RuntimeError("work run at once is rolled back when it raises")


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
