"""Leases: claims side by side (each run exactly once), renewals, reclaiming a dead worker's runs,
and the fence that keeps a worker that lost a run from writing for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator, Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest

from pizzamail.errors import LeaseLost
from pizzamail.store import Store, Tx
from pizzamail.store.events import CommitEvent, RunChanged, RunQueued
from pizzamail.store.leases import claim_next, claim_runs, leases_lost, reclaim_expired, renew_leases
from pizzamail.store.runs import (
    Run,
    add_step,
    create_run,
    finish_run,
    get_run,
    request_stop,
    steps_of,
    working_as,
)
from pizzamail.store.threads import NewMessage, add_message, create_thread

TIMEOUT = 10.0


async def queue_runs(store: Store, count: int) -> list[int]:
    """``count`` queued runs, each in a thread of its own, in one transaction."""
    runs = []
    async with store.write() as db:
        for n in range(count):
            thread = await create_thread(db, subject=f"task {n}", agent="bot@pizzamail.localhost")
            row = await add_message(db, thread, NewMessage(
                message_id=f"task-{n}@test", in_reply_to=None, refs=[], direction="in", kind="task",
                sender="me@pizzamail.localhost", subject=f"task {n}", body="", blob="0" * 64, size=0))
            runs.append(await create_run(db, thread, row))
    return runs


async def claim_until_empty(store: Store, worker: str, burst: int) -> list[int]:
    """Claim ``burst`` runs at a time until the queue is empty, as a runner's dispatcher does (one at
    a time when idle, a burst when busy)."""
    claimed = []
    while runs := await claim_runs(store, limit=burst, exclude_threads=set(), busy=burst > 1, worker=worker):
        assert len(runs) <= burst and all(run.lease_owner == worker for run in runs)
        claimed.extend(run.id for run in runs)
    return claimed


@pytest.mark.parametrize("burst", [1, 7])
async def test_four_stores_claiming_at_once_take_each_of_200_runs_exactly_once(
    store: Store, burst: int
) -> None:
    runs = await queue_runs(store, 200)
    async with AsyncExitStack() as stack:
        stores = [store, *[await stack.enter_async_context(store.twin()) for _ in range(3)]]
        claimers = [claim_until_empty(s, f"worker-{n}", burst)
                    for n, s in enumerate(stores) for _ in range(2)]  # two claimers a store
        claims = await asyncio.wait_for(asyncio.gather(*claimers), 60)
    taken = [run for claimed in claims for run in claimed]
    assert sorted(taken) == runs  # every run once: none twice, none missed
    rows = await store.fetchall("SELECT status, attempts, lease_owner FROM runs")
    assert {(r["status"], r["attempts"]) for r in rows} == {("running", 1)}
    owners = {str(r["lease_owner"]) for r in rows}
    assert owners <= {f"worker-{n}" for n in range(4)}


@pytest.mark.parametrize("store_backend", ["postgresql"])
async def test_a_claim_goes_on_while_another_process_holds_the_write_lock(store: Store) -> None:
    [first, second] = await queue_runs(store, 2)
    async with store.twin() as other, other.write() as db:  # serialised: holds the write lock
        # and holds the oldest queued run's row, as a claim in flight does
        await db.execute("SELECT id FROM runs WHERE id = ? FOR UPDATE", (first,))
        run = await asyncio.wait_for(claim_next(store, exclude_threads=set(), worker="w"), TIMEOUT)
    assert run is not None and run.id == second  # the locked row skipped, not waited for


async def test_a_claim_keeps_thread_order_and_leaves_excluded_threads_alone(store: Store) -> None:
    [first, other] = await queue_runs(store, 2)
    async with store.write() as db:  # a follow-up queued behind the first run, in its thread
        follow_up = await create_run(db, (await get_run(store, first)).thread_id, None)
    taken = await claim_next(store, exclude_threads={(await get_run(store, other)).thread_id}, worker="w")
    assert taken is not None and taken.id == first
    assert await claim_next(store, exclude_threads=set(), worker="w") is not None  # `other`
    assert await claim_next(store, exclude_threads=set(), worker="w") is None  # not `follow_up` yet
    assert (await get_run(store, follow_up)).status == "queued"


async def test_a_burst_takes_one_run_per_thread_oldest_first_and_marks_their_threads(store: Store) -> None:
    [first, other, third] = await queue_runs(store, 3)
    async with store.write() as db:
        follow_up = await create_run(db, (await get_run(store, first)).thread_id, None)
    excluded = (await get_run(store, third)).thread_id
    taken = await claim_runs(store, limit=10, exclude_threads={excluded}, busy=True, worker="w")
    assert [run.id for run in taken] == [first, other]  # not `follow_up` (its thread is busy), not `third`
    assert (await get_run(store, follow_up)).status == "queued"
    threads = await store.fetchall("SELECT status FROM threads WHERE id IN (?, ?)",
                                   [run.thread_id for run in taken])
    assert [row["status"] for row in threads] == ["working", "working"]
    assert await claim_runs(store, limit=10, exclude_threads={excluded}, busy=True, worker="w") == []


async def test_an_expired_lease_is_requeued_without_using_up_an_attempt(store: Store) -> None:
    [run_id] = await queue_runs(store, 1)
    run = await claim_next(store, exclude_threads=set(), worker="dead", lease_seconds=30)
    assert run is not None and run.lease_until is not None
    seen: list[CommitEvent] = []
    store.events.subscribe(RunQueued, seen.append)
    assert await reclaim_expired(store, at=run.lease_until) == []  # not over yet
    assert await reclaim_expired(store, at=run.lease_until + 1) == [run_id]
    requeued = await get_run(store, run_id)
    assert (requeued.status, requeued.attempts, requeued.crashes) == ("queued", 0, 1)
    assert requeued.lease_owner is None
    assert [e.run for e in seen if isinstance(e, RunQueued)] == [run_id]  # live runners wake at once
    taken = await claim_next(store, exclude_threads=set(), worker="alive")
    assert taken is not None and (taken.id, taken.attempts, taken.lease_owner) == (run_id, 1, "alive")


async def test_a_renewed_lease_is_not_reclaimed(store: Store) -> None:
    await queue_runs(store, 3)
    mine = await claim_next(store, exclude_threads=set(), worker="me", lease_seconds=30)
    theirs = await claim_next(store, exclude_threads=set(), worker="them", lease_seconds=30)
    given_up = await claim_next(store, exclude_threads=set(), worker="me", lease_seconds=30)
    assert mine is not None and theirs is not None and given_up is not None and mine.lease_until is not None
    await renew_leases(store, "me", 600, [mine.id])  # the one it works on, not one it gave up on
    renewed = await get_run(store, mine.id)
    assert renewed.lease_until is not None and renewed.lease_until >= int(time.time()) + 599
    assert (await get_run(store, theirs.id)).lease_until == theirs.lease_until  # only its own
    assert (await get_run(store, given_up.id)).lease_until == given_up.lease_until
    # a moment after the leases not renewed ran out (the claims may straddle a second)
    assert theirs.lease_until is not None and given_up.lease_until is not None
    after = max(theirs.lease_until, given_up.lease_until) + 1
    assert await reclaim_expired(store, at=after) == [theirs.id, given_up.id]


async def test_a_worker_that_lost_its_run_can_neither_checkpoint_nor_finish_it(store: Store) -> None:
    [run_id] = await queue_runs(store, 1)
    lost = await claim_next(store, exclude_threads=set(), worker="slow", lease_seconds=30)
    assert lost is not None and lost.lease_until is not None
    await reclaim_expired(store, at=lost.lease_until + 1)
    assert await leases_lost(store, "slow", [run_id]) == [run_id]  # requeued: no longer its
    taken = await claim_next(store, exclude_threads=set(), worker="fast")
    assert taken is not None and await leases_lost(store, "fast", [run_id]) == []
    changes: list[CommitEvent] = []
    store.events.subscribe(RunChanged, changes.append)
    with working_as("slow"):
        with pytest.raises(LeaseLost):
            async with store.write() as db:
                await add_step(db, run_id, 0, "model", {"text": "slow's step"})
        with pytest.raises(LeaseLost):
            async with store.write() as db:
                await finish_run(db, lost, status="done")
    assert await steps_of(store, run_id) == [] and changes == []  # rolled back: nothing happened
    assert (await get_run(store, run_id)).status == "running"
    with working_as("fast"):
        async with store.write() as db:
            await add_step(db, run_id, 0, "model", {"text": "fast's step"})
            await finish_run(db, taken, status="done")
    assert [s.data for s in await steps_of(store, run_id)] == [{"text": "fast's step"}]
    assert (await get_run(store, run_id)).status == "done"


@dataclass(eq=False)
class ClaimBefore:
    """An open transaction whose statement matching ``marker`` waits, before it runs, for a claim
    by another process: what a claim committing between two statements of a writer does."""

    db: Tx
    marker: str
    claim: Callable[[], Awaitable[Run | None]]
    claimed: list[Run | None] = field(default_factory=list)

    def execute(self, sql: str, parameters: Iterable[Any] | None = None, /) -> Any:
        return _After(self._claim(sql), lambda: self.db.execute(sql, parameters))

    async def _claim(self, sql: str) -> None:
        if self.marker in sql and not self.claimed:
            self.claimed.append(await asyncio.wait_for(self.claim(), TIMEOUT))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


@dataclass
class _After:
    first: Awaitable[None]
    statement: Callable[[], Any]

    def __await__(self) -> Generator[Any, None, Any]:
        return self._run().__await__()

    async def _run(self) -> Any:
        await self.first
        return await self.statement()

    async def __aenter__(self) -> Any:
        return await self._run()

    async def __aexit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("store_backend", ["postgresql"])
async def test_a_stop_ends_a_follow_up_that_a_claim_tried_to_start_meanwhile(store: Store) -> None:
    [waiting] = await queue_runs(store, 1)
    thread = (await get_run(store, waiting)).thread_id
    async with store.write() as db:  # the thread's run waits for a decision; a follow-up is queued
        await db.execute("UPDATE runs SET status = 'waiting' WHERE id = ?", (waiting,))
        follow_up = await create_run(db, thread, None)
    async with store.twin() as other, store.write() as db:
        between = ClaimBefore(db=db, marker="stopped before it started",
                              claim=lambda: claim_next(other, exclude_threads=set(), worker="w"))
        await request_stop(between, thread, by="cli")
    assert between.claimed == [None]  # the follow-up's row was locked: the claim skipped it
    assert (await get_run(store, follow_up)).status == "stopped"


async def test_a_thread_is_worked_on_by_one_worker_at_a_time_across_workers(store: Store) -> None:
    """A run put back in the queue (a decision resumes it) while a later run of its thread works on
    another worker waits for that one: each runner knows only its own threads (found in review)."""
    [first] = await queue_runs(store, 1)
    first_run = await get_run(store, first)
    async with store.write() as db:
        await db.execute("UPDATE runs SET status = 'waiting' WHERE id = ?", (first,))  # asks for approval
        follow_up = await create_run(db, first_run.thread_id, None)
    taken = await claim_next(store, exclude_threads=set(), worker="a", lease_seconds=30)
    assert taken is not None and taken.id == follow_up
    async with store.write() as db:
        await db.execute("UPDATE runs SET status = 'queued' WHERE id = ?", (first,))  # approved
    assert await claim_next(store, exclude_threads=set(), worker="b", lease_seconds=30) is None
    async with store.write() as db:
        await finish_run(db, taken, status="done")
    again = await claim_next(store, exclude_threads=set(), worker="b", lease_seconds=30)
    assert again is not None and again.id == first
