"""Runners sharing one queue: a worker that stops renewing its leases (killed, lost) has its runs
taken over, it cannot write for them any more, and a live worker's heartbeat keeps a long run its own."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import Any

import pytest

from pizzamail.config import RunnerSettings, StoreSettings
from pizzamail.runner import Runner, pool
from pizzamail.store import Store
from pizzamail.store.events import RunChanged, StopRequested
from pizzamail.store.leases import claim_next, claim_runs, reclaim_expired
from pizzamail.store.runs import Run, ask_stop, get_run, steps_of
from pizzamail.store.threads import thread_messages
from tests.fakes.openai_server import FakeOpenAI, gated, text
from tests.runner.conftest import TIMEOUT, Harness, bot_mails

LEASE = 1.5  # seconds: a beat every 0.5 s; a beat may come a second late before the lease runs out


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    held = threading.Event()
    yield held
    held.set()


@pytest.fixture
def leased(harness: Harness) -> Harness:
    """Short leases, one run at a time per runner."""
    return harness.with_config(store=StoreSettings(lease_seconds=LEASE),
                               runner=RunnerSettings(concurrency=1))


async def killed(runner: Runner) -> None:
    """The runner stops renewing its leases, as a killed process would; it is left working."""
    heartbeat = runner._heartbeat
    assert heartbeat is not None
    await heartbeat.__aexit__(None, None, None)


async def replies(harness: Harness, run_id: int) -> list[str]:
    thread = (await get_run(harness.store, run_id)).thread_id
    return [m.kind for m in await thread_messages(harness.store, thread) if m.kind in ("reply", "error")]


async def step_texts(harness: Harness, run_id: int) -> list[str]:
    return [str(s.data.get("text")) for s in await steps_of(harness.store, run_id)]


async def test_a_run_whose_worker_stopped_renewing_is_taken_over_and_replied_to_once(
    leased: Harness, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    b_gate = threading.Event()
    fake_openai.script([gated(text("A's late answer"), gate), gated(text("B's answer"), b_gate)])
    sqlite = leased.store.dialect == "sqlite"
    async with leased.store.twin() as elsewhere, AsyncExitStack() as stack:
        other = replace(leased, store=elsewhere)  # B: another process on the same database
        if sqlite:  # a runner's start there takes every running run back: B starts before A claims
            b = await stack.enter_async_context(other.running(poll_interval=3600))
        a = await stack.enter_async_context(leased.running())
        run_id = await leased.task("Plan it")
        await asyncio.to_thread(fake_openai.wait_requests, 1, TIMEOUT)  # A works on it
        await killed(a)
        if not sqlite:
            b = await stack.enter_async_context(other.running(poll_interval=3600))
            assert (await get_run(leased.store, run_id)).lease_owner == a.worker  # A's lease still runs
        try:  # once A's lease ran out, B takes the run over and asks the model again
            await asyncio.to_thread(fake_openai.wait_requests, 2, TIMEOUT)
            gate.set()  # A wakes up while B works, and tries to checkpoint its answer
            assert await asyncio.wait_for(a.wait_for(run_id), TIMEOUT) == "lost"
        finally:
            b_gate.set()
        assert await asyncio.wait_for(b.wait_for(run_id), TIMEOUT) == "done"
    run = await get_run(leased.store, run_id)
    assert (run.status, run.attempts, run.crashes) == ("done", 1, 0)  # the kill used up no attempt
    assert await step_texts(leased, run_id) == ["B's answer"]  # A's step was refused
    assert await replies(leased, run_id) == ["reply"]
    assert len(await bot_mails(leased.mailbox)) == 1


async def test_a_runner_that_lost_its_lease_cannot_checkpoint_and_the_run_is_done_once(
    leased: Harness, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    fake_openai.script([gated(text("stale answer"), gate), text("fresh answer")])
    done = asyncio.Event()
    leased.store.events.subscribe(RunChanged, lambda e: done.set() if e.status == "done" else None)
    async with leased.running() as runner:
        run_id = await leased.task("Plan it")
        await asyncio.to_thread(fake_openai.wait_requests, 1, TIMEOUT)
        await killed(runner)
        assert await reclaim_expired(leased.store, at=time.time() + 3600) == [run_id]  # another's beat
        lost = asyncio.ensure_future(runner.wait_for(run_id))
        gate.set()
        assert await asyncio.wait_for(lost, TIMEOUT) == "lost"
        assert "stale answer" not in await step_texts(leased, run_id)
        await asyncio.wait_for(done.wait(), TIMEOUT)  # requeued, so taken again (here: by itself)
    assert await step_texts(leased, run_id) == ["fresh answer"]
    assert await replies(leased, run_id) == ["reply"]


async def test_a_runner_drops_a_run_taken_over_while_it_waits_on_the_model(
    leased: Harness, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    fake_openai.script([gated(text("never used"), gate)])
    async with leased.running() as runner:
        run_id = await leased.task("Plan it")
        await asyncio.to_thread(fake_openai.wait_requests, 1, TIMEOUT)
        await reclaim_expired(leased.store, at=time.time() + 3600)  # as if its lease ran out
        taken = await claim_next(leased.store, exclude_threads=set(), worker="elsewhere")
        assert taken is not None and taken.id == run_id
        # its next beat finds the run is another's: the model call is cancelled, no gate needed
        assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "lost"
    run = await get_run(leased.store, run_id)
    assert (run.status, run.lease_owner) == ("running", "elsewhere")  # left alone by stop() too
    assert await steps_of(leased.store, run_id) == [] and await replies(leased, run_id) == []


async def test_the_heartbeat_keeps_a_long_run_its_own_past_the_lease(
    leased: Harness, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    fake_openai.script([gated(text("slow but mine"), gate)])
    async with leased.running() as runner:
        run_id = await leased.task("Plan it")
        await asyncio.to_thread(fake_openai.wait_requests, 1, TIMEOUT)
        first = (await get_run(leased.store, run_id)).lease_until
        assert first is not None
        await asyncio.sleep(first + 1 - time.time())  # the first lease is over: up for grabs unrenewed
        async with leased.store.twin() as elsewhere:
            assert await reclaim_expired(elsewhere) == []  # another worker's beat leaves it alone
        run = await get_run(leased.store, run_id)
        assert (run.status, run.lease_owner) == ("running", runner.worker)
        gate.set()
        assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "done"
    assert await replies(leased, run_id) == ["reply"]


@pytest.mark.parametrize("store_backend", ["postgresql"])
async def test_a_run_queued_by_another_process_wakes_an_idle_runner_without_polling(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("first"), text("heard you")])
    first = await harness.task("first", subject="A")
    async with harness.running(poll_interval=3600) as runner, harness.store.twin() as elsewhere:
        assert await asyncio.wait_for(runner.wait_for(first), TIMEOUT) == "done"  # the start's own look
        second = await replace(harness, store=elsewhere).task("queued elsewhere", subject="B")
        assert await asyncio.wait_for(runner.wait_for(second), TIMEOUT) == "done"  # RunQueued by NOTIFY


async def test_a_stop_heard_between_the_claim_and_the_start_of_the_run_is_not_missed(
    harness: Harness, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_openai.script([text("should not be asked")])
    heard = asyncio.Event()
    harness.store.events.subscribe(StopRequested, lambda _: heard.set())
    async with harness.store.twin() as elsewhere:
        # PostgreSQL: another process asks, its StopRequested comes by NOTIFY; SQLite: this one asks
        asker = elsewhere if harness.store.dialect == "postgresql" else harness.store

        async def claim_then_stop(store: Store, **options: Any) -> list[Run]:
            runs = await claim_runs(store, **options)
            if runs:  # committed, not yet working here: halt() does not know the run
                async with asker.write() as db:
                    await ask_stop(db, runs[0].thread_id, by="cli")
                await asyncio.wait_for(heard.wait(), TIMEOUT)
            return runs

        monkeypatch.setattr(pool, "claim_runs", claim_then_stop)
        run_id = await harness.task("Plan it")
        async with harness.running() as runner:
            assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "stopped"
    assert fake_openai.requests == []
