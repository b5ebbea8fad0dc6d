"""The store: the one source of truth for state, in SQLite (embedded, the default) or PostgreSQL.

Every write is one transaction of :meth:`Store.write`, and writes are serialised: SQLite has a
single writer (``BEGIN IMMEDIATE``), and on PostgreSQL each write transaction first takes one
advisory lock, so the reasoning "nothing else changes the store while my transaction runs" holds
across processes and machines alike. The one exception, on PostgreSQL, is a run's claim and its
lease's renewal (``write(serial=False)``, see :mod:`pizzamail.store.leases`), so that any number of
workers take runs side by side. Reads never wait for a writer and never see half of one. What a
transaction changed is published to ``Store.events`` after its commit (:mod:`pizzamail.store.events`);
with PostgreSQL, other processes' commits arrive there too, by LISTEN/NOTIFY.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from pizzamail.errors import TransactionLost
from pizzamail.lanes import foreground
from pizzamail.store.commit import GroupCommit, Outcome, to_the_end
from pizzamail.store.events import CommitEvent, Events, collecting, dropped_on_error
from pizzamail.store.sql import SQLITE

T = TypeVar("T")

Work = Callable[["Tx"], Coroutine[Any, Any, T]]
"""A write transaction's work, for :meth:`Store.write_at_once`"""


_LAST: tuple[int, str] = (-1, "")


def now() -> str:
    """Timestamps are UTC ISO 8601 with seconds, so they sort as text. Made once a second: a task
    mail's commit asks four times, and formatting the time was a fortieth of intake's CPU."""
    global _LAST
    second = int(time.time())
    if _LAST[0] != second:
        _LAST = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _LAST[1]


class Row(Protocol):
    """A result row: by position or by column name; ``dict(row)`` maps names to values."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    async def fetchone(self) -> Row | None: ...

    async def fetchall(self) -> Iterable[Row]: ...


class Statement(Protocol):
    """A statement sent: awaited for its cursor, or used as ``async with db.execute(...) as cursor``."""

    def __await__(self) -> Generator[Any, None, Cursor]: ...

    async def __aenter__(self) -> Cursor: ...

    async def __aexit__(self, *exc: Any) -> Any: ...


class Tx(Protocol):
    """An open write transaction (SQLite's dialect, ``?`` parameters, on either backend)."""

    def execute(self, sql: str, parameters: Iterable[Any] | None = None, /) -> Statement: ...

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]], /) -> Any: ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...


class Backend(Protocol):
    dialect: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    def transaction(self, *, serial: bool = True) -> AbstractAsyncContextManager[Tx]: ...

    async def announce(self, tx: Tx, changes: list[CommitEvent]) -> None: ...

    async def at_once(self, works: list[Work[Any]]) -> tuple[list[Outcome], list[CommitEvent]]:
        """A batch of :meth:`Store.write_at_once`: ``works`` in one transaction, each in a savepoint;
        their outcomes and the events of those that succeeded (see :func:`in_savepoints`)."""
        ...

    async def fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Row]: ...

    async def fetch_tuples(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    async def write_alone(self, sql: str, params: tuple[Any, ...]) -> None: ...

    async def data_version(self) -> int: ...


@dataclass(kw_only=True)
class Store:
    """``Store(path=…)``: SQLite in that file. ``Store(url="postgresql://…")``: PostgreSQL."""

    path: Path | None = None
    url: str | None = None
    password: str | None = field(default=None, repr=False)
    """PostgreSQL's password when the url has none (from the keyring: ``pizzamail keys set store``)"""
    pool_size: int = 10
    """PostgreSQL: most connections this store keeps open"""
    events: Events = field(default_factory=Events)
    """commit events: subscribe here to follow what committed transactions change"""
    _backend: Backend | None = None
    _lock: WriteLock = field(default_factory=lambda: WriteLock())
    _group: GroupCommit | None = None

    @property
    def dialect(self) -> str:
        return self._open_backend().dialect

    @property
    def reads_in_place(self) -> bool:
        """Reads run on the caller's thread and never suspend (SQLite's reader, see
        :mod:`.sqlite`): one started early only runs when its task's turn comes."""
        return self.dialect == SQLITE

    def twin(self) -> Store:
        """Another store on the same database (unopened): another process's view, for tests and tools."""
        return Store(path=self.path, url=self.url, password=self.password, pool_size=self.pool_size)

    async def open(self) -> Store:
        if self.url is not None:
            from pizzamail.store.postgres import PostgresBackend
            self._backend = PostgresBackend(url=self.url, password=self.password, events=self.events,
                                            pool_size=self.pool_size)
        else:
            from pizzamail.store.sqlite import SqliteBackend
            assert self.path is not None, "a store needs a path or a url"
            self._backend = SqliteBackend(path=self.path)
        try:
            await self._backend.open()
        except BaseException:
            self._backend = None
            raise
        return self

    async def close(self) -> None:
        if self._backend is not None:
            await self._backend.close()
        self._backend = None
        self._group = None

    async def __aenter__(self) -> Store:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _open_backend(self) -> Backend:
        assert self._backend is not None, "store is not open"
        return self._backend

    @asynccontextmanager
    async def write(self, *, serial: bool = True, priority: bool = False) -> AsyncIterator[Tx]:
        """One write transaction: committed on normal exit, rolled back on an exception. The events
        recorded in it are published once it is committed, never for a rollback.

        ``priority``: this transaction goes before every ordinary one waiting for the write lock
        (mail taken by SMTP, whose sender waits for the commit, before the runner's bookkeeping).

        ``serial=False`` (PostgreSQL only; SQLite has one writer and ignores it): the transaction is
        not serialised with the others, so it runs beside them. Only for a transaction whose one
        decision is a single statement guarded by row locks (a run's claim, a lease's renewal): the
        store's other functions decide in one statement and act in the next, and rely on nothing
        else writing in between.

        Safe under cancellation: a rollback or commit already sent is waited for before the
        cancellation goes on, so the connection is never left mid-transaction.
        """
        backend = self._open_backend()
        parallel = not serial and backend.dialect != SQLITE
        # a run holding the lock must not wait behind the mail that waits for the lock
        with foreground():
            async with contextlib.nullcontext() if parallel else self._lock.held(priority=priority), \
                    backend.transaction(serial=not parallel) as tx:
                with collecting(tx) as changes:
                    try:
                        yield tx
                    except BaseException:
                        await to_the_end(tx.rollback())
                        raise
                    await self._commit(backend, tx, changes)

    async def _commit(self, backend: Backend, tx: Tx, changes: list[CommitEvent]) -> None:
        """A commit whose caller is cancelled meanwhile still happens, so its events are published
        when it is done (before the caller resumes, when it is not cancelled)."""

        async def seal() -> None:
            await backend.announce(tx, changes)
            await tx.commit()

        commit = asyncio.ensure_future(seal())

        def committed(done: asyncio.Future[None]) -> None:
            if not done.cancelled() and done.exception() is None:
                self.events.publish(changes)

        commit.add_done_callback(committed)
        await to_the_end(commit)

    async def write_at_once(self, work: Work[T], *, priority: bool = False, serial: bool = True) -> T:
        """``await work(db)`` in a write transaction, as :meth:`write` does, for work that awaits
        nothing but its statements. The works that come in while one batch is written share the
        next transaction and commit, each in a savepoint of its own (:mod:`pizzamail.store.commit`).
        On SQLite a batch runs on the writer's thread in one step: each statement awaited on its
        own is a hop to that thread and back, which costs more than the statement (and waits for
        the event loop's turn). ``serial=False`` is :meth:`write`'s (PostgreSQL: beside the
        serialised writes, never batched with them; SQLite ignores it)."""
        if not serial and self.dialect != SQLITE:
            async with self.write(serial=False) as db:
                return await work(db)
        if self._group is None:
            self._group = GroupCommit(batch=self._open_backend().at_once,
                                      publish=lambda events: self.events.publish(events),
                                      turn=lambda first: self._lock.held(priority=first))
        return cast(T, await self._group.write(work, priority=priority))

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[Row]:
        """All rows of one query, read to the end in one step (never a statement left half-read,
        whose open read transaction would keep the next query in the past)."""
        return await self._open_backend().fetchall(sql, tuple(params))

    async def fetch_tuples(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """:meth:`fetchall` as plain tuples, by position only: for reads of thousands of rows taken
        apart column by column (a row that also answers to its columns' names costs a tenth more)."""
        return await self._open_backend().fetch_tuples(sql, tuple(params))

    async def write_alone(self, sql: str, params: Iterable[Any] = ()) -> None:
        """One idempotent statement (``INSERT … ON CONFLICT DO NOTHING``) committed on a connection of
        its own: outside the serialised writes, so it may run while this task has one open (a blob,
        committed before the transaction that names it). PostgreSQL only."""
        await self._open_backend().write_alone(sql, tuple(params))

    async def fetchone(self, sql: str, params: Iterable[Any] = ()) -> Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def data_version(self) -> int:
        """A counter that moves when a commit happened, this process's or another's (cheap to poll:
        SQLite's ``data_version``; on PostgreSQL the notifications received)."""
        return await self._open_backend().data_version()


class WriteLock:
    """The lock of a store's serialised writes: first come, first served, except that a waiter
    with priority goes before every ordinary one. Released, it is handed to the next waiter
    directly, so nobody arriving meanwhile takes it out of turn."""

    def __init__(self) -> None:
        self._held = False
        self._waiting: tuple[deque[asyncio.Future[None]], deque[asyncio.Future[None]]] = (deque(), deque())

    @asynccontextmanager
    async def held(self, *, priority: bool = False) -> AsyncIterator[None]:
        await self._acquire(priority)
        try:
            yield
        finally:
            self._release()

    def waiting(self, *, priority: bool) -> int:
        """How many wait with (or without) priority."""
        return len(self._waiting[0 if priority else 1])

    async def _acquire(self, priority: bool) -> None:
        if not self._held and not any(self._waiting):
            self._held = True
            return
        turn = asyncio.get_running_loop().create_future()
        queue = self._waiting[0 if priority else 1]
        queue.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._release()  # handed the lock as the cancellation came: passed on
            elif turn in queue:  # a release may have passed over (and dropped) the cancelled turn
                queue.remove(turn)
            raise

    def _release(self) -> None:
        for queue in self._waiting:
            while queue:
                turn = queue.popleft()
                if not turn.done():
                    turn.set_result(None)  # still held: now by that waiter
                    return
        self._held = False


@asynccontextmanager
async def savepoint(db: Tx, name: str = "part") -> AsyncIterator[None]:
    """A part of a transaction that fails alone: on an exception its statements are rolled back
    (and its commit events dropped), the transaction stays open and the exception goes on; when
    the failure ended the whole transaction (SQLite's own rollback), :class:`TransactionLost`."""
    await db.execute(f"SAVEPOINT {name}")
    with dropped_on_error(db):
        try:
            yield
        except Exception as failed:  # a cancellation rolls the whole transaction back anyway
            try:
                await db.execute(f"ROLLBACK TO SAVEPOINT {name}")
            except Exception:  # no such savepoint: the database ended the transaction itself
                raise TransactionLost() from failed
            await db.execute(f"RELEASE SAVEPOINT {name}")
            raise
    await db.execute(f"RELEASE SAVEPOINT {name}")


def on_writer_thread(db: Tx) -> bool:
    """Whether ``db``'s statements run on the writer's own thread (:meth:`Store.write_at_once` on
    SQLite), where blocking work done beside them holds up no event loop."""
    return bool(getattr(db, "on_writer_thread", False))


def dialect_of(db: Tx) -> str:
    """The SQL dialect of an open transaction (only the PostgreSQL one says)."""
    return str(getattr(db, "dialect", SQLITE))


async def inserted(db: Tx, sql: str, params: Iterable[Any]) -> int | None:
    """Run an ``INSERT`` and return the id it gave (``RETURNING id``, which both engines have);
    None when ``ON CONFLICT DO NOTHING`` inserted nothing."""
    async with db.execute(f"{sql} RETURNING id", tuple(params)) as cursor:
        row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def insert(db: Tx, sql: str, params: Iterable[Any]) -> int:
    """Run an ``INSERT`` of one row and return the id it gave."""
    new = await inserted(db, sql, params)
    assert new is not None, "the insert gave no row"
    return new


async def in_savepoints(backend: Backend, works: list[Work[Any]]) -> tuple[list[Outcome], list[CommitEvent]]:
    """``works`` in one transaction of ``backend``, each in a savepoint: one that raises is rolled
    back alone and its exception is its outcome. Raises (nothing committed) when the transaction
    as a whole failed. The caller holds the write lock."""
    async with backend.transaction() as tx:
        with collecting(tx) as changes:
            try:
                outcomes = [await _outcome(tx, work) for work in works]
                await backend.announce(tx, changes)
                await tx.commit()
            except BaseException:
                await to_the_end(tx.rollback())
                raise
    return outcomes, changes


async def _outcome(db: Tx, work: Work[Any]) -> Outcome:
    try:
        async with savepoint(db, "work"):  # not ``part``, which a work may use for its own parts
            return True, await work(db)
    except TransactionLost:
        raise
    except Exception as failed:
        return False, failed
