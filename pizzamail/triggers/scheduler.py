"""The service's scheduler: sleeps until the next due time, fires, repeats. No polling.

The clock is injectable (tests move time by hand, then :meth:`Scheduler.poke`). The sleep is capped
at :data:`MAX_SLEEP` so a wall clock set forward (or a resumed laptop) is noticed soon after.
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
from pizzamail.triggers.cron import from_text
from pizzamail.triggers.schedules import Firing, fire_due, report_interrupted, sync_config

log = logging.getLogger("pizzamail.triggers")

MAX_SLEEP = 300.0


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(kw_only=True)
class Scheduler:
    store: Store
    blobs: BlobStore
    config: Config
    on_fired: Callable[[], None] = lambda: None
    """called after runs were queued (the service wakes the runner)"""
    clock: Callable[[], datetime] = utcnow
    _poke: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def prepare(self) -> list[int]:
        """Before the runner starts: config schedules into the store, crashed occurrences reported."""
        await sync_config(self.store, self.config, at=self.clock())
        reported = await report_interrupted(self.store, self.blobs, self.config)
        if reported:
            log.warning("scheduled run(s) %s were interrupted after using tools; reported, not replayed",
                        reported)
        return reported

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="pizzamail-scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def poke(self) -> None:
        """Schedules changed (or the clock moved): look again now."""
        self._poke.set()

    async def tick(self) -> list[Firing]:
        firings = await fire_due(self.store, self.blobs, self.config, at=self.clock())
        for firing in firings:
            log.info("schedule %s: occurrence %s %s", firing.schedule, firing.due_at, firing.status)
        if any(f.run_id is not None for f in firings):
            self.on_fired()
        return firings

    async def seconds_to_next(self) -> float:
        row = await self.store.fetchone("SELECT min(next_due) FROM schedules WHERE enabled = 1")
        if row is None or row[0] is None:
            return MAX_SLEEP
        delay = (from_text(row[0]) - self.clock()).total_seconds()
        return min(max(delay, 0.0), MAX_SLEEP)

    async def _loop(self) -> None:
        while True:
            delay = 0.0
            try:
                await self.tick()
            except Exception:  # a broken schedule must not stop the others for good
                log.exception("scheduler tick failed")
                delay = 30.0
            self._poke.clear()
            try:
                delay = max(delay, await self.seconds_to_next())
                await asyncio.wait_for(self._poke.wait(), timeout=delay)
            except TimeoutError:
                pass
