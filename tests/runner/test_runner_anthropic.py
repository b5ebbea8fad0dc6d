"""The Anthropic Messages provider end to end against a fake server: tools, retries, wire format."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pizzamail.config import Config, ProviderSettings
from pizzamail.errors import ProviderError
from pizzamail.providers import Message, ToolCall, ToolSpec
from pizzamail.providers.anthropic import request_body
from pizzamail.store.runs import steps_of
from pizzamail.tools import ToolRegistry
from tests.fakes.anthropic_server import FakeAnthropic, error, text, tool_use
from tests.runner.conftest import Harness, bot_mails, plain
from tests.runner.test_runner_tools import Adder


@pytest.fixture
def claude(harness: Harness, fake_anthropic: FakeAnthropic) -> Harness:
    harness.secrets.set("anthropic", "sk-ant-test")
    settings = ProviderSettings(kind="anthropic", base_url=fake_anthropic.base_url,
                                key_env="ANTHROPIC_API_KEY", max_retries=2, timeout=30.0, max_tokens=1000)
    agent = replace(harness.config.agent, model="anthropic:claude-fake-1")
    return harness.with_config(agent=agent, providers={"anthropic": settings})


async def test_a_tool_call_round_trips_and_the_reply_is_mailed(
    claude: Harness, fake_anthropic: FakeAnthropic
) -> None:
    adder, tools = Adder(), ToolRegistry()
    tools.add(adder)
    fake_anthropic.script([tool_use("add", {"a": 2, "b": 3}, content="Adding."), text("It is 5.")])
    run_id = await claude.task("2+3?")
    async with claude.running(tools=tools) as runner:
        assert await claude.finish(runner, run_id) == "done"
    assert adder.calls == [{"a": 2, "b": 3}]
    first, second = fake_anthropic.requests
    assert first.path == "/v1/messages" and first.headers["x-api-key"] == "sk-ant-test"
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert first.body["model"] == "claude-fake-1" and first.body["max_tokens"] == 1000
    assert isinstance(first.body["system"], str) and first.body["system"]
    assert all(m["role"] in ("user", "assistant") for m in first.messages)
    assert first.body["tools"] == [{"name": "add", "description": "Add two integers.",
                                    "input_schema": adder.spec.parameters}]
    echoed, result = second.messages[-2:]
    assert echoed == {"role": "assistant", "content": [
        {"type": "text", "text": "Adding."},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}}]}
    assert result == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "5"}]}
    assert [s.kind for s in await steps_of(claude.store, run_id)] == ["model", "tool", "model"]
    [(_, mail)] = await bot_mails(claude.mailbox)
    assert "It is 5." in plain(mail)


async def test_429_is_retried_after_the_wait_the_server_asks_for(
    claude: Harness, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script([error(429, "slow down", kind="rate_limit_error", retry_after="7"),
                           error(529, "overloaded", kind="overloaded_error", retry_after="3"),
                           text("Fine.")])
    run_id = await claude.task("hi")
    async with claude.running() as runner:
        assert await claude.finish(runner, run_id) == "done"
    assert claude.sleeps == [7.0, 3.0]
    assert len(fake_anthropic.requests) == 3


async def test_a_bad_key_is_not_retried_and_names_the_command(
    claude: Harness, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script([error(401, "invalid x-api-key", kind="authentication_error")])
    provider = claude.provider()
    with pytest.raises(ProviderError) as caught:
        await provider.complete([Message(role="user", content="hi")], [])
    await provider.aclose()
    assert len(fake_anthropic.requests) == 1 and not caught.value.retryable
    assert "`pizzamail keys set anthropic`" in (caught.value.hint or "")


async def test_a_too_long_prompt_is_trimmed_and_retried_once(
    claude: Harness, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script([error(400, "prompt is too long: 250000 tokens > 200000 maximum",
                                 kind="invalid_request_error"), text("Short enough now.")])
    old = [Message(role="user" if i % 2 == 0 else "assistant", content=f"old {i} " + "x" * 3000)
           for i in range(10)]
    messages = [Message(role="system", content="You are Pizza Bot."), *old,
                Message(role="user", content="The task.")]
    provider = claude.provider()
    answer = await provider.complete(messages, [])
    await provider.aclose()
    assert answer.text == "Short enough now." and answer.finish_reason == "end_turn"
    first, second = fake_anthropic.requests
    assert len(second.messages) < len(first.messages)
    assert second.body["system"] == "You are Pizza Bot."
    assert second.messages[-1] == {"role": "user", "content": "The task."}


def test_wire_format_merges_consecutive_tool_results_and_flags_errors() -> None:
    calls = [ToolCall(id="a", name="x"), ToolCall(id="b", name="y")]
    body = request_body("m", [
        Message(role="system", content="S1"), Message(role="system", content="S2"),
        Message(role="user", content="task"), Message(role="assistant", tool_calls=calls),
        Message(role="tool", tool_call_id="a", content="ok"),
        Message(role="tool", tool_call_id="b", content="boom", is_error=True),
    ], [ToolSpec(name="x", description="X")])
    assert body["system"] == "S1\n\nS2" and body["max_tokens"] == 4096
    assert body["messages"][-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": True}]}
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "a", "name": "x", "input": {}},
        {"type": "tool_use", "id": "b", "name": "y", "input": {}}]


def test_the_implicit_anthropic_section_reads_its_key_from_the_environment() -> None:
    settings = Config().provider("anthropic")
    assert settings is not None and settings.kind == "anthropic"
    assert settings.base_url == "https://api.anthropic.com" and settings.key_env == "ANTHROPIC_API_KEY"
