"""Anthropic Messages (``POST {base_url}/v1/messages``) over the shared HTTP mechanism.

Differences from Chat Completions that this module translates: system messages go to the top-level
``system`` field; an assistant's tool calls are ``tool_use`` content blocks whose ``input`` is an
object (not a JSON string); tool results are ``tool_result`` blocks (with ``is_error``) inside a
*user* message, consecutive results merged into one; ``max_tokens`` is required.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, ClassVar

from pizzamail.errors import ProviderError
from pizzamail.providers.blocks import merge_tool_results, tool_call
from pizzamail.providers.http import HttpProvider, complete_fitting, malformed
from pizzamail.providers.types import Message, Picture, Response, ToolCall, ToolSpec, Usage

API_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096


def headers(api_key: str) -> dict[str, str]:
    """The headers every Anthropic request carries."""
    return {"x-api-key": api_key, "anthropic-version": API_VERSION}


@dataclass(kw_only=True)
class AnthropicProvider(HttpProvider):
    """One Anthropic-compatible endpoint and model. Close it with ``aclose``."""

    base_url: str = DEFAULT_BASE_URL
    api_key: str
    max_tokens: int = DEFAULT_MAX_TOKENS

    wire: ClassVar[str] = "Anthropic Messages"

    def request_headers(self) -> dict[str, str]:
        return headers(self.api_key)

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Response:
        async def send(fitting: list[Message]) -> Response:
            body = request_body(self.model, fitting, tools, max_tokens=self.max_tokens)
            return parse_response(await self.endpoint().post("v1/messages", body), fallback_model=self.model)

        return await complete_fitting(self.shown(messages), send)


# -- wire format -----------------------------------------------------------------------------


def request_body(model: str, messages: list[Message], tools: list[ToolSpec], *,
                 max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                            "messages": wire_messages([m for m in messages if m.role != "system"])}
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    if system:
        body["system"] = system
    if tools:
        body["tools"] = [wire_tool(t) for t in tools]
    return body


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages in Anthropic's shape."""
    return merge_tool_results(messages, wire_message)


def wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id,
                                 "content": _with_pictures(message) if message.pictures else message.content}
        if message.is_error:
            block["is_error"] = True
        return {"role": "user", "content": [block]}
    if message.role == "assistant" and message.tool_calls:
        text = [{"type": "text", "text": message.content}] if message.content else []
        return {"role": "assistant", "content": [*text, *(wire_tool_use(c) for c in message.tool_calls)]}
    if message.pictures:
        return {"role": message.role, "content": _with_pictures(message)}
    return {"role": message.role, "content": message.content}


def _with_pictures(message: Message) -> list[dict[str, Any]]:
    text = [{"type": "text", "text": message.content}] if message.content else []
    return [*text, *(image_block(p) for p in message.pictures)]


def image_block(picture: Picture) -> dict[str, Any]:
    data = base64.b64encode(picture.data).decode("ascii")
    return {"type": "image", "source": {"type": "base64", "media_type": picture.media_type, "data": data}}


def wire_tool_use(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}


def wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}


def parse_response(data: Any, *, fallback_model: str) -> Response:
    """A Messages answer as a :class:`Response`; anything malformed is a ProviderError."""
    try:
        blocks = list(data["content"])
        usage = data.get("usage") or {}
        return Response(
            text="".join(str(b["text"]) for b in blocks if b.get("type") == "text"),
            tool_calls=[parse_tool_use(b) for b in blocks if b.get("type") == "tool_use"],
            usage=Usage(input_tokens=int(usage.get("input_tokens") or 0),
                        output_tokens=int(usage.get("output_tokens") or 0)),
            model=str(data.get("model") or fallback_model),
            finish_reason=str(data.get("stop_reason") or ""),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise _malformed(f"{type(exc).__name__}: {exc}") from None


def parse_tool_use(block: dict[str, Any]) -> ToolCall:
    return tool_call(block["id"], block["name"], block.get("input"))


def _malformed(why: str) -> ProviderError:
    return malformed("Anthropic Messages", why)
