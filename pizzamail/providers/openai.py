"""OpenAI-compatible Chat Completions (``POST {base_url}/chat/completions``) over httpx.

Works with OpenAI and with the many servers that speak the same format (vLLM, llama.cpp, Ollama,
LiteLLM …). HTTP, retries and context trimming live in :mod:`pizzamail.providers.http`. Tool-call
arguments arrive as a JSON *string* that may be invalid; such a call is passed on with
``ToolCall.error`` set so the model is told, instead of crashing.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from pizzamail.errors import ProviderError
from pizzamail.providers.http import (
    MAX_WAIT,
    HttpProvider,
    Sleep,
    backoff,
    complete_fitting,
    malformed,
)
from pizzamail.providers.types import Message, Picture, Response, ToolCall, ToolSpec, Usage

__all__ = ["MAX_WAIT", "OpenAIProvider", "Sleep", "backoff", "parse_response", "request_body", "wire_message",
           "wire_messages"]


@dataclass(kw_only=True)
class OpenAIProvider(HttpProvider):
    """One OpenAI-compatible endpoint and model. Close it with ``aclose`` (or ``async with``)."""

    api_key: str
    """empty for a server that takes no key (then no Authorization header is sent)"""

    wire: ClassVar[str] = "Chat Completions"

    def request_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Response:
        async def send(fitting: list[Message]) -> Response:
            data = await self.endpoint().post("chat/completions", request_body(self.model, fitting, tools))
            return parse_response(data, fallback_model=self.model)

        return await complete_fitting(self.shown(messages), send)


def _malformed(why: str) -> ProviderError:
    return malformed("Chat Completions", why)


# -- wire format -----------------------------------------------------------------------------


def request_body(model: str, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": wire_messages(messages)}
    if tools:  # some compatible servers reject an empty list
        body["tools"] = [wire_tool(t) for t in tools]
        body["tool_choice"] = "auto"
    return body


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages in Chat Completions' shape. A tool message takes text only, so the pictures of a
    turn's tool results follow its last result as one user message."""
    out: list[dict[str, Any]] = []
    pending: list[Picture] = []
    for message in messages:
        if pending and message.role != "tool":
            out.append(pictures_message(pending))
            pending = []
        out.append(wire_message(message))
        if message.role == "tool":
            pending += message.pictures
    if pending:
        out.append(pictures_message(pending))
    return out


def pictures_message(pictures: list[Picture]) -> dict[str, Any]:
    text = {"type": "text", "text": "[pizzamail] The images the tool calls above returned:"}
    return {"role": "user", "content": [text, *(image_part(p) for p in pictures)]}


def image_part(picture: Picture) -> dict[str, Any]:
    data = base64.b64encode(picture.data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{picture.media_type};base64,{data}"}}


def wire_message(message: Message) -> dict[str, Any]:
    """One message; a tool result's pictures are left to :func:`wire_messages`."""
    if message.role == "tool":
        # Chat Completions has no error flag on tool results: say it in the text
        content = f"ERROR: {message.content}" if message.is_error else message.content
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if message.role == "assistant" and message.tool_calls:
        return {"role": "assistant", "content": message.content or None,
                "tool_calls": [wire_tool_call(c) for c in message.tool_calls]}
    if message.pictures:
        text = [{"type": "text", "text": message.content}] if message.content else []
        return {"role": message.role, "content": [*text, *(image_part(p) for p in message.pictures)]}
    return {"role": message.role, "content": message.content}


def wire_tool_call(call: ToolCall) -> dict[str, Any]:
    arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": spec.name, "description": spec.description, "parameters": spec.parameters}}


def parse_response(data: Any, *, fallback_model: str) -> Response:
    """A Chat Completions answer as a :class:`Response`; anything malformed is a ProviderError."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
        calls = [parse_tool_call(c) for c in message.get("tool_calls") or []]
        usage = data.get("usage") or {}
        return Response(
            text=message.get("content") or "",
            tool_calls=calls,
            usage=Usage(input_tokens=int(usage.get("prompt_tokens") or 0),
                        output_tokens=int(usage.get("completion_tokens") or 0)),
            model=str(data.get("model") or fallback_model),
            finish_reason=str(choice.get("finish_reason") or ""),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise _malformed(f"{type(exc).__name__}: {exc}") from None


def parse_tool_call(data: dict[str, Any]) -> ToolCall:
    function = data["function"]
    raw = function.get("arguments")
    raw = "" if raw is None else str(raw)
    arguments, error = parse_arguments(raw)
    return ToolCall(id=str(data["id"]), name=str(function["name"]), arguments=arguments,
                    raw_arguments=raw, error=error)


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """The arguments object, or an error text the model can act on."""
    if not raw.strip():
        return {}, None  # some models send "" for a tool without parameters
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, not {type(value).__name__}"
    return value, None
