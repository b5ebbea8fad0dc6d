"""A fake OpenAI-compatible Chat Completions server on 127.0.0.1, for tests.

It is a real HTTP server in a background thread, so the real provider code (httpx, retries, parsing)
runs against it, and another process (``pizzamail serve`` in an end-to-end test) can use it too via
``[providers.openai] base_url = fake.base_url``. Each test scripts the answers::

    fake_openai.script([tool_call("lookup", {"q": "x"}), text("done")])
    ...
    assert fake_openai.requests[1].messages[-1]["role"] == "tool"

Register the fixture for every test with ``pytest_plugins = ["tests.fakes.openai_server"]`` in
``tests/conftest.py``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, ClassVar

import pytest

from tests.fakes.scripted import Recorded, Scripted, ScriptedServer

__all__ = ["FakeOpenAI", "Recorded", "Scripted", "error", "gated", "malformed", "slow", "text",
           "tool_call", "tool_calls"]

# -- script items ------------------------------------------------------------------------------


def text(content: str, *, finish_reason: str = "stop", prompt_tokens: int = 11,
         completion_tokens: int = 7) -> Scripted:
    """A final answer."""
    return _completion({"role": "assistant", "content": content}, finish_reason,
                       prompt_tokens, completion_tokens)


def tool_call(name: str, arguments: dict[str, Any] | str, *, call_id: str = "call_1",
              content: str | None = None) -> Scripted:
    """One tool call; a str ``arguments`` is sent verbatim (for invalid-JSON tests)."""
    return tool_calls([(call_id, name, arguments)], content=content)


def tool_calls(calls: list[tuple[str, str, dict[str, Any] | str]], *,
               content: str | None = None) -> Scripted:
    wire = [{"id": cid, "type": "function", "function": {
        "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for cid, name, args in calls]
    return _completion({"role": "assistant", "content": content, "tool_calls": wire},
                       "tool_calls", 13, 5)


def error(status: int, message: str = "scripted failure", *, retry_after: str | None = None) -> Scripted:
    """An HTTP error in OpenAI's error shape, optionally with Retry-After (seconds)."""
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Scripted(status=status, headers=headers,
                    payload={"error": {"message": message, "type": "scripted", "code": None}})


def malformed(body: bytes = b'{"choices": [ {"message": ') -> Scripted:
    """A 200 whose body is not valid JSON."""
    return Scripted(raw=body)


def slow(item: Scripted, seconds: float) -> Scripted:
    return replace(item, delay=seconds)


def gated(item: Scripted, gate: threading.Event) -> Scripted:
    return replace(item, gate=gate)


def _completion(message: dict[str, Any], finish_reason: str, prompt: int, completion: int) -> Scripted:
    return Scripted(payload={
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": None,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    })


# -- the server --------------------------------------------------------------------------------


class FakeOpenAI(ScriptedServer):
    """Start with ``with FakeOpenAI() as fake:`` (or the ``fake_openai`` fixture)."""

    name = "fake_openai"
    route = "/v1/chat/completions"
    url_suffix = "/v1"
    #: for ``pizzamail models --check``
    gets: ClassVar[dict[str, dict[str, Any]]] = {
        "/v1/models": {"object": "list", "data": [{"id": "gpt-fake", "object": "model"}]}}

    def error(self, status: int, message: str) -> Scripted:
        return error(status, message)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started fake Chat Completions server, stopped after the test."""
    with FakeOpenAI() as fake:
        yield fake
