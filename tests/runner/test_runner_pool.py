"""The worker pool: resuming from checkpoints, attempts, concurrency, polling and a clean stop."""

from __future__ import annotations

import asyncio
import ssl
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from pizzamail.composer import Composer
from pizzamail.config import RunnerSettings
from pizzamail.mailbox.filing import Filer
from pizzamail.providers import Response, ToolCall
from pizzamail.providers.http import new_client, tls_context
from pizzamail.runner import models, pool
from pizzamail.store.leases import claim_next, claim_runs
from pizzamail.store.runs import add_step, requeue_interrupted, steps_of
from pizzamail.store.threads import thread_messages
from tests.fakes.openai_server import FakeOpenAI, gated, text
from tests.runner.conftest import TIMEOUT, Harness, bot_mails, plain

LOOKUP = Response(tool_calls=[ToolCall(id="call_9", name="lookup", arguments={"q": "x"},
                                       raw_arguments='{"q":"x"}')], model="gpt-4.1-mini",
                  finish_reason="tool_calls")


async def crashed_run(harness: Harness, steps: list[tuple[str, dict[str, Any]]]) -> int:
    """A run left ``running`` by a crash after checkpointing ``steps``."""
    run_id = await harness.task("Look up x")
    run = await claim_next(harness.store, exclude_threads=set())
    assert run is not None and run.id == run_id
    async with harness.store.write() as db:
        for seq, (kind, data) in enumerate(steps):
            await add_step(db, run_id, seq, kind, data)
    return run_id


async def test_a_resumed_run_replays_its_steps_instead_of_calling_the_model_again(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    tool_result = {"call_id": "call_9", "name": "lookup", "text": "x is 42", "is_error": False}
    run_id = await crashed_run(harness, [("model", LOOKUP.to_data()), ("tool", tool_result)])
    fake_openai.script([text("x is 42.")])
    async with harness.running() as runner:  # start() puts the interrupted run back in the queue
        assert await harness.finish(runner, run_id) == "done"
    [request] = fake_openai.requests
    echoed, result = request.messages[-2:]
    assert echoed["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"q":"x"}'}
    assert result == {"role": "tool", "tool_call_id": "call_9", "content": "x is 42"}
    assert [s.kind for s in await steps_of(harness.store, run_id)] == ["model", "tool", "model"]
    assert len(await bot_mails(harness.mailbox)) == 1


async def test_a_run_that_crashed_after_its_final_answer_only_writes_the_reply(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    final = Response(text="The answer, already paid for.", model="gpt-4.1-mini", finish_reason="stop")
    run_id = await crashed_run(harness, [("model", final.to_data())])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert fake_openai.requests == []
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "The answer, already paid for." in plain(mail)
    replies = [m for m in await thread_messages(harness.store, 1) if m.kind == "reply"]
    assert len(replies) == 1


async def test_a_tool_call_without_a_recorded_result_is_answered_on_resume(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    run_id = await crashed_run(harness, [("model", LOOKUP.to_data())])
    fake_openai.script([text("Could not look it up.")])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    [request] = fake_openai.requests
    assert request.messages[-1]["tool_call_id"] == "call_9"
    assert [s.kind for s in await steps_of(harness.store, run_id)] == ["model", "tool", "model"]


async def crashed_again(harness: Harness, run_id: int, steps: list[tuple[str, dict[str, Any]]]) -> None:
    """The next start resumes ``run_id`` (alone: a crash cut it off), which checkpoints ``steps``
    before the process crashes again."""
    await requeue_interrupted(harness.store)
    run = await claim_next(harness.store, exclude_threads=set())
    assert run is not None and run.id == run_id
    done = len(await steps_of(harness.store, run_id))
    async with harness.store.write() as db:
        for seq, (kind, data) in enumerate(steps, start=done):
            await add_step(db, run_id, seq, kind, data)


def lookup(call_id: str) -> list[tuple[str, dict[str, Any]]]:
    """A model step asking for one lookup, and the lookup's result."""
    call = ToolCall(id=call_id, name="lookup", arguments={"q": "x"}, raw_arguments='{"q":"x"}')
    asked = Response(tool_calls=[call], model="gpt-4.1-mini", finish_reason="tool_calls")
    return [("model", asked.to_data()),
            ("tool", {"call_id": call_id, "name": "lookup", "text": "x is 42", "is_error": False})]


async def test_crashes_do_not_use_up_a_run_that_gets_further_each_time(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = harness.with_config(runner=RunnerSettings(max_attempts=3))
    one, two = lookup("call_1"), lookup("call_2")
    run_id = await crashed_run(harness, one[:1])
    for steps in (one[1:], two[:1], two[1:], []):  # four more crashes, the last before any progress
        await crashed_again(harness, run_id, steps)
    fake_openai.script([text("x is 42, twice.")])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert "x is 42, twice." in plain((await bot_mails(harness.mailbox))[0][1])


async def test_a_run_that_keeps_crashing_the_process_alone_gives_up(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = harness.with_config(runner=RunnerSettings(max_attempts=3))
    run_id = await crashed_run(harness, [])
    for _ in range(3):  # each resume crashed before getting further
        await crashed_again(harness, run_id, [])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "failed"
    assert fake_openai.requests == []
    body = plain((await bot_mails(harness.mailbox))[0][1])
    assert "crashed 4 times in a row while working on this task alone" in body and "max_attempts" in body


async def test_runs_a_crash_cut_off_resume_alone_until_they_get_further(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    tasks = {name: await harness.task(name, subject=name) for name in ("first", "second", "third")}
    for name in ("first", "second"):  # the crash cut off both
        assert await claim_next(harness.store, exclude_threads=set(), busy=name == "second")
    await requeue_interrupted(harness.store)
    gates = [threading.Event() for _ in tasks]
    fake_openai.script([gated(text("answered"), gate) for gate in gates])
    async with harness.running() as runner:  # two workers, three queued runs
        for n, gate in enumerate(gates, start=1):
            request = (await asyncio.to_thread(fake_openai.wait_requests, n, TIMEOUT))[n - 1]
            asking = request.messages[-1]["content"]
            rows = await harness.store.fetchall("SELECT id FROM runs WHERE status = 'running'")
            if asking != "third":  # until its answer is checkpointed, nothing runs beside it
                assert [r["id"] for r in rows] == [tasks[asking]]
            gate.set()
        assert [await harness.finish(runner, r) for r in tasks.values()] == ["done"] * 3
    assert fake_openai.requests[0].messages[-1]["content"] == "first"  # the oldest first


async def test_workers_run_in_parallel_up_to_the_concurrency(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    gate = threading.Event()
    fake_openai.script([gated(text("one"), gate), gated(text("two"), gate)])
    first = await harness.task("first", subject="A")
    second = await harness.task("second", subject="B")
    async with harness.running() as runner:
        runner.wake()
        # both requests are in flight at once before either is answered
        await asyncio.to_thread(fake_openai.wait_requests, 2, TIMEOUT)
        gate.set()
        statuses = [await harness.finish(runner, r) for r in (first, second)]
    assert statuses == ["done", "done"]
    assert len(await bot_mails(harness.mailbox)) == 2


async def test_one_worker_takes_runs_one_at_a_time(harness: Harness, fake_openai: FakeOpenAI) -> None:
    harness = harness.with_config(runner=RunnerSettings(concurrency=1))
    gate = threading.Event()
    fake_openai.script([gated(text("one"), gate), text("two")])
    first = await harness.task("first", subject="A")
    second = await harness.task("second", subject="B")
    async with harness.running() as runner:
        await asyncio.to_thread(fake_openai.wait_requests, 1, TIMEOUT)
        row = await harness.store.fetchone("SELECT status FROM runs WHERE id = ?", (second,))
        assert row is not None and row["status"] == "queued"
        gate.set()
        assert [await harness.finish(runner, r) for r in (first, second)] == ["done", "done"]


async def test_runs_queued_by_another_process_are_found_by_polling(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("found you")])
    async with harness.running(poll_interval=0.05) as runner:
        # its own connections, like `pizzamail task`: no commit event reaches this runner
        async with harness.store.twin() as elsewhere:
            run_id = await replace(harness, store=elsewhere).task("queued elsewhere")
        assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "done"


async def test_a_run_queued_in_this_process_wakes_an_idle_worker_without_polling(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("first"), text("second")])
    first = await harness.task("first", subject="A")
    async with harness.running(poll_interval=3600) as runner:
        assert await asyncio.wait_for(runner.wait_for(first), TIMEOUT) == "done"  # the start's own look
        second = await harness.task("second", subject="B")  # nobody calls wake(): RunQueued does
        assert await asyncio.wait_for(runner.wait_for(second), TIMEOUT) == "done"


async def test_stop_leaves_nothing_running_and_the_run_resumes_later(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    gate = threading.Event()
    fake_openai.script([gated(text("never delivered"), gate)])
    run_id = await harness.task("Long task")
    runner = harness.runner()
    before = asyncio.all_tasks()  # the store's own (PostgreSQL's pool and LISTEN) are not the runner's
    await runner.start()
    await asyncio.to_thread(fake_openai.wait_requests, 1, TIMEOUT)
    await runner.stop()
    gate.set()
    assert not runner.running
    assert asyncio.all_tasks() == before
    row = await harness.store.fetchone("SELECT status, attempts FROM runs WHERE id = ?", (run_id,))
    assert row is not None and (row["status"], row["attempts"]) == ("queued", 0)
    assert await bot_mails(harness.mailbox) == []

    fake_openai.script([text("Finished after the restart.")])
    async with harness.running() as again:
        assert await harness.finish(again, run_id) == "done"
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "Finished after the restart." in plain(mail)


async def test_the_filed_hook_runs_after_the_reply_is_in_the_maildir(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    seen: list[int] = []
    fake_openai.script([text("hello")])
    run_id = await harness.task("hi")

    filer = Filer(mailbox=harness.mailbox, blobs=harness.blobs)

    def filed() -> None:
        seen.append(len(asyncio.all_tasks()))

    async with harness.running(filer=filer, on_filed=filed) as runner:
        await harness.finish(runner, run_id)
    assert len(seen) == 1
    assert len(await bot_mails(harness.mailbox)) == 1


async def test_a_reply_that_cannot_be_rendered_becomes_an_error_mail(
    harness: Harness, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "mail.txt.j2").write_text("{% if 'boom' in body %}{{ missing }}{% endif %}{{ body }}")
    fake_openai.script([text("boom")])
    run_id = await harness.task("Break the template")
    async with harness.running(composer=Composer(config=harness.config, templates=templates)) as runner:
        assert await harness.finish(runner, run_id) == "failed"
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "internal error (UndefinedError)" in plain(mail)


async def test_a_worker_survives_a_run_it_could_not_finish(
    harness: Harness, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = pool.conclude
    failures = [RuntimeError("disk full")]

    async def flaky(*args: Any, **kwargs: Any) -> bool:
        if failures:
            raise failures.pop()
        return await real(*args, **kwargs)

    monkeypatch.setattr(pool, "conclude", flaky)
    harness = harness.with_config(runner=RunnerSettings(concurrency=1))
    fake_openai.script([text("lost"), text("kept")])
    first = await harness.task("first", subject="A")
    second = await harness.task("second", subject="B")
    async with harness.running() as runner:
        assert await harness.finish(runner, first) == "interrupted"
        assert await harness.finish(runner, second) == "done"
        row = await harness.store.fetchone("SELECT status FROM runs WHERE id = ?", (first,))
        assert row is not None and row["status"] == "running"  # resumed at the next start


async def test_stopping_right_after_a_wake_never_hangs(harness: Harness) -> None:
    for _ in range(20):
        runner = harness.runner(poll_interval=0.01)
        await runner.start()
        runner.wake()
        await asyncio.wait_for(runner.stop(), TIMEOUT)
        assert not runner.running


async def test_one_dispatcher_claims_for_any_concurrency_and_an_idle_runner_holds_no_task_per_place(
    harness: Harness, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims: list[int | None] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        runs = await claim_runs(*args, **kwargs)
        claims.extend([run.id for run in runs] or [None])
        return runs

    monkeypatch.setattr(pool, "claim_runs", counted)
    harness = harness.with_config(runner=RunnerSettings(concurrency=256))
    fake_openai.script([text("answered")])
    before = asyncio.all_tasks()
    async with harness.running(poll_interval=3600) as runner:
        parts = asyncio.all_tasks() - before  # the dispatcher and the lease heartbeat and stop watch
        assert len(parts) <= 4
        run_id = await harness.task("hello")  # its RunQueued wakes the dispatcher: no poll, no wake()
        assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "done"
    # the start's look, the run's claim, the look after it: one each, not one per place
    assert run_id in claims and len(claims) <= 4


async def test_a_burst_of_queued_runs_is_claimed_in_two_claims_not_one_each(
    harness: Harness, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    claimed: list[list[int]] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        runs = await claim_runs(*args, **kwargs)
        if runs:
            claimed.append([run.id for run in runs])
        return runs

    monkeypatch.setattr(pool, "claim_runs", counted)
    harness = harness.with_config(runner=RunnerSettings(concurrency=8))
    fake_openai.script([], then=lambda request: text("answered"))
    queued = [await harness.task(f"task {n}", subject=f"Task {n}") for n in range(12)]
    async with harness.running(poll_interval=3600) as runner:
        for run_id in queued:
            assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "done"
    # one run alone first (it may be one a crash cut off), then every free place in one claim
    assert claimed[:2] == [queued[:1], queued[1:8]]
    assert sorted(r for claim in claimed for r in claim) == queued


async def test_runs_share_one_http_client_closed_with_the_runner(
    harness: Harness, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[httpx.AsyncClient] = []

    def counted() -> httpx.AsyncClient:
        made.append(new_client())
        return made[-1]

    monkeypatch.setattr(models, "new_client", counted)
    fake_openai.script([], then=lambda request: text("answered"))
    runs = 5
    queued = [await harness.task(f"task {n}", subject=f"Task {n}") for n in range(runs)]
    async with harness.running(provider_factory=None, secrets=harness.secrets) as runner:
        for run_id in queued:
            assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "done"
        # made at the first run's first request, reused by every later run
        assert len(made) == 1 and not made[0].is_closed
    assert all(client.is_closed for client in made)
    assert len(fake_openai.requests) == runs


async def test_the_ca_bundle_is_loaded_in_a_thread_when_the_runner_starts(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded_in: list[threading.Thread] = []
    made = httpx.create_ssl_context

    def loading() -> ssl.SSLContext:
        loaded_in.append(threading.current_thread())
        return made()

    monkeypatch.setattr(httpx, "create_ssl_context", loading)
    tls_context.cache_clear()
    try:
        async with harness.running(provider_factory=None, secrets=harness.secrets):
            assert len(loaded_in) == 1 and loaded_in[0] is not threading.main_thread()
    finally:
        tls_context.cache_clear()
