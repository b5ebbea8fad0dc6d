"""Checkpointed steps of a run: each turns itself into a stored row and into model messages.

A run's conversation is the thread history followed by its steps, so resuming after a crash is
replaying the step rows (nothing else about a run lives only in memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pizzamail.errors import RunError
from pizzamail.providers.types import Message, Response
from pizzamail.store.runs import Step
from pizzamail.tools import ToolResult


@dataclass(frozen=True, kw_only=True)
class ModelStep:
    """One model answer."""

    kind: ClassVar[str] = "model"
    response: Response

    def to_data(self) -> dict[str, Any]:
        return self.response.to_data()

    def messages(self) -> list[Message]:
        return [self.response.as_message()]


@dataclass(frozen=True, kw_only=True)
class ToolStep:
    """The result of one tool call (errors included: they are part of the conversation)."""

    kind: ClassVar[str] = "tool"
    call_id: str
    name: str
    result: ToolResult

    def to_data(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "name": self.name, "text": self.result.text,
                "is_error": self.result.is_error}

    def messages(self) -> list[Message]:
        return [Message(role="tool", content=self.result.text, tool_call_id=self.call_id,
                        is_error=self.result.is_error)]


AgentStep = ModelStep | ToolStep


def step_from_row(row: Step) -> AgentStep:
    try:
        if row.kind == ModelStep.kind:
            return ModelStep(response=Response.from_data(row.data))
        if row.kind == ToolStep.kind:
            data = row.data
            result = ToolResult(text=str(data["text"]), is_error=bool(data["is_error"]))
            return ToolStep(call_id=str(data["call_id"]), name=str(data["name"]), result=result)
    except (KeyError, TypeError, ValueError) as exc:
        raise RunError(f"checkpoint {row.seq} of this run is unreadable ({exc!r})") from None
    raise RunError(f"checkpoint {row.seq} has an unknown kind {row.kind!r}")
