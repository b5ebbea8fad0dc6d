"""The Bedrock Converse provider end to end against a fake server: tools, retries, wire format, auth."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest

from pizzamail.config import Config, ProviderSettings
from pizzamail.errors import ProviderError, ProviderNotConfigured
from pizzamail.providers import Message, ToolCall, ToolSpec, bedrock
from pizzamail.providers.bedrock import BedrockProvider, request_body
from pizzamail.providers.openai import OpenAIProvider
from pizzamail.providers.registry import provider_for
from pizzamail.secrets import SecretStore
from pizzamail.store.runs import steps_of
from pizzamail.tools import ToolRegistry
from tests.fakes.bedrock_server import FakeBedrock, error, text, tool_use
from tests.runner.conftest import Harness, bot_mails, plain
from tests.runner.test_runner_tools import Adder

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.fixture
def aws(harness: Harness, fake_bedrock: FakeBedrock) -> Harness:
    harness.secrets.set("bedrock", "bedrock-api-key-test")
    settings = ProviderSettings(kind="bedrock", base_url=fake_bedrock.base_url,
                                key_env="AWS_BEARER_TOKEN_BEDROCK", key_required=False,
                                max_retries=2, timeout=30.0, max_tokens=1000)
    agent = replace(harness.config.agent, model=f"bedrock:{MODEL}")
    return harness.with_config(agent=agent, providers={"bedrock": settings})


async def test_a_tool_call_round_trips_and_the_reply_is_mailed(
    aws: Harness, fake_bedrock: FakeBedrock
) -> None:
    adder, tools = Adder(), ToolRegistry()
    tools.add(adder)
    fake_bedrock.script([tool_use("add", {"a": 2, "b": 3}, content="Adding."), text("It is 5.")])
    run_id = await aws.task("2+3?")
    async with aws.running(tools=tools) as runner:
        assert await aws.finish(runner, run_id) == "done"
    assert adder.calls == [{"a": 2, "b": 3}]
    first, second = fake_bedrock.requests
    assert first.path == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    assert first.headers["authorization"] == "Bearer bedrock-api-key-test"
    assert first.body["inferenceConfig"] == {"maxTokens": 1000} and "model" not in first.body
    assert [set(block) for block in first.body["system"]] == [{"text"}] and first.body["system"][0]["text"]
    assert all(m["role"] in ("user", "assistant") for m in first.messages)
    assert "2+3?" in json.dumps(first.messages)
    assert first.body["toolConfig"] == {"tools": [{"toolSpec": {
        "name": "add", "description": "Add two integers.", "inputSchema": {"json": adder.spec.parameters}}}]}
    echoed, result = second.messages[-2:]
    assert echoed == {"role": "assistant", "content": [
        {"text": "Adding."},
        {"toolUse": {"toolUseId": "tooluse_1", "name": "add", "input": {"a": 2, "b": 3}}}]}
    assert result == {"role": "user", "content": [{"toolResult": {
        "toolUseId": "tooluse_1", "content": [{"text": "5"}], "status": "success"}}]}
    assert [s.kind for s in await steps_of(aws.store, run_id)] == ["model", "tool", "model"]
    [(_, mail)] = await bot_mails(aws.mailbox)
    assert "It is 5." in plain(mail)


async def test_throttling_is_retried_after_the_wait_the_server_asks_for(
    aws: Harness, fake_bedrock: FakeBedrock
) -> None:
    fake_bedrock.script([error(429, "Too many requests", kind="ThrottlingException", retry_after="7"),
                         error(503, "busy", kind="ServiceUnavailableException"), text("Fine.")])
    provider = aws.provider()
    answer = await provider.complete([Message(role="user", content="hi")], [])
    await provider.aclose()
    assert answer.text == "Fine." and answer.usage.input_tokens == 11 and answer.usage.output_tokens == 7
    assert answer.finish_reason == "end_turn" and answer.model == MODEL
    assert aws.sleeps[0] == 7.0 and len(aws.sleeps) == 2 and len(fake_bedrock.requests) == 3


async def test_a_refusal_quotes_bedrocks_message(aws: Harness, fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.script([error(403, "The security token included in the request is invalid.",
                               kind="AccessDeniedException")])
    provider = aws.provider()
    with pytest.raises(ProviderError) as caught:
        await provider.complete([Message(role="user", content="hi")], [])
    await provider.aclose()
    assert "security token included in the request is invalid" in caught.value.message
    assert "`pizzamail keys set bedrock`" in (caught.value.hint or "")


async def test_a_too_long_input_is_trimmed_and_retried_once(aws: Harness, fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.script([error(400, "Input is too long for requested model.", kind="ValidationException"),
                         text("Short enough now.")])
    old = [Message(role="user" if i % 2 == 0 else "assistant", content=f"old {i} " + "x" * 3000)
           for i in range(10)]
    provider = aws.provider()
    answer = await provider.complete([Message(role="system", content="S"), *old,
                                      Message(role="user", content="The task.")], [])
    await provider.aclose()
    assert answer.text == "Short enough now."
    first, second = fake_bedrock.requests
    assert len(second.messages) < len(first.messages)
    assert second.messages[-1] == {"role": "user", "content": [{"text": "The task."}]}


def test_wire_format_merges_tool_results_and_flags_errors() -> None:
    calls = [ToolCall(id="a", name="x"), ToolCall(id="b", name="y")]
    body = request_body([
        Message(role="system", content="S1"), Message(role="system", content="S2"),
        Message(role="user", content="task"), Message(role="assistant", tool_calls=calls),
        Message(role="tool", tool_call_id="a", content="ok"),
        Message(role="tool", tool_call_id="b", content="boom", is_error=True),
    ], [ToolSpec(name="x", description="X")])
    assert body["system"] == [{"text": "S1"}, {"text": "S2"}] and body["inferenceConfig"]["maxTokens"] == 4096
    assert body["messages"][1]["content"] == [
        {"toolUse": {"toolUseId": "a", "name": "x", "input": {}}},
        {"toolUse": {"toolUseId": "b", "name": "y", "input": {}}}]
    assert body["messages"][-1] == {"role": "user", "content": [
        {"toolResult": {"toolUseId": "a", "content": [{"text": "ok"}], "status": "success"}},
        {"toolResult": {"toolUseId": "b", "content": [{"text": "boom"}], "status": "error"}}]}


def test_the_implicit_bedrock_section_uses_the_region(monkeypatch: pytest.MonkeyPatch,
                                                      secrets: SecretStore) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "from-env")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    config = Config()
    config = replace(config, agent=replace(config.agent, model=f"bedrock:{MODEL}"))
    provider = provider_for(config, secrets)
    assert isinstance(provider, BedrockProvider)
    assert provider.base_url == "https://bedrock-runtime.eu-west-3.amazonaws.com"
    assert provider.headers == {"Authorization": "Bearer from-env"} and provider.auth is None


def test_no_key_and_no_botocore_names_every_fix(monkeypatch: pytest.MonkeyPatch,
                                                secrets: SecretStore) -> None:
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.setattr(bedrock, "botocore_available", lambda: False)
    config = Config()
    config = replace(config, agent=replace(config.agent, model=f"bedrock:{MODEL}"))
    with pytest.raises(ProviderNotConfigured) as caught:
        provider_for(config, secrets)
    hint = caught.value.hint or ""
    assert "pizzamail keys set bedrock" in hint and "$AWS_BEARER_TOKEN_BEDROCK" in hint
    assert "pip install 'pizzamail[bedrock]'" in hint


def test_sigv4_signs_with_aws_credentials(monkeypatch: pytest.MonkeyPatch, secrets: SecretStore) -> None:
    pytest.importorskip("botocore", reason="SigV4 needs the optional extra pizzamail[bedrock]")
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    config = Config()
    config = replace(config, agent=replace(config.agent, model=f"bedrock:{MODEL}"),
                     providers={"bedrock": ProviderSettings(kind="bedrock", base_url="", region="us-west-2",
                                                            key_env="AWS_BEARER_TOKEN_BEDROCK",
                                                            key_required=False)})
    provider = provider_for(config, secrets)
    assert isinstance(provider, BedrockProvider) and provider.auth is not None and provider.headers == {}
    request = httpx.Request("POST", provider.base_url + "/" + bedrock.converse_path(MODEL),
                            json={"messages": []})
    signed = next(provider.auth.sync_auth_flow(request))
    authorization = signed.headers["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-west-2/bedrock/aws4_request" in authorization and "Signature=" in authorization
    assert signed.headers["x-amz-security-token"] == "session-token" and signed.headers["x-amz-date"]


def test_ollama_needs_no_section_and_no_key(secrets: SecretStore) -> None:
    config = Config()
    config = replace(config, agent=replace(config.agent, model="ollama:llama3.2"))
    provider = provider_for(config, secrets)
    assert isinstance(provider, OpenAIProvider)
    assert provider.base_url == "http://127.0.0.1:11434/v1" and provider.model == "llama3.2"
    assert provider.api_key == ""
