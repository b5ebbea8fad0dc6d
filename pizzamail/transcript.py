"""A run's transcript: its checkpointed steps, each turning itself into a stored row and into model
messages.

A run's conversation is the thread history followed by its steps, so resuming after a crash is
replaying the step rows (nothing else about a run lives only in memory).

Below tools, approvals and the runner (it needs only the provider's message types): tools return a
:class:`ToolResult`, the runner drives a transcript, approvals settles its held calls and shows its
evidence; none of them needs another to read one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pizzamail.errors import RunError
from pizzamail.providers.types import Message, Picture, Response, ToolCall
from pizzamail.store.blobs import digest_of
from pizzamail.store.runs import Step

#: reads a picture's bytes by the digest its checkpoint names (None: it is no longer kept)
Load = Callable[[str], bytes | None]


@dataclass(frozen=True, kw_only=True)
class ToolFile:
    """A file a tool gave back (an MCP image, audio clip or resource): it goes out with the run's
    reply, byte for byte, under ``name``."""

    name: str
    media_type: str
    data: bytes


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """What a tool call gave back; ``is_error``: a failure the model can fix (it reads the text).
    ``pictures`` are shown to a model with vision; ``files`` are attached to the reply."""

    text: str
    is_error: bool = False
    pictures: tuple[Picture, ...] = ()
    files: tuple[ToolFile, ...] = ()


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
        """The pictures by digest (the toolbox kept their bytes in the run's workspace when the call
        returned, and its files there too: only the text that names them is kept here)."""
        data: dict[str, Any] = {"call_id": self.call_id, "name": self.name, "text": self.result.text,
                                "is_error": self.result.is_error}
        if self.result.pictures:
            data["pictures"] = [{"media_type": p.media_type, "about": p.about, "digest": digest_of(p.data)}
                                for p in self.result.pictures]
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any], load: Load) -> ToolStep:
        """``load`` reads the pictures' bytes; one no longer kept is named in the text instead."""
        text, pictures = str(data["text"]), []
        for named in data.get("pictures") or []:
            found = load(str(named["digest"]))
            if found is None:
                text += f"\n[image {named['about']}; no longer kept, so it cannot be shown again]"
            else:
                pictures.append(Picture(media_type=str(named["media_type"]), about=str(named["about"]),
                                        data=found))
        result = ToolResult(text=text, is_error=bool(data["is_error"]), pictures=tuple(pictures))
        return cls(call_id=str(data["call_id"]), name=str(data["name"]), result=result)

    def messages(self) -> list[Message]:
        return [Message(role="tool", content=self.result.text, tool_call_id=self.call_id,
                        is_error=self.result.is_error, pictures=self.result.pictures)]


@dataclass(frozen=True, kw_only=True)
class HeldStep:
    """A call the policy holds for approval: recorded (with its held action), never run here.

    The run stops at it. Until a step with this ``call_id``'s result follows (the approval's
    outcome), a resumed run stops here again instead of calling anything.
    """

    kind: ClassVar[str] = "held"
    call_id: str
    name: str
    """the name the model called"""
    source: str
    """``builtin`` or the MCP server"""
    tool: str
    """the tool's own name at its source"""
    arguments: dict[str, Any]
    reason: str
    """what the model said alongside the call (may be empty)"""

    def to_data(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "name": self.name, "source": self.source, "tool": self.tool,
                "arguments": self.arguments, "reason": self.reason}

    def messages(self) -> list[Message]:
        return []  # the result message comes with the decision

    @property
    def label(self) -> str:
        return self.name if self.source == "builtin" else f"{self.source}: {self.tool}"


@dataclass(frozen=True, kw_only=True)
class DelegateStep:
    """A ``delegate`` call turned into a child run (recorded with it, in one transaction).

    The run waits for the child; the child's end comes back as this call's :class:`ToolStep`.
    """

    kind: ClassVar[str] = "delegate"
    call_id: str
    name: str
    agent: str
    """the specialist's address"""
    child: int
    """the child run"""

    def to_data(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "name": self.name, "agent": self.agent, "child": self.child}

    def messages(self) -> list[Message]:
        return []  # the result message comes with the child's end


AgentStep = ModelStep | ToolStep | HeldStep | DelegateStep


def _unread(digest: str) -> bytes | None:
    return None


def step_from_row(row: Step, load: Load = _unread) -> AgentStep:
    """The step a checkpoint row holds. ``load`` reads the pictures it names (blocking: call it in a
    worker thread); a reader of a run's end alone needs none."""
    try:
        if row.kind == ModelStep.kind:
            return ModelStep(response=Response.from_data(row.data))
        if row.kind == ToolStep.kind:
            return ToolStep.from_data(row.data, load)
        if row.kind == HeldStep.kind:
            data = row.data
            return HeldStep(call_id=str(data["call_id"]), name=str(data["name"]),
                            source=str(data["source"]), tool=str(data["tool"]),
                            arguments=dict(data["arguments"]), reason=str(data["reason"]))
        if row.kind == DelegateStep.kind:
            data = row.data
            return DelegateStep(call_id=str(data["call_id"]), name=str(data["name"]),
                                agent=str(data["agent"]), child=int(data["child"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise RunError(f"checkpoint {row.seq} of this run is unreadable ({exc!r})") from None
    raise RunError(f"checkpoint {row.seq} has an unknown kind {row.kind!r}")


@dataclass(kw_only=True)
class Transcript:
    base: list[Message]
    """the system prompt and the thread history"""
    steps: list[AgentStep] = field(default_factory=list)
    next_seq: int = 0

    def messages(self) -> list[Message]:
        return [*self.base, *(m for s in self.steps for m in s.messages())]

    def model_calls(self) -> int:
        return sum(isinstance(s, ModelStep) for s in self.steps)

    def last_model_step(self) -> ModelStep | None:
        return next((s for s in reversed(self.steps) if isinstance(s, ModelStep)), None)

    def final_answer(self) -> Response | None:
        last = self.steps[-1] if self.steps else None
        if isinstance(last, ModelStep) and not last.response.tool_calls:
            return last.response
        return None

    def pending_calls(self) -> list[ToolCall]:
        """Tool calls of the latest model answer that have no recorded result yet."""
        last = self.last_model_step()
        if last is None:
            return []
        taken = {s.call_id for s in self.steps if isinstance(s, ToolStep | DelegateStep)}
        return [c for c in last.response.tool_calls if c.id not in taken]

    def waiting_on(self) -> HeldStep | None:
        """A held call with no result yet: the run waits for its decision."""
        answered = {s.call_id for s in self.steps if isinstance(s, ToolStep)}
        return next((s for s in self.steps if isinstance(s, HeldStep) and s.call_id not in answered),
                    None)

    def delegated(self) -> list[DelegateStep]:
        """``delegate`` calls whose child has not ended yet (no result recorded): the run waits."""
        answered = {s.call_id for s in self.steps if isinstance(s, ToolStep)}
        return [s for s in self.steps if isinstance(s, DelegateStep) and s.call_id not in answered]

    def children(self) -> int:
        """Child runs this run has started."""
        return sum(isinstance(s, DelegateStep) for s in self.steps)
