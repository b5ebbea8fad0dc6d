"""The runner's two watchers: stops asked by another process, and the leases of its runs.

:class:`StopWatch` (SQLite): a stop asked in this process (a reply through intake) arrives as a
:class:`StopRequested` commit event; another process's commit (``pizzamail stop``) publishes nothing
here, so while runs are working one task reads the store's data version every ``interval`` (one
cheap read however many runs work, the read the scheduler makes too) and looks up the working runs'
stop requests only when it moved. With no run working it reads nothing: it waits until one starts.
On PostgreSQL every process's StopRequested arrives by NOTIFY, and the watch (every 5 s) is only for
a stop whose NOTIFY was missed while the LISTEN connection was down.

:class:`Heartbeat` (both engines): keeps this runner's leases (:mod:`pizzamail.store.leases`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

from pizzamail.store import Store
from pizzamail.store.leases import leases_lost, reclaim_expired, renew_leases
from pizzamail.store.runs import stops_requested

log = logging.getLogger("pizzamail.runner")


@dataclass(kw_only=True)
class _Background:
    """A long-lived part (``async with``) of the runner: one task running :meth:`_loop` until left."""

    _task: asyncio.Task[None] | None = field(default=None, init=False)

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._loop(), name=f"pizzamail-runner-{type(self).__name__}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        raise NotImplementedError


@dataclass(kw_only=True)
class StopWatch(_Background):

    store: Store
    working: Callable[[], list[int]]
    """the runs working in this process now"""
    halt: Callable[[int], None]
    """stops one of them"""
    interval: float = 0.5
    _started: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def run_started(self) -> None:
        self._started.set()

    async def _loop(self) -> None:
        seen: int | None = None
        while True:
            await self._started.wait()
            await asyncio.sleep(self.interval)
            working = self.working()
            if not working:  # nothing to stop: wait for the next run without reading
                self._started.clear()
                seen = None
                continue
            try:
                seen = await self._look(working, seen)
            except Exception:  # the database may be busy: look again at the next turn
                log.exception("could not look for stop requests")

    async def _look(self, working: list[int], seen: int | None) -> int:
        version = await self.store.data_version()
        if version != seen:
            for run_id in await stops_requested(self.store, working):
                self.halt(run_id)
        return version


@dataclass(kw_only=True)
class Heartbeat(_Background):
    """Every third of the lease: renews the leases of this runner's runs, drops the runs another
    worker took over meanwhile, and requeues runs whose worker stopped renewing (killed, lost), so
    a live runner takes each over at once. A long-lived part (``async with``) of the runner."""

    store: Store
    worker: str
    lease_seconds: float
    working: Callable[[], list[int]]
    """the runs working in this runner now"""
    drop: Callable[[int], None]
    """stops working on one of them, without a step or a mail"""

    async def beat(self) -> None:
        working = self.working()
        if working:  # an idle runner holds no lease: it writes nothing
            await renew_leases(self.store, self.worker, self.lease_seconds, working)
            for run_id in await leases_lost(self.store, self.worker, working):
                self.drop(run_id)
        requeued = await reclaim_expired(self.store)
        if requeued:
            log.warning("run(s) %s went back to the queue: their worker stopped renewing its lease",
                        requeued)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                await self.beat()
            except Exception:  # the database may be away for a moment: the next beat tries again
                log.exception("could not renew the leases of this runner's runs")
