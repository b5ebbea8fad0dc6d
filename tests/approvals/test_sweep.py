"""The sweep: expiry, reminders and the Action folder on a timer of its own, started and stopped as a
part of the service (no runner idle loop, no caller asking it to look)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from pizzamail.approvals.ledger import pending
from pizzamail.approvals.service import Sweep
from pizzamail.config import ApprovalsSettings
from pizzamail.store.actions import held_actions
from pizzamail.store.events import RunQueued
from tests.approvals.conftest import Approvals, open_approvals
from tests.fakes.openai_server import FakeOpenAI, text
from tests.runner.conftest import TIMEOUT, Harness


def _requeued(approvals: Approvals) -> asyncio.Event:
    """Set when the store announces a run queued again (what the sweep does to an undecided run)."""
    queued = asyncio.Event()
    approvals.harness.store.events.subscribe(RunQueued, lambda _: queued.set())
    return queued


def _sweep(approvals: Approvals) -> Sweep:
    return Sweep(approvals=approvals.service, interval=0.05)


async def test_a_started_sweep_notices_a_deleted_request_by_itself(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id = await approvals.held(fake_openai, text("Went on without it."))
    mailbox = approvals.harness.mailbox
    folder = await mailbox.folder("Action")
    assert folder is not None
    await mailbox.expunge(folder, [row.uid for row in await mailbox.messages(folder)])
    decided = _requeued(approvals)
    async with _sweep(approvals):
        await asyncio.wait_for(decided.wait(), TIMEOUT)
    [action] = await held_actions(approvals.harness.store)
    assert action.status == "ignored"
    assert await approvals.finish(run_id) == "done"
    assert "ignored" in fake_openai.requests[-1].messages[-1]["content"]


async def test_a_started_sweep_expires_a_request_by_itself(harness: Harness, fake_openai: FakeOpenAI) -> None:
    now = [datetime.now(UTC)]
    configured = harness.with_config(approvals=ApprovalsSettings(expires="1h"))
    async with open_approvals(configured, clock=lambda: now[0]) as approvals:
        run_id = await approvals.held(fake_openai, text("Went on without it."))
        now[0] += timedelta(hours=2)
        decided = _requeued(approvals)
        async with _sweep(approvals):
            await asyncio.wait_for(decided.wait(), TIMEOUT)
        assert await pending(harness.store) == []
        assert await approvals.finish(run_id) == "done"
    assert "expired unanswered" in fake_openai.requests[-1].messages[-1]["content"]


async def test_leaving_the_stack_stops_the_sweep(approvals: Approvals, fake_openai: FakeOpenAI) -> None:
    await approvals.held(fake_openai, text("Went on without it."))
    sweep = _sweep(approvals)
    async with sweep:
        task = sweep._task
        assert task is not None and not task.done()
    assert task.done() and not task.cancelled()  # it finished its pass, it was not cut off
