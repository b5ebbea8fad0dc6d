"""Provider-neutral model messages, tool calls and responses, and the :class:`Provider` protocol.

Each provider module translates these to and from its wire format; the runner only ever sees these.
``to_data``/``from_data`` give the JSON form stored in checkpoint rows, so a resumed run rebuilds the
exact conversation it had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A tool call the model asked for.

    ``raw_arguments`` is the exact text the model sent (echoed back to it on the next request);
    ``error`` is set when that text was not a JSON object, in which case ``arguments`` is empty and
    the call is answered with an error instead of being run.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    error: str | None = None

    def to_data(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments,
                "raw_arguments": self.raw_arguments, "error": self.error}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=str(data["id"]), name=str(data["name"]), arguments=dict(data["arguments"]),
                   raw_arguments=data.get("raw_arguments"), error=data.get("error"))


@dataclass(frozen=True, kw_only=True)
class Picture:
    """An image shown to the model, already fitted (:func:`pizzamail.media.fit_image`): PNG or JPEG
    bytes within every provider's bounds. ``about`` says what it is in words (name, type, size), for
    a model that cannot see it and for the notes that replace images over the request's limit."""

    media_type: str
    data: bytes
    about: str

    @property
    def format(self) -> str:
        """``png`` or ``jpeg``: the subtype, as Bedrock names formats."""
        return self.media_type.partition("/")[2]


@dataclass(frozen=True, kw_only=True)
class Message:
    """One conversation message. ``tool_call_id`` and ``is_error`` are for role ``tool`` only;
    ``pictures`` go with the text of a user message or a tool result."""

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    is_error: bool = False
    pictures: tuple[Picture, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A tool offered to the model; ``parameters`` is a JSON schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True, kw_only=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class Response:
    """One model answer: text, tool calls, or both."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str = ""

    def to_data(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": [c.to_data() for c in self.tool_calls],
            "usage": {"input_tokens": self.usage.input_tokens,
                      "output_tokens": self.usage.output_tokens},
            "model": self.model,
            "finish_reason": self.finish_reason,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Response:
        usage = data.get("usage") or {}
        return cls(
            text=str(data.get("text") or ""),
            tool_calls=[ToolCall.from_data(c) for c in data.get("tool_calls") or []],
            usage=Usage(input_tokens=int(usage.get("input_tokens", 0)),
                        output_tokens=int(usage.get("output_tokens", 0))),
            model=str(data.get("model") or ""),
            finish_reason=str(data.get("finish_reason") or ""),
        )

    def as_message(self) -> Message:
        return Message(role="assistant", content=self.text, tool_calls=list(self.tool_calls))


class Provider(Protocol):
    """A model behind one method.

    ``complete`` raises :class:`~pizzamail.errors.ProviderError` when the provider fails after its
    own retries. ``aclose`` releases connections; a provider is used for one run and then closed.
    """

    #: whether ``tools`` are passed to the model; when False the runner offers none
    supports_tools: bool
    #: whether the model takes images; when False each one reaches it as a line of text
    vision: bool

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Response: ...

    async def aclose(self) -> None: ...
