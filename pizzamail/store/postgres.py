"""The PostgreSQL backend: psycopg 3, async, pooled; for more than one process or machine.

The store's SQL is SQLite's dialect, translated per statement (:mod:`pizzamail.store.sql`). Every
write transaction first takes one advisory transaction lock, so writes are serialised across all
processes as SQLite serialises them: the store's functions decide ("is this run still queued?") and
act in one transaction, and that stays true with any number of workers. Transactions are short (no
model or tool is ever called inside one), so the lock is held for milliseconds.

Each commit also sends one ``NOTIFY`` with its events (ids only, see :mod:`pizzamail.store.events`);
every store LISTENs, so another process's commits reach ``Store.events`` too, without polling.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.adapt import Loader
from psycopg.types.numeric import Int8Dumper
from psycopg_pool import AsyncConnectionPool

from pizzamail.errors import StoreUnreachable
from pizzamail.store import Row, Tx, Work, in_savepoints, migrations, now
from pizzamail.store.commit import Outcome
from pizzamail.store.events import CommitEvent, Events, Resync, decode, encode
from pizzamail.store.location import store_place
from pizzamail.store.sql import POSTGRESQL, for_postgres, statements

log = logging.getLogger("pizzamail.store")

#: the advisory lock every write transaction takes (any constant; "pizzamail" in ASCII, truncated)
WRITE_LOCK = 0x70697A7A616D61
#: the lock migrations run under, so two processes starting at once do not both migrate
MIGRATE_LOCK = WRITE_LOCK + 1
CHANNEL = "pizzamail"
#: NOTIFY payloads must stay under 8000 bytes; events are split over as many as needed
PAYLOAD_BYTES = 7000
#: a connection whose server vanished (a lost machine, a NAT that forgot it) fails after about
#: 10 + 3 * 5 seconds instead of hanging for hours; the LISTEN one above all, which otherwise only waits
KEEPALIVE = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}


def _text(params: Iterable[Any]) -> tuple[Any, ...]:
    """Parameters as PostgreSQL takes them: its text cannot hold NUL, which a mail's decoded header
    or body may (``=00``); it becomes U+FFFD there, as in any undecodable text (the mail's own bytes
    are kept whole as a blob). Always a tuple, even an empty one, so that psycopg reads the ``%%``
    of the translated statement as ``%``."""
    return tuple(p.replace("\x00", "\ufffd") if isinstance(p, str) else p for p in params)


class PgRow(tuple[Any, ...]):
    """A row read by position or by column name, as SQLite's rows are."""

    _names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> PgRow:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self._names[key])
        return super().__getitem__(key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    names = {column.name: index for index, column in enumerate(cursor.description or ())}
    return lambda values: PgRow(values, names)


class _WholeNumbers(Loader):
    """``sum()`` of a BIGINT column is NUMERIC: read it as the ``int`` SQLite gives (a fraction,
    which no column of the store holds, stays a float)."""

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        return int(text) if text.lstrip("-").isdigit() else float(text)


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    # SQLite stores True as 1: the store's 0/1 columns are BIGINT, and a bool goes in as one
    conn.adapters.register_dumper(bool, Int8Dumper)
    conn.adapters.register_loader("numeric", _WholeNumbers)


@dataclass
class _Cursor:
    rowcount: int
    rows: list[PgRow]

    async def fetchone(self) -> Row | None:
        return self.rows[0] if self.rows else None

    async def fetchall(self) -> Iterable[Row]:
        return self.rows


async def _query(conn: psycopg.AsyncConnection[Any], sql: str, params: tuple[Any, ...]) -> _Cursor:
    """One statement of the store's dialect on ``conn``, its rows read to the end."""
    cursor = conn.cursor(row_factory=_row_factory)
    await cursor.execute(for_postgres(sql), _text(params))
    rows = await cursor.fetchall() if cursor.description else []
    return _Cursor(rowcount=cursor.rowcount, rows=rows)


@dataclass
class _Statement:
    """What :meth:`PgTx.execute` returns: awaited, or ``async with`` (as aiosqlite's)."""

    run: Callable[[], Any]

    def __await__(self) -> Generator[Any, None, _Cursor]:
        result: _Cursor = yield from self.run().__await__()
        return result

    async def __aenter__(self) -> _Cursor:
        result: _Cursor = await self.run()
        return result

    async def __aexit__(self, *exc: Any) -> None:
        return None


@dataclass(eq=False)
class PgTx:
    """One pooled connection inside its write transaction, speaking the store's dialect."""

    conn: psycopg.AsyncConnection[Any]
    dialect: str = POSTGRESQL

    def execute(self, sql: str, parameters: Iterable[Any] | None = None, /) -> _Statement:
        return _Statement(lambda: self._run(sql, tuple(parameters or ())))

    async def _run(self, sql: str, params: tuple[Any, ...]) -> _Cursor:
        return await _query(self.conn, sql, params)

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]], /) -> None:
        batch = [_text(p) for p in parameters]
        if batch:
            await self.conn.cursor().executemany(for_postgres(sql), batch)

    async def commit(self) -> None:
        await self.conn.execute("COMMIT")

    async def rollback(self) -> None:
        await self.conn.execute("ROLLBACK")


@dataclass(kw_only=True)
class PostgresBackend:
    url: str
    password: str | None = field(repr=False)
    events: Events
    dialect: str = POSTGRESQL
    pool_size: int = 10
    _pool: AsyncConnectionPool[Any] | None = None
    _listener: asyncio.Task[None] | None = None
    _listening: asyncio.Event = field(default_factory=asyncio.Event)
    _version: int = 0
    _origin: str = field(default_factory=lambda: uuid.uuid4().hex)
    """this store's mark on its notifications: its own events are published at commit already"""

    def _kwargs(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"autocommit": True, "application_name": "pizzamail", **KEEPALIVE}
        if self.password is not None:
            extra["password"] = self.password
        return extra

    async def open(self) -> None:
        await self._reachable()
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.url, kwargs=self._kwargs(), min_size=1, max_size=self.pool_size, open=False,
            configure=_configure, check=AsyncConnectionPool.check_connection, name="pizzamail")
        try:
            await pool.open(wait=True, timeout=10)
        except BaseException:
            await pool.close()
            raise
        self._pool = pool
        try:
            await self._migrate()
            self._listener = asyncio.create_task(self._listen(), name="pizzamail-store-listen")
            await self._listening.wait()
        except BaseException:
            await self.close()
            raise

    async def _reachable(self) -> None:
        """One connection first, so that a server that is down or refuses this login is said in one
        line with its reason (the pool would only time out after 10 s)."""
        try:
            probe = await psycopg.AsyncConnection.connect(self.url, connect_timeout=10, **self._kwargs())
        except psycopg.OperationalError as exc:
            raise StoreUnreachable(store_place(self.url), " ".join(str(exc).split())) from None
        await probe.close()

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
            self._listener = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def _open_pool(self) -> AsyncConnectionPool[Any]:
        assert self._pool is not None, "store is not open"
        return self._pool

    @asynccontextmanager
    async def transaction(self, *, serial: bool = True) -> AsyncIterator[Tx]:
        """``serial``: first take the write lock (see the module). Without it the transaction runs
        beside every other one, guarded by row locks only (``Store.write(serial=False)``)."""
        async with self._open_pool().connection() as conn:
            tx = PgTx(conn)
            await conn.execute("BEGIN")
            try:
                if serial:
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            except BaseException:
                await conn.execute("ROLLBACK")
                raise
            yield tx

    async def at_once(self, works: list[Work[Any]]) -> tuple[list[Outcome], list[CommitEvent]]:
        return await in_savepoints(self, works)

    async def announce(self, tx: Tx, changes: list[CommitEvent]) -> None:
        """One NOTIFY (or a few, for many events) sent with the commit, even with no events: other
        stores' :meth:`data_version` moves on every commit, as SQLite's does."""
        for payload in encode(changes, origin=self._origin, limit=PAYLOAD_BYTES):
            await tx.execute("SELECT pg_notify(?, ?)", (CHANNEL, payload))

    async def fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Row]:
        async with self._open_pool().connection() as conn:
            return list((await _query(conn, sql, params)).rows)

    async def fetch_tuples(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with self._open_pool().connection() as conn:
            cursor = await conn.execute(for_postgres(sql), _text(params))
            return list(await cursor.fetchall())

    async def write_alone(self, sql: str, params: tuple[Any, ...]) -> None:
        async with self._open_pool().connection() as conn:  # autocommit: committed when it returns
            await conn.execute(for_postgres(sql), _text(params))

    async def data_version(self) -> int:
        return self._version

    async def _migrate(self) -> None:
        async with self._open_pool().connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
            try:
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS migrations(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
                applied = await conn.execute("SELECT name FROM migrations")
                done = {row[0] for row in await applied.fetchall()}
                for name, entry in migrations.MIGRATIONS:
                    if name in done:
                        continue
                    async with conn.transaction():
                        for statement in statements(migrations.script(entry, POSTGRESQL)):
                            await conn.execute(statement)  # no parameters: a % is a %
                        await conn.execute("INSERT INTO migrations VALUES (%s, %s)", (name, now()))
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))

    async def _listen(self) -> None:
        """LISTEN on a connection of its own, for as long as the store is open; reconnects after a
        lost connection, then publishes :class:`Resync`: what was missed meanwhile is looked for
        by the parts that follow events, as after a restart."""
        delay, lost = 0.5, False
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, **self._kwargs()) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    self._version += 1
                    delay = 0.5
                    if lost:
                        lost = False
                        self.events.publish([Resync()], heard=True)
                    async for note in conn.notifies():
                        self._heard(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a lost server: try again, never take the store down
                log.warning("store: LISTEN connection lost (%s); reconnecting in %.1f s", exc, delay)
                lost = True
                self._listening.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    def _heard(self, payload: str) -> None:
        self._version += 1
        try:
            origin, events = decode(payload)
        except ValueError:
            log.warning("store: a notification that is not pizzamail's was ignored")
            return
        if origin != self._origin:
            self.events.publish(events, heard=True)
