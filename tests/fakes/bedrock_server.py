"""A fake Amazon Bedrock Converse server on 127.0.0.1, for tests (the pattern of :mod:`anthropic_server`).

A real HTTP server in a background thread: the real provider code (httpx, retries, parsing) runs
against it. Each test scripts the answers and reads the recorded requests::

    fake_bedrock.script([tool_use("add", {"a": 2}), text("done")])
    ...
    assert "toolResult" in fake_bedrock.requests[1].messages[-1]["content"][0]

Only ``POST /model/{modelId}/converse`` is served.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.scripted import Recorded, Scripted, ScriptedServer

__all__ = ["FakeBedrock", "Recorded", "Scripted", "error", "text", "tool_use"]

# -- script items ------------------------------------------------------------------------------


def text(content: str, *, input_tokens: int = 11, output_tokens: int = 7) -> Scripted:
    """A final answer."""
    return _message([{"text": content}], "end_turn", input_tokens, output_tokens)


def tool_use(name: str, arguments: dict[str, Any], *, call_id: str = "tooluse_1",
             content: str | None = None) -> Scripted:
    """One tool call, optionally after some text."""
    lead = [{"text": content}] if content else []
    return _message([*lead, {"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}}],
                    "tool_use", 13, 5)


def error(status: int, message: str = "scripted failure", *, kind: str = "InternalServerException",
          retry_after: str | None = None) -> Scripted:
    """An HTTP error in Bedrock's shape (``x-amzn-ErrorType`` + ``{"message"}``)."""
    headers = {"x-amzn-ErrorType": kind}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return Scripted(status=status, headers=headers, payload={"message": message})


def _message(content: list[dict[str, Any]], stop_reason: str, input_tokens: int,
             output_tokens: int) -> Scripted:
    return Scripted(payload={
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": input_tokens, "outputTokens": output_tokens,
                  "totalTokens": input_tokens + output_tokens},
        "metrics": {"latencyMs": 12},
    })


# -- the server --------------------------------------------------------------------------------


class FakeBedrock(ScriptedServer):
    """Start with ``with FakeBedrock() as fake:`` (or the ``fake_bedrock`` fixture)."""

    name = "fake_bedrock"
    route = r"/model/[^/]+/converse"

    def error(self, status: int, message: str) -> Scripted:
        return error(status, message, kind="ResourceNotFoundException")


@pytest.fixture
def fake_bedrock() -> Iterator[FakeBedrock]:
    """A started fake Converse server, stopped after the test."""
    with FakeBedrock() as fake:
        yield fake
