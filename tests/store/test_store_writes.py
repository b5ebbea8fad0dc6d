"""The write lock's priority and work run at once (:meth:`Store.write_at_once`), on both engines."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from pizzamail.store import Store, Tx, Work, WriteLock, savepoint
from pizzamail.store.events import CommitEvent, RunQueued, record
from pizzamail.store.threads import create_thread


async def test_a_priority_write_goes_before_the_ordinary_ones_queued(store: Store) -> None:
    order: list[str] = []

    async def write(name: str, *, priority: bool = False) -> None:
        async with store.write(priority=priority) as db:
            await create_thread(db, subject=name, agent="bot@x")
            order.append(name)

    async with store.write():  # a write in progress, with the runner's queued behind it
        queued = [asyncio.create_task(write(f"runner {n}")) for n in range(3)]
        await asyncio.sleep(0)  # each runs up to its wait for the lock
        intake = asyncio.create_task(write("intake", priority=True))
        await asyncio.sleep(0)
        assert (store._lock.waiting(priority=False), store._lock.waiting(priority=True)) == (3, 1)
    await asyncio.gather(*queued, intake)
    assert order == ["intake", "runner 0", "runner 1", "runner 2"]


async def test_the_lock_passes_on_a_turn_whose_waiter_was_cancelled() -> None:
    lock, order = WriteLock(), []

    async def take(name: str, priority: bool) -> None:
        async with lock.held(priority=priority):
            order.append(name)

    async with lock.held():
        gone = asyncio.create_task(take("gone", True))
        kept = asyncio.create_task(take("kept", False))
        await asyncio.sleep(0)
        gone.cancel()
    await asyncio.gather(kept, gone, return_exceptions=True)
    assert order == ["kept"]
    async with lock.held():  # free again
        pass


async def test_a_waiter_cancelled_as_the_lock_is_released_ends_cancelled() -> None:
    # release() passes over the cancelled turn and takes it out of the queue before its waiter
    # runs: the waiter must still end with its cancellation (not an error of its own)
    lock = WriteLock()

    async def take() -> None:
        async with lock.held(priority=True):
            pass

    async with lock.held():
        gone = asyncio.create_task(take())
        await asyncio.sleep(0)
        gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert lock.waiting(priority=True) == 0
    async with lock.held():  # free again
        pass


async def test_work_at_once_commits_and_publishes_its_events(store: Store) -> None:
    seen: list[CommitEvent] = []
    store.events.subscribe(RunQueued, seen.append)

    async def work(db: Tx) -> int:
        thread = await create_thread(db, subject="at once", agent="bot@x")
        record(db, RunQueued(run=0, thread=thread))
        return thread

    thread = await store.write_at_once(work, priority=True)
    assert [r[0] for r in await store.fetchall("SELECT subject FROM threads")] == ["at once"]
    assert seen == [RunQueued(run=0, thread=thread)]


async def test_work_at_once_that_raises_leaves_nothing(store: Store) -> None:
    seen: list[CommitEvent] = []
    store.events.subscribe(RunQueued, seen.append)

    async def work(db: Tx) -> None:
        record(db, RunQueued(run=0, thread=await create_thread(db, subject="lost", agent="bot@x")))
        raise ValueError("no")

    with pytest.raises(ValueError):
        await store.write_at_once(work)
    assert await store.fetchall("SELECT * FROM threads") == [] and seen == []


async def test_a_failed_savepoint_drops_its_rows_and_events_only(store: Store) -> None:
    seen: list[CommitEvent] = []
    store.events.subscribe(RunQueued, seen.append)

    async def part(db: Tx, subject: str, fail: bool) -> None:
        async with savepoint(db):
            record(db, RunQueued(run=0, thread=await create_thread(db, subject=subject, agent="bot@x")))
            if fail:
                raise ValueError(subject)

    async def work(db: Tx) -> None:
        for subject, fail in [("kept", False), ("dropped", True), ("kept too", False)]:
            with contextlib.suppress(ValueError):
                await part(db, subject, fail)

    await store.write_at_once(work)
    rows = await store.fetchall("SELECT id, subject FROM threads ORDER BY id")
    assert [r[1] for r in rows] == ["kept", "kept too"]
    assert seen == [RunQueued(run=0, thread=r[0]) for r in rows]


@pytest.mark.parametrize("store_backend", ["sqlite"])  # PostgreSQL's work runs on the event loop
async def test_work_at_once_that_really_awaits_is_refused_and_rolled_back(store: Store) -> None:
    async def work(db: Tx) -> None:
        await create_thread(db, subject="half", agent="bot@x")
        await asyncio.sleep(0)  # not a statement: it would need the event loop, on another thread

    with pytest.raises(RuntimeError, match="besides its statements"):
        await store.write_at_once(work)
    assert await store.fetchall("SELECT * FROM threads") == []
    async with store.write() as db:  # the writer is usable: no transaction was left open
        await create_thread(db, subject="whole", agent="bot@x")


async def test_works_at_once_arriving_together_share_one_commit_and_each_fails_alone(store: Store) -> None:
    commits: list[list[CommitEvent]] = []
    publish = store.events.publish
    store.events.publish = lambda events: (commits.append(list(events)), publish(events))[1]  # type: ignore[method-assign]

    def work(subject: str) -> Work[int]:
        async def create(db: Tx) -> int:
            thread = await create_thread(db, subject=subject, agent="bot@x")
            record(db, RunQueued(run=0, thread=thread))
            if subject == "broken":
                raise ValueError(subject)  # after its row and its event
            return thread

        return create

    answers = await asyncio.gather(*(store.write_at_once(work(s)) for s in ["one", "broken", "two"]),
                                   return_exceptions=True)
    assert [type(a) for a in answers] == [int, ValueError, int]
    rows = await store.fetchall("SELECT id, subject FROM threads ORDER BY id")
    assert [(r[0], r[1]) for r in rows] == [(answers[0], "one"), (answers[2], "two")]
    assert commits == [[RunQueued(run=0, thread=answers[0]), RunQueued(run=0, thread=answers[2])]]


@pytest.mark.parametrize("store_backend", ["sqlite"])  # SQLite's one writer connection
async def test_a_write_cancelled_during_its_begin_leaves_no_transaction_open(store: Store) -> None:
    async def body() -> None:
        async with store.write() as db:
            await create_thread(db, subject="never", agent="bot@x")

    for _ in range(20):  # the BEGIN is on its way to the writer's thread when the cancel comes
        cancelled = asyncio.create_task(body())
        await asyncio.sleep(0)
        cancelled.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cancelled
        thread = await store.write_at_once(lambda db: create_thread(db, subject="next", agent="bot@x"))
        assert thread > 0
    assert [r[0] for r in await store.fetchall("SELECT DISTINCT subject FROM threads")] == ["next"]
