"""Leader election: the parts that must run once per deployment run in one ``serve`` at a time.

With PostgreSQL any number of ``serve`` processes share one database. The parts wrapped in
:class:`Led` (filing, the Action folder's sync, the Activity board, the scheduler, the approvals
sweep, the watches, the INBOX reader) run only in the serve that holds one session advisory lock,
:data:`LEADER_LOCK`. One lock for all of them, not one per part: parts that write the same mail
(the filer, the Action sync and the board share one index; the INBOX reader's mail is filed by the
filer) must never be split over two processes, and one leader per deployment is easy to see
(``pizzamail doctor``) and to reason about.

The lock is held on a connection of its own, never a pooled one: a pooled connection keeps its
session locks when it goes back to the pool, and the pool may close or reuse it at any time. The
server frees the lock the moment the leader's session ends (a stopped or killed process, a
terminated backend); standbys try again every ``retry`` seconds; a leader that sees its connection
lost gives its parts up at once (another serve may already lead).

With SQLite, ``serve`` holds the home's lock, so it is always the leader.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pizzamail.store import Store

if TYPE_CHECKING:  # psycopg is imported only where PostgreSQL is used, as the store does
    from psycopg import AsyncConnection

log = logging.getLogger("pizzamail.store")

#: the session advisory lock the leader holds (next to the store's write and migration locks)
LEADER_LOCK = 0x70697A7A616D61 + 2
#: seconds between a standby's tries to become the leader
RETRY_SECONDS = 5.0
_LEADER = "pizzamail leader "


async def leader_of(store: Store) -> str | None:
    """Who leads (``host pid N``), None when no serve does (PostgreSQL only)."""
    rows = await store.fetchall(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid::bigint = ?"
        " AND l.objid::bigint = ?"
        " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        (LEADER_LOCK >> 32, LEADER_LOCK & 0xFFFFFFFF))
    return str(rows[0][0]).removeprefix(_LEADER) if rows else None


def _session_name() -> str:
    """What the lock's session is called on the server: who leads, for ``pizzamail doctor``."""
    return f"{_LEADER}{socket.gethostname()[:30]} pid {os.getpid()}"


class Hold(Protocol):
    """The lock behind an election."""

    async def take(self) -> bool:
        """One try: True when this process holds the lock (now, or already)."""
        ...

    async def lost(self) -> None:
        """Return when the lock held is lost."""
        ...

    async def close(self) -> None: ...


@dataclass
class Always:
    """SQLite: one serve per home, which always leads."""

    async def take(self) -> bool:
        return True

    async def lost(self) -> None:
        await asyncio.Event().wait()

    async def close(self) -> None:
        return None


@dataclass(kw_only=True)
class AdvisoryHold:
    """A session advisory lock on a dedicated connection (kept between tries while on standby)."""

    url: str
    password: str | None = field(repr=False)
    key: int = LEADER_LOCK
    _conn: AsyncConnection[Any] | None = None

    async def take(self) -> bool:
        if self._conn is None or self._conn.closed:
            self._conn = await self._connect()
        cursor = await self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
        row = await cursor.fetchone()
        return bool(row and row[0])

    async def _connect(self) -> AsyncConnection[Any]:
        import psycopg

        from pizzamail.store.postgres import KEEPALIVE

        extra: dict[str, Any] = {"autocommit": True, "application_name": _session_name(), **KEEPALIVE}
        if self.password is not None:
            extra["password"] = self.password
        conn: AsyncConnection[Any] = await psycopg.AsyncConnection.connect(self.url, **extra)
        # the server's side too: a leader whose machine is lost must not keep the lock for hours
        await conn.execute("SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5;"
                           " SET tcp_keepalives_count = 3")
        return conn

    async def lost(self) -> None:
        """Nothing is LISTENed on this connection: waiting for notifications is waiting on its
        socket, which only ends when the connection does."""
        import psycopg

        assert self._conn is not None, "the lock is not held"
        try:
            async for _ in self._conn.notifies():
                pass
        except psycopg.Error as exc:
            log.warning("store: the leader's connection was lost (%s)", str(exc).strip() or exc)
        await self.close()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


def hold_for(store: Store) -> Hold:
    if store.url is None:
        return Always()
    return AdvisoryHold(url=store.url, password=store.password)


@dataclass(kw_only=True)
class Leadership:
    """One per serve (``async with``): tries once on entering, so a serve that leads from its start
    enters its led parts in their place in the start order; then keeps trying in the background."""

    hold: Hold
    retry: float = RETRY_SECONDS
    _parts: list[Led] = field(default_factory=list)
    _leading: bool = False
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _states: dict[bool, asyncio.Event] = field(default_factory=lambda: {True: asyncio.Event(),
                                                                          False: asyncio.Event()})
    _task: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self._leading

    def led(self, name: str, make: Callable[[], AbstractAsyncContextManager[object]]) -> Led:
        """A part (made anew each time this serve becomes the leader) that runs only while it leads."""
        return Led(leadership=self, name=name, make=make)

    def names(self) -> list[str]:
        return [part.name for part in self._parts]

    def announce(self) -> None:
        """Say which led parts run here (with SQLite they always do: nothing to say)."""
        if isinstance(self.hold, Always):
            return
        if self._leading:
            log.info("leading: %s", ", ".join(self.names()))
        else:
            log.info("standby: %s run in another serve; this one takes over when it stops",
                     ", ".join(self.names()))

    async def until(self, leading: bool) -> None:
        """Wait until this serve leads (True) or stands by (False)."""
        await self._states[leading].wait()

    async def __aenter__(self) -> Leadership:
        self._set(await self._try())
        self._task = asyncio.create_task(self._run(), name="pizzamail-leadership")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.hold.close()

    def _set(self, leading: bool) -> None:
        self._leading = leading
        self._states[not leading].clear()
        self._states[leading].set()

    async def _try(self) -> bool:
        try:
            return await self.hold.take()
        except Exception as exc:  # the database is away: a standby as long as it is
            log.warning("store: could not try for the leadership (%s)", exc)
            await self.hold.close()
            return False

    async def _run(self) -> None:
        while True:
            if self._leading:
                await self.hold.lost()
                await self._step_down()
            else:
                await asyncio.sleep(self.retry)
                if await self._try():
                    await self._step_up()

    async def _step_up(self) -> None:
        async with self._lock:
            self._set(True)
            log.info("leading: %s", ", ".join(self.names()) or "(nothing led)")
            for part in list(self._parts):
                await part.enter()

    async def _step_down(self) -> None:
        async with self._lock:
            self._set(False)
            log.warning("standby: %s stopped here; another serve runs them", ", ".join(self.names()))
            for part in reversed(self._parts):
                await part.leave()


@dataclass(kw_only=True)
class Led:
    """A part that runs while its serve leads: entered at once when it does, otherwise when it
    becomes the leader; left when the leadership is lost (and made anew for the next time)."""

    leadership: Leadership
    name: str
    make: Callable[[], AbstractAsyncContextManager[object]]
    _part: AbstractAsyncContextManager[object] | None = None

    async def __aenter__(self) -> Led:
        """At start a part that fails to enter stops the start, as an unled part's does."""
        async with self.leadership._lock:
            self.leadership._parts.append(self)
            if self.leadership.leading:
                part = self.make()
                await part.__aenter__()
                self._part = part
        return self

    async def __aexit__(self, *exc: object) -> None:
        async with self.leadership._lock:
            self.leadership._parts.remove(self)
            await self.leave()

    @property
    def running(self) -> bool:
        return self._part is not None

    async def enter(self) -> None:
        """On taking over, a part that fails to start is logged and left out (the others run)."""
        part = self.make()
        try:
            await part.__aenter__()
        except Exception:
            log.exception("%s could not start on taking over", self.name)
            return
        self._part = part

    async def leave(self) -> None:
        part, self._part = self._part, None
        if part is None:
            return
        try:
            await part.__aexit__(None, None, None)
        except Exception:
            log.exception("%s did not stop cleanly", self.name)
