"""Group commit of the store's at-once writes (:meth:`~pizzamail.store.Store.write_at_once`).

Each commit costs an fsync and a turn at the write lock; on SQLite also a trip to the writer's
thread and back, which waits for a busy event loop. So the at-once writes that come in while one
batch is being written (a mail's task, a run's checkpoint, a run's end) wait together, and are
written in one transaction and one commit, each in a savepoint of its own: one that fails is
rolled back alone and its own caller gets the error, the others are committed. Every caller is
answered only after the commit that holds its work, exactly as if it had been alone.

A lone write never waits for company: it goes at once, and whatever arrives meanwhile forms the
next batch. Writes with priority (mail whose sender waits for the commit) have a lane of their
own, which takes the write lock before the ordinary waiters.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pizzamail.lanes import foreground_context
from pizzamail.store.events import CommitEvent

T = TypeVar("T")

log = logging.getLogger(__name__)

Outcome = tuple[bool, Any]
"""A work's end: (True, its result) or (False, the exception it raised)"""

Batch = Callable[[list[Any]], Awaitable[tuple[list[Outcome], list[CommitEvent]]]]
"""writes works in one transaction, each in a savepoint; returns each one's outcome and the events
of the committed ones (raises when the whole transaction failed)"""

Turn = Callable[[bool], Any]
"""the write lock's turn for a batch: an async context manager (``WriteLock.held``)"""


@dataclass(kw_only=True)
class _Lane:
    waiting: list[tuple[Any, asyncio.Future[Any]]] = field(default_factory=list)
    writing: asyncio.Task[None] | None = None


@dataclass(kw_only=True)
class GroupCommit:
    batch: Batch
    turn: Turn
    publish: Callable[[list[CommitEvent]], None]
    _lanes: dict[bool, _Lane] = field(default_factory=lambda: {False: _Lane(), True: _Lane()})

    async def write(self, work: Any, *, priority: bool) -> Any:
        """``work``'s result once the transaction holding it is committed; its exception when it
        raised (rolled back alone) or when the whole transaction failed (nothing of it committed)."""
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.add_done_callback(_retrieved)
        lane = self._lanes[priority]
        lane.waiting.append((work, done))
        if lane.writing is None:
            # in the foreground: it holds the write lock, and writes everyone's work
            lane.writing = asyncio.create_task(self._write_waiting(lane, priority),
                                               name="pizzamail-store-commit", context=foreground_context())
        return await to_the_end(done)

    async def _write_waiting(self, lane: _Lane, priority: bool) -> None:
        batch: list[tuple[Any, asyncio.Future[Any]]] = []
        try:
            while lane.waiting:
                async with self.turn(priority):
                    # taken once the lock is ours: whatever came while we waited shares this commit
                    batch, lane.waiting = lane.waiting, []
                    try:
                        outcomes, events = await to_the_end(self.batch([work for work, _ in batch]))
                    except Exception as failed:  # the whole transaction: no work of it committed
                        outcomes, events = [(False, failed)] * len(batch), []
                for (_, done), (ok, value) in zip(batch, outcomes, strict=True):
                    if ok:
                        done.set_result(value)
                    else:
                        done.set_exception(value)
                batch = []
                # before any caller resumes (they were only scheduled), and never in their way
                try:
                    self.publish(events)
                except Exception:
                    log.exception("a subscriber to the store's commit events failed")
        finally:
            lane.writing = None
            for _, done in [*batch, *lane.waiting]:
                if not done.done():  # only the unanswered: the store closed under them
                    done.cancel()
            lane.waiting = []


async def to_the_end(step: Awaitable[T]) -> T:
    """Await ``step`` to its end even when cancelled meanwhile (a commit under way is never cut off,
    a work in a batch is written anyway); the cancellation is raised after."""
    future = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise


def _retrieved(done: asyncio.Future[Any]) -> None:
    """An answer whose caller was cancelled meanwhile is nobody's to read: not an unread error."""
    if not done.cancelled():
        done.exception()
