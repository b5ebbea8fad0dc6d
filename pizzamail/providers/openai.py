"""OpenAI-compatible Chat Completions (``POST {base_url}/chat/completions``) over httpx.

Works with OpenAI and with the many servers that speak the same format (vLLM, llama.cpp, Ollama,
LiteLLM …). Retries 429, 5xx and network errors with exponential backoff and jitter, honouring a
``Retry-After`` given in seconds. Tool-call arguments arrive as a JSON *string* that may be invalid;
such a call is passed on with ``ToolCall.error`` set so the model is told, instead of crashing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from pizzamail.errors import ProviderError
from pizzamail.providers.types import Message, Response, ToolCall, ToolSpec, Usage

log = logging.getLogger("pizzamail.providers.openai")

Sleep = Callable[[float], Awaitable[None]]

#: never wait longer than this between two tries, whatever Retry-After says
MAX_WAIT = 120.0
#: the first backoff; doubled on each retry
BASE_WAIT = 1.0
_RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))


@dataclass(kw_only=True)
class OpenAIProvider:
    """One OpenAI-compatible endpoint and model. Close it with ``aclose`` (or ``async with``)."""

    name: str
    """the provider's name in config (``openai``, or a user-defined one such as ``local``)"""
    base_url: str
    model: str
    api_key: str
    timeout: float = 120.0
    max_retries: int = 4
    sleep: Sleep = asyncio.sleep
    """injectable so tests check the wait without waiting"""
    supports_tools: bool = True
    _client: httpx.AsyncClient | None = field(default=None, repr=False)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.base_url.rstrip("/") + "/",
                headers={"Authorization": f"Bearer {self.api_key}"} if self.api_key else {},
                timeout=httpx.Timeout(self.timeout),
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> OpenAIProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Response:
        payload = request_body(self.model, messages, tools)
        data = await self._post(payload)
        return parse_response(data, fallback_model=self.model)

    async def _post(self, payload: dict[str, Any]) -> Any:
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                reply = await self._http().post("chat/completions", json=payload)
            except httpx.TransportError as exc:
                problem = f"could not reach {self.base_url} ({type(exc).__name__})"
                if last:
                    raise self._gave_up(problem, attempts) from None
                await self._wait(attempt, None, problem)
                continue
            if reply.status_code in _RETRY_STATUSES and not last:
                await self._wait(attempt, reply.headers.get("retry-after"), f"HTTP {reply.status_code}")
                continue
            if reply.status_code in _RETRY_STATUSES:
                raise self._gave_up(_status_problem(reply), attempts)
            if reply.status_code >= 400:
                raise self._refused(reply)
            return _json(reply)
        raise AssertionError("unreachable")  # the loop always returns or raises

    async def _wait(self, attempt: int, retry_after: str | None, problem: str) -> None:
        delay = backoff(attempt, retry_after)
        log.warning("provider %s: %s; retry %d/%d in %.1fs", self.name, problem, attempt + 1,
                    self.max_retries, delay)
        await self.sleep(delay)

    def _gave_up(self, problem: str, attempts: int) -> ProviderError:
        return ProviderError(
            f"the model provider {self.name!r} failed {attempts} times in a row: {problem}",
            retryable=True,
            hint="the provider may be down or rate-limiting; reply to this mail to try again later",
        )

    def _refused(self, reply: httpx.Response) -> ProviderError:
        hint = {
            401: f"check the API key: `pizzamail keys set {self.name}`",
            403: f"check the API key and that it may use model {self.model!r}",
            404: f"check `[agent] model` and `[providers.{self.name}] base_url` in config.toml",
        }.get(reply.status_code)
        return ProviderError(
            f"the model provider {self.name!r} refused the request: {_status_problem(reply)}", hint=hint
        )


def backoff(attempt: int, retry_after: str | None, *, jitter: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry number ``attempt + 1``: Retry-After when given, else 2^n with jitter."""
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), MAX_WAIT)
        except ValueError:
            pass  # an HTTP-date: rare from model APIs; fall back to our own backoff
    # "equal jitter": half fixed, half random, so parallel runs spread out but still back off
    ceiling = min(BASE_WAIT * (1 << min(attempt, 16)), MAX_WAIT)
    return ceiling / 2 + jitter() * ceiling / 2


def _status_problem(reply: httpx.Response) -> str:
    detail = ""
    try:
        error = reply.json().get("error")
        detail = str(error.get("message") if isinstance(error, dict) else error or "")
    except (ValueError, AttributeError):
        detail = reply.text
    detail = " ".join(detail.split())[:300]
    return f"HTTP {reply.status_code}" + (f": {detail}" if detail else "")


def _json(reply: httpx.Response) -> Any:
    try:
        return reply.json()
    except ValueError:
        raise _malformed("the body is not JSON") from None


def _malformed(why: str) -> ProviderError:
    return ProviderError(
        f"the model provider sent an answer that is not valid Chat Completions JSON ({why})",
        hint="check that `[providers.NAME] base_url` points at an OpenAI-compatible endpoint",
    )


# -- wire format -----------------------------------------------------------------------------


def request_body(model: str, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [wire_message(m) for m in messages]}
    if tools:  # some compatible servers reject an empty list
        body["tools"] = [wire_tool(t) for t in tools]
        body["tool_choice"] = "auto"
    return body


def wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        # Chat Completions has no error flag on tool results: say it in the text
        content = f"ERROR: {message.content}" if message.is_error else message.content
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if message.role == "assistant" and message.tool_calls:
        return {"role": "assistant", "content": message.content or None,
                "tool_calls": [wire_tool_call(c) for c in message.tool_calls]}
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
