"""What the content-block wire formats (Anthropic Messages, Bedrock Converse) share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pizzamail.providers.types import Message, ToolCall

Wire = Callable[[Message], dict[str, Any]]


def merge_tool_results(messages: list[Message], wire_message: Wire) -> list[dict[str, Any]]:
    """Messages on the wire, consecutive tool results merged into one user message (both APIs
    want every result of one assistant turn in a single message)."""
    out: list[dict[str, Any]] = []
    previous: str | None = None
    for message in messages:
        wire = wire_message(message)
        if message.role == "tool" and previous == "tool":
            out[-1]["content"].extend(wire["content"])
        else:
            out.append(wire)
        previous = message.role
    return out


def tool_call(call_id: object, name: object, arguments: object) -> ToolCall:
    """A tool call whose input arrived as a JSON value: anything but an object is the model's
    mistake, reported back to it instead of running the tool."""
    error = None
    if not isinstance(arguments, dict):
        error = f"the tool input must be a JSON object, not {type(arguments).__name__}"
        arguments = {}
    return ToolCall(id=str(call_id), name=str(name), arguments=arguments, error=error)
