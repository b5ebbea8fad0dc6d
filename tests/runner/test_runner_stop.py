"""Stopping a working run: mid model call, mid tool call, asked by another process; and a run of a
thread being worked on is never claimed beside it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from pizzamail.providers import ToolSpec
from pizzamail.store import Store
from pizzamail.store.leases import claim_next
from pizzamail.store.runs import ask_stop, get_run
from pizzamail.tools import ToolRegistry, ToolResult
from tests.fakes.openai_server import FakeOpenAI, gated, text, tool_call
from tests.runner.conftest import TIMEOUT, Harness, bot_mails, plain


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    held = threading.Event()
    yield held
    held.set()


@dataclass(kw_only=True)
class Forever:
    """A tool that never returns; it records that it was cancelled."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: bool = False
    spec = ToolSpec(name="forever", description="Works until stopped.")

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ToolResult(text="never")


async def _ask_stop(store: Store, run_id: int, by: str = "me@pizzamail.localhost") -> None:
    run = await get_run(store, run_id)
    async with store.write() as db:
        assert await ask_stop(db, run.thread_id, by=by) == run_id


async def test_a_stop_cancels_the_model_request_and_the_run_ends_stopped_with_a_mail(
    harness: Harness, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    fake_openai.script([gated(text("Too late."), gate)])
    run_id = await harness.task("Plan it all")
    async with harness.running() as runner:
        await asyncio.to_thread(fake_openai.wait_requests, 1)
        await _ask_stop(harness.store, run_id)
        assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "stopped"
    run = await get_run(harness.store, run_id)
    assert (run.status, run.stop_requested) == ("stopped", "me@pizzamail.localhost")
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert mail["X-Pizzamail-Kind"] == "stopped" and "Stopped." in plain(mail)


async def test_a_stop_cancels_a_tool_call_in_flight(harness: Harness, fake_openai: FakeOpenAI) -> None:
    forever, tools = Forever(), ToolRegistry()
    tools.add(forever)
    fake_openai.script([tool_call("forever", {})])
    run_id = await harness.task("Work forever")
    async with harness.running(tools=tools) as runner:
        await asyncio.wait_for(forever.started.wait(), TIMEOUT)
        await _ask_stop(harness.store, run_id)
        assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "stopped"
    assert forever.cancelled


async def test_a_stop_asked_by_another_process_is_noticed_without_an_event(
    harness: Harness, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    fake_openai.script([gated(text("Too late."), gate)])
    run_id = await harness.task("Plan it all")
    async with harness.running() as runner:
        await asyncio.to_thread(fake_openai.wait_requests, 1)
        async with harness.store.twin() as other:  # its commits publish nothing here
            await _ask_stop(other, run_id, by="cli")
        assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "stopped"
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "`pizzamail stop`" in plain(mail)


async def test_follow_ups_queued_behind_a_stopped_run_never_start(
    harness: Harness, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    fake_openai.script([gated(text("Too late."), gate)])
    first = await harness.task("Plan it all", subject="Offsite")
    async with harness.running() as runner:
        await asyncio.to_thread(fake_openai.wait_requests, 1)
        task = await harness.store.fetchone("SELECT message_id FROM messages")
        assert task is not None
        follow_up = await harness.task("and the dinner", reply_to=task["message_id"])
        await _ask_stop(harness.store, first)
        assert await asyncio.wait_for(runner.wait_for(first), TIMEOUT) == "stopped"
    assert (await get_run(harness.store, follow_up)).status == "stopped"
    assert len(fake_openai.requests) == 1


async def test_a_queued_run_of_a_thread_with_a_running_run_is_not_claimed(harness: Harness) -> None:
    first = await harness.task("Plan it all")
    claimed = await claim_next(harness.store, exclude_threads=set())
    assert claimed is not None and claimed.id == first
    task = await harness.store.fetchone("SELECT message_id FROM messages")
    assert task is not None
    await harness.task("and the dinner", reply_to=task["message_id"])
    # another process's runner knows nothing of the first claim: the store itself says no
    assert await claim_next(harness.store, exclude_threads=set()) is None


async def test_a_stop_with_nothing_running_changes_nothing(harness: Harness) -> None:
    run_id = await harness.task("Plan it all")
    run = await get_run(harness.store, run_id)
    async with harness.store.write() as db:
        assert await ask_stop(db, run.thread_id, by="cli") is None
    assert (await get_run(harness.store, run_id)).status == "queued"


async def test_a_run_a_crash_left_with_a_stop_asked_ends_stopped_when_resumed(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    run_id = await harness.task("Plan it all")
    assert await claim_next(harness.store, exclude_threads=set()) is not None  # then the process died
    await _ask_stop(harness.store, run_id, by="cli")  # `pizzamail stop` while nothing serves
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "stopped"
    assert fake_openai.requests == []
