"""The service's scheduler: sleeps until the next due time, fires, repeats.

The clock is injectable (tests move time by hand, then :meth:`Scheduler.poke`). In-process changes
(the schedule_task tool) poke it through the store's ``ScheduleChanged`` events; the runs it queues
wake the runner through ``RunQueued``. Changes from another process (``pizzamail schedule add/rm``)
are noticed within :data:`CHECK_EVERY` seconds: while it sleeps it reads the store's data version (a
counter that moves when any other connection commits; no table is read), and only
when that moved does it look whether the earliest due time changed. The sleep is also capped at
:data:`MAX_SLEEP` so a wall clock set forward (or a resumed laptop) is noticed soon after.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pizzamail.config import Config
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.events import ScheduleChanged
from pizzamail.store.schedules import earliest_due
from pizzamail.triggers.schedules import Firing, fire_due, report_interrupted, sync_config
from pizzamail.when.cron import from_text

log = logging.getLogger("pizzamail.triggers")

MAX_SLEEP = 300.0
#: seconds between looks for schedules changed by another process (the runner's queue poll is 2 s)
CHECK_EVERY = 2.0


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(kw_only=True)
class Scheduler:
    store: Store
    blobs: BlobStore
    config: Config
    clock: Callable[[], datetime] = utcnow
    check_every: float = CHECK_EVERY
    _poke: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _unsubscribe: Callable[[], None] | None = None
    _version: int | None = None
    _planned: str | None = None
    """the earliest due time the current sleep was planned with"""

    async def __aenter__(self) -> Scheduler:
        """Enter before the runner: config schedules are stored and crashed occurrences reported
        before it resumes interrupted runs."""
        await self.prepare()
        self._unsubscribe = self.store.events.subscribe(ScheduleChanged, lambda _: self.poke())
        self._task = asyncio.create_task(self._loop(), name="pizzamail-scheduler")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def prepare(self) -> list[int]:
        """Config schedules into the store, crashed occurrences reported."""
        await sync_config(self.store, self.config, at=self.clock())
        reported = await report_interrupted(self.store, self.blobs, self.config)
        if reported:
            log.warning("scheduled run(s) %s were interrupted after using tools; reported, not replayed",
                        reported)
        return reported

    def poke(self) -> None:
        """Schedules changed (or the clock moved): look again now."""
        self._poke.set()

    async def tick(self) -> list[Firing]:
        firings = await fire_due(self.store, self.blobs, self.config, at=self.clock())
        for firing in firings:
            log.info("schedule %s: occurrence %s %s", firing.schedule, firing.due_at, firing.status)
        return firings

    async def seconds_to_next(self) -> float:
        self._planned = await earliest_due(self.store)
        if self._planned is None:
            return MAX_SLEEP
        delay = (from_text(self._planned) - self.clock()).total_seconds()
        return min(max(delay, 0.0), MAX_SLEEP)

    async def changed(self) -> bool:
        """Whether the earliest due time moved since the sleep was planned (cheap when nothing was
        committed). The store's reader never writes, so its data_version also moves on the service's
        own commits (every run step): the due time tells a schedule change from those."""
        version = await self.store.data_version()
        if version == self._version:
            return False
        self._version = version
        return await earliest_due(self.store) != self._planned

    async def _loop(self) -> None:
        while True:
            delay = 0.0
            self._poke.clear()  # before the tick: a change made while it ticks is looked at next
            try:
                await self.tick()
            except Exception:  # a broken schedule must not stop the others for good
                log.exception("scheduler tick failed")
                delay = 30.0
            try:
                self._version = await self.store.data_version()  # before planning: no change slips between
                delay = max(delay, await self.seconds_to_next())
            except Exception:
                log.exception("scheduler could not plan its sleep")
                delay = 30.0
            await self._sleep(delay)

    async def _sleep(self, delay: float) -> None:
        """Up to ``delay`` seconds; less when poked or when another process changed the schedules."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        while (left := deadline - loop.time()) > 0:
            try:
                await asyncio.wait_for(self._poke.wait(), timeout=min(left, self.check_every))
                return
            except TimeoutError:
                pass
            try:
                if await self.changed():
                    return
            except Exception:  # the database was busy: keep sleeping, the deadline still holds
                log.debug("could not look for schedule changes", exc_info=True)
