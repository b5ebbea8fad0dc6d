"""Commit events: what a write transaction changed, told to the rest of the service once committed.

A store function that writes records a typed event into the open transaction (:func:`record`);
:meth:`pizzamail.store.Store.write` hands the transaction's events to :meth:`Events.publish` after
the commit, and drops them with a rollback. So a subscriber that reads the store finds the row.

Subscribers are plain callbacks that only take note (set an ``asyncio.Event``, put into a queue):
they run on the writer's path, so one that raises is logged and skipped, never the writer's
failure. Slow work follows events through :class:`Follow`. With SQLite, events of another process
(``pizzamail task``) are not seen here, and the parts that care also look now and then; with
PostgreSQL, every commit's events travel as a NOTIFY (:func:`encode`) and each store publishes the
other processes' ones here too (:func:`decode`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

log = logging.getLogger("pizzamail.store")


@dataclass(frozen=True, kw_only=True)
class CommitEvent:
    """A change some committed transaction made."""


@dataclass(frozen=True, kw_only=True)
class MessageAdded(CommitEvent):
    message: int
    """the ``messages`` row"""
    thread: int
    folder: str
    direction: str
    kind: str


@dataclass(frozen=True, kw_only=True)
class RunQueued(CommitEvent):
    """A new run, or one back in the queue (a decision resumes a waiting run)."""

    run: int
    thread: int


@dataclass(frozen=True, kw_only=True)
class StopRequested(CommitEvent):
    """Someone asked a working run to stop (by reply, or ``pizzamail stop``)."""

    run: int
    thread: int


@dataclass(frozen=True, kw_only=True)
class RunChanged(CommitEvent):
    """A run's state moved: queued, claimed (``running``), a step checkpointed, finished or put
    waiting. Recorded by every store function that changes a run, whoever calls it."""

    run: int
    thread: int
    status: str
    """the run's status after the change (``queued``, ``running``, ``waiting``, ``done`` …)"""


@dataclass(frozen=True, kw_only=True)
class Resync(CommitEvent):
    """Other processes' events may have been missed (PostgreSQL's LISTEN connection was lost and is
    back): the parts that follow events look at the store once, as after a start."""


@dataclass(frozen=True, kw_only=True)
class ScheduleChanged(CommitEvent):
    name: str


@dataclass(frozen=True, kw_only=True)
class ActionDecided(CommitEvent):
    """A held action left ``pending`` by a decision."""

    action: int
    run: int
    status: str


E = TypeVar("E", bound=CommitEvent)


def _kinds() -> dict[str, type[CommitEvent]]:
    found: dict[str, type[CommitEvent]] = {}
    pending = [CommitEvent]
    while pending:
        for kind in pending.pop().__subclasses__():
            found[kind.__name__] = kind
            pending.append(kind)
    return found


def encode(events: Iterable[CommitEvent], *, origin: str, limit: int) -> list[str]:
    """Events as JSON payloads of at most ``limit`` bytes (at least one, even for no events), each
    marked with the ``origin`` store. Events hold ids and names only, so each is small."""
    payloads: list[str] = []
    batch: list[list[Any]] = []

    def text(items: list[list[Any]]) -> str:
        return json.dumps({"o": origin, "e": items}, separators=(",", ":"))

    for event in events:
        item = [type(event).__name__, asdict(event)]
        if batch and len(text([*batch, item]).encode()) > limit:
            payloads.append(text(batch))
            batch = []
        batch.append(item)
    payloads.append(text(batch))
    return payloads


def decode(payload: str) -> tuple[str, list[CommitEvent]]:
    """The origin and events of one :func:`encode` payload; ValueError for anything else."""
    try:
        data = json.loads(payload)
        kinds = _kinds()
        return str(data["o"]), [kinds[name](**fields) for name, fields in data["e"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a pizzamail notification: {exc}") from exc

#: the events of each open write transaction, by its connection (one writer, one transaction at a time)
_open: WeakKeyDictionary[Any, list[CommitEvent]] = WeakKeyDictionary()


def record(db: object, event: CommitEvent) -> None:
    """Note ``event`` in ``db``'s open transaction: published after its commit, dropped with a
    rollback. Outside a :meth:`Store.write` transaction (a migration) nobody is listening."""
    pending = _open.get(db)
    if pending is not None:
        pending.append(event)


@contextmanager
def dropped_on_error(db: object) -> Iterator[None]:
    """Events recorded in a part of ``db``'s transaction that fails (rolled back to a savepoint
    while the transaction goes on) are dropped with that part."""
    pending = _open.get(db)
    mark = len(pending) if pending is not None else 0
    try:
        yield
    except BaseException:
        if pending is not None:
            del pending[mark:]
        raise


@contextmanager
def collecting(db: object) -> Iterator[list[CommitEvent]]:
    """The list that gathers the events of ``db``'s transaction while it is open."""
    pending: list[CommitEvent] = []
    _open[db] = pending
    try:
        yield pending
    finally:
        del _open[db]


@dataclass
class Events:
    """The subscribers of one store's commit events."""

    _subscribers: defaultdict[type[CommitEvent], list[Callable[[Any], None]]] = field(
        default_factory=lambda: defaultdict(list))
    _relays: list[Callable[[list[CommitEvent]], None]] = field(default_factory=list)

    def subscribe(self, kind: type[E], callback: Callable[[E], None]) -> Callable[[], None]:
        """Call ``callback`` with each committed event of ``kind``; returns the unsubscribe."""
        self._subscribers[kind].append(callback)
        return lambda: self._subscribers[kind].remove(callback)

    def relay(self, callback: Callable[[list[CommitEvent]], None]) -> Callable[[], None]:
        """Call ``callback`` with the events of each commit made here (not those heard from other
        processes), to pass them on to other processes; returns the unsubscribe."""
        self._relays.append(callback)
        return lambda: self._relays.remove(callback)

    def publish(self, events: Iterable[CommitEvent], *, heard: bool = False) -> None:
        """Tell the subscribers; ``heard``: the events of another process's commit, which relays
        do not pass on again."""
        if self._relays and not heard:
            batch = list(events)
            for relay in list(self._relays):
                try:
                    relay(batch)
                except Exception:
                    log.exception("a relay of commit events failed")
            events = batch
        for event in events:
            for callback in list(self._subscribers.get(type(event), ())):
                try:
                    callback(event)
                except Exception:  # a subscriber's bug must not fail a write that is committed
                    log.exception("a subscriber to %s failed", type(event).__name__)


@dataclass(kw_only=True)
class Follow:
    """A long-lived part (``async with``) that runs ``work`` after commits of ``kinds``: once for a
    burst of them, never twice at once. Leaving it finishes the work events already asked for."""

    events: Events
    kinds: tuple[type[CommitEvent], ...]
    work: Callable[[], Awaitable[object]]
    name: str
    """said in the log when the work fails"""
    only: Callable[[Any], bool] | None = None
    """which events of ``kinds`` ask for the work (default: every one)"""
    _kick: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _leaving: bool = field(default=False, init=False)
    _busy: bool = field(default=False, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _unsubscribe: list[Callable[[], None]] = field(default_factory=list, init=False)

    async def __aenter__(self) -> Follow:
        self._unsubscribe = [self.events.subscribe(kind, self._kicked) for kind in self.kinds]
        self._task = asyncio.create_task(self._loop(), name=f"pizzamail-{self.name}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Work for events already published is done first; an idle loop just ends."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        if self._task is None:
            return
        self._leaving = True
        if not self._busy and not self._kick.is_set():
            self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def _kicked(self, event: CommitEvent) -> None:
        if self.only is None or self.only(event):
            self._kick.set()

    async def _loop(self) -> None:
        while not (self._leaving and not self._kick.is_set()):
            await self._kick.wait()
            self._kick.clear()
            self._busy = True
            try:
                await self.work()
            except Exception:  # tried again at the next event; what it left undone stays in the store
                log.exception("%s failed", self.name)
            finally:
                self._busy = False
