"""Tool calls: mistakes go back to the model; the step limit stops a run with a clear mail."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pizzamail.config import AgentSettings
from pizzamail.providers import ToolSpec
from pizzamail.store.runs import steps_of
from pizzamail.tools import ToolRegistry, ToolResult
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import Harness, bot_mails, plain


@dataclass(kw_only=True)
class Adder:
    calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="add", description="Add two integers.", parameters={
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]})

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult(text=str(arguments["a"] + arguments["b"]))


class Broken:
    spec = ToolSpec(name="broken", description="Always fails inside.")

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        raise ValueError("a bug in a tool")


async def test_a_registered_tool_runs_and_its_result_reaches_the_model(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    adder, tools = Adder(), ToolRegistry()
    tools.add(adder)
    fake_openai.script([tool_call("add", {"a": 2, "b": 3}), text("It is 5.")])
    run_id = await harness.task("2+3?")
    async with harness.running(tools=tools) as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert adder.calls == [{"a": 2, "b": 3}]
    first, second = fake_openai.requests
    assert first.tools == [{"type": "function", "function": {
        "name": "add", "description": "Add two integers.", "parameters": adder.spec.parameters}}]
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}
    assert [s.kind for s in await steps_of(harness.store, run_id)] == ["model", "tool", "model"]


async def test_an_unknown_tool_is_an_error_the_model_can_read(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([tool_call("lookup", {"q": "x"}), text("Sorry, I cannot look that up.")])
    run_id = await harness.task("Look it up")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    echoed, result = fake_openai.requests[1].messages[-2:]
    assert echoed["role"] == "assistant"
    assert echoed["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"q": "x"}'}
    assert result["role"] == "tool" and result["tool_call_id"] == "call_1"
    assert result["content"].startswith("ERROR: there is no tool named 'lookup'")
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "Sorry, I cannot look that up." in plain(mail)


async def test_invalid_json_arguments_go_back_to_the_model(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    adder, tools = Adder(), ToolRegistry()
    tools.add(adder)
    fake_openai.script([tool_call("add", '{"a": 2, "b": '), text("Fixed it: 5.")])
    run_id = await harness.task("2+3?")
    async with harness.running(tools=tools) as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert adder.calls == []
    echoed, result = fake_openai.requests[1].messages[-2:]
    assert echoed["tool_calls"][0]["function"]["arguments"] == '{"a": 2, "b": '  # as the model sent it
    assert "not valid JSON" in result["content"] and result["content"].startswith("ERROR:")


async def test_the_step_limit_ends_the_run_with_a_summary_that_says_which_limit(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = harness.with_config(agent=AgentSettings(max_steps=2))
    fake_openai.script([tool_call("lookup", {}), tool_call("lookup", {}, call_id="c2")],
                       then=text("Found nothing yet; lookup still to do."))
    run_id = await harness.task("Loop forever")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert len(fake_openai.requests) == 3
    last = fake_openai.requests[2]
    assert last.messages[-2]["role"] == "tool" and "not run" in last.messages[-2]["content"]
    assert last.tools == [] and last.messages[-1]["content"].startswith("[pizzamail] This run reached")
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert mail["X-Pizzamail-Kind"] == "reply"
    body = plain(mail)
    assert "Found nothing yet" in body
    assert "Stopped early" in body and "limit of 2 model calls" in body and "`[agent] max_steps`" in body
    run = await harness.store.fetchone("SELECT status, stopped_by, model_calls FROM runs WHERE id = ?",
                                       (run_id,))
    assert run is not None and run["status"] == "done" and run["stopped_by"] == "model_calls"
    assert run["model_calls"] == 3
    # the last tool answer's calls are answered "not run" (the conversation stays valid), then the summary
    kinds = [s.kind for s in await steps_of(harness.store, run_id)]
    assert kinds == ["model", "tool", "model", "tool", "model"]


async def test_a_tool_that_crashes_fails_the_run_loudly(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    tools = ToolRegistry()
    tools.add(Broken())
    fake_openai.script([tool_call("broken", {})])
    run_id = await harness.task("Use the broken tool")
    async with harness.running(tools=tools) as runner:
        assert await harness.finish(runner, run_id) == "failed"
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "internal error (ValueError)" in plain(mail)
