"""The one dispatcher of a runner: it takes queued runs while there is room and starts a task per run.

One task claims for the whole runner, however large its concurrency: it looks at the queue when
woken (``wake()``: a :class:`~pizzamail.store.events.RunQueued` of this process, a run that ended, a
run that stopped running alone) and, as a fallback for runs queued by another process that publishes
nothing here (``pizzamail task`` on SQLite), every ``poll_interval`` seconds. It claims as many
queued runs as there are free places in one claim, until the queue is empty or every place is
taken, so an idle runner costs one wake-up per ``poll_interval``, not one per place, a burst of
runs costs a claim or two, not one each, and a run queued here is claimed the moment its commit
is published. Each claimed run gets a task of its own, which ends with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from pizzamail.config import Config
from pizzamail.lanes import background
from pizzamail.providers.registry import answering
from pizzamail.secrets import SecretStore
from pizzamail.store.runs import Run


def runs_at_once(config: Config, secrets: SecretStore | None) -> int:
    """How many runs a runner works on at once: ``[runner] concurrency``, by default 1 when the
    embedded offline model answers the main agent (it is the configured model, or it stands in for
    one without a key) and many for a remote provider. Without ``secrets`` (a runner given its
    provider) the provider counts as remote."""
    return config.runner.runs_at_once(embedded_model=secrets is not None and _embedded(config, secrets))


def _embedded(config: Config, secrets: SecretStore) -> bool:
    settings = config.provider(config.agent.model.partition(":")[0])
    return (settings is not None and settings.kind == "local") or answering(config, secrets).toy


@dataclass(kw_only=True)
class Dispatcher:
    claim: Callable[[int], Awaitable[list[Run]]]
    """claims at most that many runs this runner may start now, oldest first; none when nothing is
    queued or nothing may start beside a run that runs alone; never raises"""
    work: Callable[[Run], Coroutine[Any, Any, None]]
    """works a claimed run to its end, in the run's own task (ended early only by the runner's
    ``stop()``)"""
    capacity: int
    """most runs worked on at once"""
    poll_interval: float
    """seconds between looks at the queue when nothing wakes the dispatcher"""
    _kick: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _stopping: bool = field(default=False, init=False)
    _loop: asyncio.Task[None] | None = field(default=None, init=False)
    _runs: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    def start(self) -> None:
        """Look at the queue at once, then whenever woken."""
        self._stopping = False
        self._kick.set()
        self._loop = asyncio.create_task(self._dispatch(), name="pizzamail-runner-dispatch")

    async def stop(self) -> None:
        """No more claims; waits for the claim in flight (a store write is never cut in half) and then
        for every run's task (the runner cancels those that wait on the model or a tool)."""
        self._stopping = True
        self._kick.set()
        if self._loop is not None:
            await self._loop
            self._loop = None
        await asyncio.gather(*self._runs, return_exceptions=True)

    def wake(self) -> None:
        self._kick.set()

    @property
    def running(self) -> bool:
        return (self._loop is not None and not self._loop.done()) or any(not t.done() for t in self._runs)

    async def _dispatch(self) -> None:
        background()  # this task and the runs it starts: behind whatever someone waits for
        while not self._stopping:
            self._kick.clear()  # before the look: a wake during it makes another look
            await self._fill()
            if self._stopping:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await self._kick.wait()

    async def _fill(self) -> None:
        """Claim runs until none is left or every place is taken."""
        while not self._stopping and len(self._runs) < self.capacity:
            runs = await self.claim(self.capacity - len(self._runs))
            if not runs:
                return
            for run in runs:
                task = asyncio.create_task(self.work(run), name=f"pizzamail-run-{run.id}")
                self._runs.add(task)
                task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._runs.discard(task)
        self._kick.set()  # a place is free, and the run's thread may have a next run
