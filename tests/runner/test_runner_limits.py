"""Per-run limits (tool calls, tokens, wall time) end in a tool-free summary that names the limit;
usage lands in the store, the footer and ``threads --json``."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

from click.testing import CliRunner

from pizzamail.cli import cli
from pizzamail.config import AgentSettings
from pizzamail.config.agents import main_agent
from pizzamail.home import Home
from pizzamail.runner.limits import Limits, RunUsage, stopped_note
from pizzamail.tools import ToolRegistry
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, tool_calls
from tests.runner.conftest import Harness, bot_mails, plain
from tests.runner.test_runner_tools import Adder


async def test_the_tool_call_limit_stops_calls_and_asks_for_a_summary(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = harness.with_config(agent=AgentSettings(max_steps=10, max_tool_calls=1))
    adder, tools = Adder(), ToolRegistry()
    tools.add(adder)
    fake_openai.script([tool_calls([("c1", "add", {"a": 1, "b": 1}), ("c2", "add", {"a": 2, "b": 2})]),
                        text("1+1 is 2; 2+2 was not computed.")])
    run_id = await harness.task("Add things")
    async with harness.running(tools=tools) as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert adder.calls == [{"a": 1, "b": 1}]  # the second call was not run
    summary = fake_openai.requests[1]
    assert summary.tools == []
    assert summary.messages[-2]["role"] == "tool" and "not run" in summary.messages[-2]["content"]
    assert "limit of 1 tool calls" in summary.messages[-1]["content"]
    [(_, mail)] = await bot_mails(harness.mailbox)
    body = plain(mail)
    assert "limit of 1 tool calls" in body and "`[agent] max_tool_calls`" in body
    assert "not a finished task" in body


async def test_the_token_limit_counts_usage_over_calls(harness: Harness, fake_openai: FakeOpenAI) -> None:
    harness = harness.with_config(agent=AgentSettings(max_steps=10, max_tokens=15))
    fake_openai.script([tool_call("lookup", {}), text("Partial answer.")])
    run_id = await harness.task("Use many tokens")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert fake_openai.requests[1].tools == []
    run = await harness.store.fetchone("SELECT * FROM runs WHERE id = ?", (run_id,))
    assert run is not None and run["stopped_by"] == "tokens"
    assert run["model_calls"] == 2 and run["tool_calls"] == 1
    assert run["input_tokens"] > 0 and run["output_tokens"] > 0


async def test_the_wall_time_limit_uses_the_clock() -> None:
    now = [100.0]
    limits = Limits(max_model_calls=10, max_seconds=60, clock=lambda: now[0], started=100.0)
    assert limits.reached([]) is None
    now[0] = 161.0
    assert limits.reached([]) == "wall_time"
    note = stopped_note("limit:wall_time", main_agent(AgentSettings(max_seconds=60)))
    assert note is not None and "60 seconds of work" in note and "`[agent] max_seconds`" in note
    assert stopped_note("stop", main_agent(AgentSettings())) is None


async def test_a_reply_shows_usage_in_its_footer_and_threads_json_lists_it(
    harness: Harness, fake_openai: FakeOpenAI, home: Home
) -> None:
    fake_openai.script([text("Hello there.")])
    run_id = await harness.task("Hi")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    [(_, mail)] = await bot_mails(harness.mailbox)
    run = await harness.store.fetchone("SELECT * FROM runs WHERE id = ?", (run_id,))
    assert run is not None and run["stopped_by"] is None
    usage = RunUsage(model_calls=1, input_tokens=run["input_tokens"], output_tokens=run["output_tokens"])
    assert usage.tokens > 0 and usage.footer() in plain(mail)
    result = await asyncio.to_thread(CliRunner().invoke, cli, ["--home", str(home.root), "threads", "--json"])
    assert result.exit_code == 0, result.output
    [thread] = json.loads(result.output)
    assert thread["usage"] == {"model_calls": 1, "tool_calls": 0, "input_tokens": run["input_tokens"],
                               "output_tokens": run["output_tokens"]}


def test_run_usage_footer_is_short() -> None:
    assert RunUsage(model_calls=2, tool_calls=1, input_tokens=1000, output_tokens=234).footer() == (
        "2 model calls · 1 tool call · 1,234 tokens (1,000 in, 234 out)")
    assert replace(RunUsage(), model_calls=1).footer() == "1 model call · 0 tokens (0 in, 0 out)"
