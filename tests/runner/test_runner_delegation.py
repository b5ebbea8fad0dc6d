"""Delegation in the runner: ``delegate`` calls become child runs of specialists, in threads of their
own in Activity; the parent waits without a worker and resumes with each child's answer and files."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import replace
from datetime import UTC, datetime
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from typing import Any

import pytest

from pizzamail.activity.status import status_subject
from pizzamail.config import Agent, RunnerSettings, SpecialistSettings
from pizzamail.providers.types import ToolCall
from pizzamail.runner.delegation import Delegation
from pizzamail.store.actions import held_actions
from pizzamail.store.activity import board_runs
from pizzamail.store.events import RunChanged
from pizzamail.store.runs import Run, ask_stop, get_run
from pizzamail.store.threads import thread_messages
from pizzamail.transcript import DelegateStep, ToolStep
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, tool_calls
from tests.fakes.scripted import Recorded, Scripted
from tests.runner.conftest import TIMEOUT, Harness, bot_mails, plain
from tests.tools.conftest import with_tools

RESEARCH = "research@pizzamail.localhost"
WRITER = "writer@pizzamail.localhost"


def _team(harness: Harness, **runner: Any) -> Harness:
    return harness.with_config(agents={
        "research": SpecialistSettings(address=RESEARCH, name="Research", description="Finds facts",
                                       instructions="You are Research."),
        "writer": SpecialistSettings(address=WRITER, name="Writer", description="Writes documents",
                                     instructions="You are Writer."),
    }, runner=RunnerSettings(concurrency=3, **runner))


def _system(request: Recorded) -> str:
    return str(request.messages[0]["content"])


def _tool_texts(request: Recorded) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "tool"]


def _user_texts(request: Recorded) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "user"]


def _tool_names(request: Recorded) -> list[str]:
    return [str(t["function"]["name"]) for t in request.tools]


def _delegate_spec(request: Recorded) -> dict[str, Any]:
    return next(t["function"] for t in request.tools if t["function"]["name"] == "delegate")


async def _status(harness: Harness, run_id: int, *wanted: str) -> Run:
    """The run once its status is one of ``wanted`` (told by the store's commit events)."""
    changed = asyncio.Event()
    unsubscribe = harness.store.events.subscribe(RunChanged, lambda e: changed.set())
    try:
        async with asyncio.timeout(TIMEOUT):
            while (run := await get_run(harness.store, run_id)).status not in wanted:
                await changed.wait()
                changed.clear()
            return run
    finally:
        unsubscribe()


async def _folder_mails(harness: Harness, name: str) -> list[EmailMessage]:
    folder = await harness.mailbox.folder(name)
    assert folder is not None
    found = []
    for row in await harness.mailbox.messages(folder):
        msg = message_from_bytes(await harness.mailbox.read(folder, row) or b"", policy=default)
        assert isinstance(msg, EmailMessage)
        found.append(msg)
    return found


async def test_two_delegates_run_in_parallel_and_the_parent_resumes_with_their_answers_and_files(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = _team(harness)
    both_asked = threading.Event()
    seen: list[str] = []

    def answer(request: Recorded) -> Scripted:
        system = _system(request)
        if "You are Research." in system:
            seen.append("research")
            # held until Writer asked too: with children one after the other this never comes
            return Scripted(payload=text("Tides come twice a day.").payload, gate=both_asked)
        if "You are Writer." in system:
            if _tool_texts(request):
                return text("The draft is in draft.md.")
            seen.append("writer")
            both_asked.set()
            return tool_call("write_file", {"name": "draft.md", "content": "# Tides\n"})
        if not _tool_texts(request):
            return tool_calls([
                ("c1", "delegate", {"agent": "research", "task": "Find out how often tides come."}),
                ("c2", "delegate", {"agent": "writer", "task": "Write a short draft about tides.",
                                    "subject": "Tides draft"})])
        return text("Summary: " + " | ".join(_tool_texts(request)))

    fake_openai.script([], then=answer)
    run_id = await harness.task("Write me something about tides", subject="Tides")
    async with harness.running(**with_tools(harness)) as runner:
        runner.wake()
        parent = await _status(harness, run_id, "done", "failed")
    assert parent.status == "done"
    assert sorted(seen) == ["research", "writer"]  # each child asked once

    first = fake_openai.requests[0]
    spec = _delegate_spec(first)
    assert spec["parameters"]["properties"]["agent"]["enum"] == ["research", "writer"]
    assert "research: Finds facts" in spec["parameters"]["properties"]["agent"]["description"]
    research = next(r for r in fake_openai.requests if "You are Research." in _system(r))
    assert _user_texts(research)[-1] == "Find out how often tides come."
    assert "delegate" not in _tool_names(research)  # a specialist delegates only with delegate = true

    [(_, reply)] = [(f, m) for f, m in await bot_mails(harness.mailbox) if m["X-Pizzamail-Kind"] == "reply"]
    body = plain(reply).replace("\r\n", "\n")
    assert "Research (research) answered:\n\nTides come twice a day." in body
    assert "Writer (writer) answered:\n\nThe draft is in draft.md." in body
    assert "Files it wrote (they go out with your reply): draft.md" in body
    [attached] = [p for p in reply.iter_attachments() if p.get_filename() == "draft.md"]
    assert attached.get_content().replace("\r\n", "\n") == "# Tides\n"

    activity = await _folder_mails(harness, "Activity")
    tasks = [m for m in activity if m["To"] and m["X-Pizzamail-Delegated-By"]]
    assert sorted(str(m["To"]) for m in tasks) == ["Research <research@pizzamail.localhost>",
                                                   "Writer <writer@pizzamail.localhost>"]
    assert {str(m["Subject"]) for m in tasks} == {"Find out how often tides come.", "Tides draft"}
    assert all(str(m["From"]) == "Pizza Bot <bot@pizzamail.localhost>" for m in tasks)
    replies = [m for m in activity if m["X-Pizzamail-Kind"] == "reply"]
    assert {m["From"].addresses[0].addr_spec for m in replies} == {RESEARCH, WRITER}
    inbox = await _folder_mails(harness, "INBOX")
    assert not any(m["X-Pizzamail-Delegated-By"] for m in inbox)


async def test_a_waiting_parent_holds_no_worker_so_one_worker_runs_parent_and_child(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = _team(harness)
    harness = harness.with_config(runner=RunnerSettings(concurrency=1))
    fake_openai.script([tool_call("delegate", {"agent": "research", "task": "Look it up"}),
                        text("Found it."), text("Research says: found it.")])
    run_id = await harness.task("Ask research", subject="Ask")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "delegating"
        assert (await _status(harness, run_id, "done")).status == "done"
    assert "Found it." in _tool_texts(fake_openai.requests[2])[0]


async def test_a_failed_child_is_an_error_result_and_the_parent_goes_on(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = _team(harness)

    def answer(request: Recorded) -> Scripted:
        if "You are Research." in _system(request):
            return Scripted(status=400, payload={"error": {"message": "model exploded", "type": "x"}})
        if not _tool_texts(request):
            return tool_call("delegate", {"agent": "research", "task": "Look it up"})
        return text("Research could not help; here is what I know.")

    fake_openai.script([], then=answer)
    run_id = await harness.task("Ask research", subject="Ask")
    async with harness.running() as runner:
        runner.wake()
        assert (await _status(harness, run_id, "done", "failed")).status == "done"
    last = fake_openai.requests[-1]
    [result] = [m for m in last.messages if m["role"] == "tool"]
    assert str(result["content"]).startswith("ERROR: Research (research) failed:")
    assert "model exploded" in str(result["content"])


async def test_the_budget_and_unknown_agents_come_back_to_the_model_as_errors(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = _team(harness)
    harness = harness.with_config(agent=replace(harness.config.agent, max_delegates=1))
    fake_openai.script([
        tool_calls([("a", "delegate", {"agent": "research", "task": "one"}),
                    ("b", "delegate", {"agent": "research", "task": "two"}),
                    ("c", "delegate", {"agent": "nobody", "task": "three"})]),
        text("child answer"), text("done with one child")])
    run_id = await harness.task("Ask three times", subject="Budget")
    async with harness.running() as runner:
        runner.wake()
        assert (await _status(harness, run_id, "done")).status == "done"
    results = {str(m["tool_call_id"]): str(m["content"]) for m in fake_openai.requests[-1].messages
               if m["role"] == "tool"}
    assert results["a"].startswith("Research (research) answered")
    assert "started 1 delegations, its limit (`[agent] max_delegates`" in results["b"]
    assert "no specialist named 'nobody'" in results["c"]
    assert len([r for r in fake_openai.requests if "You are Research." in _system(r)]) == 1


async def test_depth_is_limited_a_delegating_specialist_at_the_limit_is_not_offered_delegate(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = harness.with_config(agents={
        "research": SpecialistSettings(address=RESEARCH, instructions="You are Research.", delegate=True),
        "writer": SpecialistSettings(address=WRITER, instructions="You are Writer.", delegate=True),
    }, runner=RunnerSettings(concurrency=2, delegation_depth=1))
    fake_openai.script([tool_call("delegate", {"agent": "research", "task": "dig"}),
                        text("dug"), text("all done")])
    run_id = await harness.task("Go", subject="Depth")
    async with harness.running() as runner:
        runner.wake()
        assert (await _status(harness, run_id, "done")).status == "done"
    research = next(r for r in fake_openai.requests if "You are Research." in _system(r))
    assert "delegate" not in _tool_names(research)
    assert "delegate" in _tool_names(fake_openai.requests[0])
    child = await get_run(harness.store, run_id + 1)
    assert (child.parent_run, child.depth) == (run_id, 1)
    messages = await thread_messages(harness.store, child.thread_id)
    assert json.dumps([m.kind for m in messages]) == json.dumps(["task", "reply"])


async def test_the_board_shows_the_parent_waiting_for_a_delegate(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = _team(harness)
    release = threading.Event()
    fake_openai.script([tool_call("delegate", {"agent": "research", "task": "Look it up"}),
                        Scripted(payload=text("Found it.").payload, gate=release), text("Done.")])
    run_id = await harness.task("Ask research", subject="Ask")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "delegating"
        [shown] = [r for r in await board_runs(harness.store, finished_since=datetime.now(UTC))
                   if r.run == run_id]
        assert status_subject(shown) == "[waiting for a delegate] Ask — step 1, delegate"
        release.set()
        assert (await _status(harness, run_id, "done")).status == "done"


async def test_stopping_a_delegating_run_stops_a_delegate_that_waits_for_approval_and_withdraws_its_request(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = _team(harness)
    fake_openai.script([tool_call("delegate", {"agent": "research", "task": "Mail Ann"}),
                        tool_call("draft_email", {"to": "ann@example.com", "subject": "Hi", "body": "Hi"})])
    run_id = await harness.task("Have research mail Ann", subject="Ann")
    async with harness.running(**with_tools(harness)) as runner:
        runner.wake()
        await _status(harness, run_id, "delegating")  # its child exists from here on
        child = await _status(harness, run_id + 1, "waiting")
        [held] = await held_actions(harness.store, run_id=child.id)
        assert held.status == "held"
        parent = await get_run(harness.store, run_id)
        async with harness.store.write() as db:
            assert await ask_stop(db, parent.thread_id, by="me@pizzamail.localhost") == run_id
        assert (await _status(harness, child.id, "stopped")).stop_requested == "me@pizzamail.localhost"
        assert (await _status(harness, run_id, "stopped")).status == "stopped"
    [withdrawn] = await held_actions(harness.store, run_id=child.id)
    assert withdrawn.status == "expired"
    assert len(fake_openai.requests) == 2  # neither run asked the model again
    kinds = [m["X-Pizzamail-Kind"] for _, m in await bot_mails(harness.mailbox)]
    assert kinds.count("stopped") == 1 and "reply" not in kinds


async def test_stop_reaches_the_delegate_of_a_run_that_waits_for_a_decision(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = _team(harness)
    release = threading.Event()

    def answer(request: Recorded) -> Scripted:
        if "You are Research." in _system(request):
            return Scripted(payload=text("facts").payload, gate=release)
        return tool_calls([("c1", "delegate", {"agent": "research", "task": "Find facts."}),
                           ("c2", "draft_email", {"to": "ann@example.com", "subject": "Hi", "body": "Hi"})])

    fake_openai.script([], then=answer)
    run_id = await harness.task("Research, then mail Ann", subject="Ann")
    try:
        async with harness.running(**with_tools(harness)) as runner:
            runner.wake()
            parent = await _status(harness, run_id, "waiting")  # the draft waits for a decision
            child = await _status(harness, run_id + 1, "running")
            async with harness.store.write() as db:
                assert await ask_stop(db, parent.thread_id, by="me@pizzamail.localhost") == run_id
            assert (await _status(harness, child.id, "stopped")).stop_requested == "me@pizzamail.localhost"
            assert (await _status(harness, run_id, "stopped")).status == "stopped"
    finally:
        release.set()
    [draft] = await held_actions(harness.store, run_id=run_id)
    assert draft.status == "expired"  # the request is withdrawn: a late approve sends nothing


async def test_a_stop_that_comes_while_delegates_start_stops_those_started_after_it_too(
    harness: Harness, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = _team(harness)
    original = Delegation.start
    started: list[DelegateStep | ToolStep] = []

    async def start(self: Delegation, run: Run, agent: Agent, seq: int, call: ToolCall
                    ) -> DelegateStep | ToolStep:
        step = await original(self, run, agent, seq, call)
        started.append(step)
        if len(started) == 1:  # the user's stop comes right after the first child committed
            async with harness.store.write() as db:
                await ask_stop(db, run.thread_id, by="me@pizzamail.localhost")
        return step

    monkeypatch.setattr(Delegation, "start", start)
    fake_openai.script([tool_calls([("c1", "delegate", {"agent": "research", "task": "A."}),
                                    ("c2", "delegate", {"agent": "writer", "task": "B."})])],
                       then=text("child answer"))
    run_id = await harness.task("Two things", subject="Two")
    async with harness.running(**with_tools(harness)) as runner:
        runner.wake()
        assert (await _status(harness, run_id, "stopped", "done", "failed")).status == "stopped"
    first, second = started
    assert isinstance(first, DelegateStep)
    assert (await get_run(harness.store, first.child)).status == "stopped"
    assert isinstance(second, ToolStep)  # no second child: the run was already asked to stop
    assert second.result.text == "not run: this run was asked to stop"
    assert len(fake_openai.requests) == 1  # neither the children nor the parent asked the model again
