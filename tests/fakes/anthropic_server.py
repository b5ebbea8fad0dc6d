"""A fake Anthropic Messages server on 127.0.0.1, for tests (the pattern of :mod:`openai_server`).

A real HTTP server in a background thread: the real provider code (httpx, retries, parsing) runs
against it. Each test scripts the answers and reads the recorded requests::

    fake_anthropic.script([tool_use("add", {"a": 2}), text("done")])
    ...
    assert fake_anthropic.requests[1].body["messages"][-1]["content"][0]["type"] == "tool_result"

``GET /v1/models`` answers a fixed list (for ``pizzamail models --check``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from tests.fakes.scripted import Recorded, Scripted, ScriptedServer

__all__ = ["FakeAnthropic", "Recorded", "Scripted", "error", "text", "tool_use"]

# -- script items ------------------------------------------------------------------------------


def text(content: str, *, input_tokens: int = 11, output_tokens: int = 7) -> Scripted:
    """A final answer."""
    return _message([{"type": "text", "text": content}], "end_turn", input_tokens, output_tokens)


def tool_use(name: str, arguments: dict[str, Any], *, call_id: str = "toolu_1",
             content: str | None = None) -> Scripted:
    """One tool call, optionally after some text."""
    lead = [{"type": "text", "text": content}] if content else []
    return _message([*lead, {"type": "tool_use", "id": call_id, "name": name, "input": arguments}],
                    "tool_use", 13, 5)


def error(status: int, message: str = "scripted failure", *, kind: str = "api_error",
          retry_after: str | None = None) -> Scripted:
    """An HTTP error in Anthropic's error shape, optionally with Retry-After (seconds)."""
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Scripted(status=status, headers=headers,
                    payload={"type": "error", "error": {"type": kind, "message": message}})


def _message(content: list[dict[str, Any]], stop_reason: str, input_tokens: int,
             output_tokens: int) -> Scripted:
    return Scripted(payload={
        "id": "msg_fake", "type": "message", "role": "assistant", "model": None, "content": content,
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })


# -- the server --------------------------------------------------------------------------------


class FakeAnthropic(ScriptedServer):
    """Start with ``with FakeAnthropic() as fake:`` (or the ``fake_anthropic`` fixture)."""

    name = "fake_anthropic"
    route = r"/v1/messages"
    #: for ``pizzamail models --check``
    gets: ClassVar[dict[str, dict[str, Any]]] = {"/v1/models": {
        "data": [{"type": "model", "id": "claude-fake-1", "display_name": "Claude Fake"}], "has_more": False}}

    def error(self, status: int, message: str) -> Scripted:
        return error(status, message, kind="not_found_error")


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A started fake Messages server, stopped after the test."""
    with FakeAnthropic() as fake:
        yield fake
