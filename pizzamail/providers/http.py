"""The one HTTP mechanism behind every remote provider: POST JSON, retry, and say clearly what failed.

:class:`JsonEndpoint` retries 429, 408, 5xx and network errors with exponential backoff and jitter,
honouring a ``Retry-After`` given in seconds, through an injectable ``sleep`` (tests check the wait
without waiting). Other 4xx answers are not retried; 401/403 name ``pizzamail keys set NAME``. A 400
saying the prompt is too long is :class:`ContextTooLong`, which :func:`complete_fitting` answers by
trimming old history once (never the system prompt or the task) and asking again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import httpx

from pizzamail.errors import ProviderError
from pizzamail.providers.context import fit_history, is_context_error
from pizzamail.providers.pictures import for_model
from pizzamail.providers.transport import AiohttpTransport
from pizzamail.providers.types import Message, Response

log = logging.getLogger("pizzamail.providers.http")

Sleep = Callable[[float], Awaitable[None]]

#: never wait longer than this between two tries, whatever Retry-After says
MAX_WAIT = 120.0
#: the first backoff; doubled on each retry
BASE_WAIT = 1.0
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context of every provider's client (httpx's default: the CA bundle, or
    $SSL_CERT_FILE). A new context for each client would load the CA bundle again, tens of
    milliseconds on the event loop."""
    return httpx.create_ssl_context()


def new_client(timeout: float = 5.0) -> httpx.AsyncClient:
    """A client for any provider: each request says where it goes, with which headers and patience.
    A runner keeps one for all its runs (a new client and connection per run cost more CPU than
    the request); close it with ``aclose``. ``timeout`` is for requests that do not give their own.
    Its connections are aiohttp's (:mod:`pizzamail.providers.transport` says why)."""
    return httpx.AsyncClient(transport=AiohttpTransport(tls_context()), timeout=httpx.Timeout(timeout))


class ContextTooLong(ProviderError):
    """The provider said the conversation does not fit its context window (HTTP 400)."""


@dataclass(kw_only=True)
class JsonEndpoint:
    """One provider's HTTP side. Close it with ``aclose``."""

    name: str
    """the provider's name in config, used in messages and hints"""
    base_url: str
    model: str
    headers: dict[str, str] = field(default_factory=dict)
    auth: httpx.Auth | None = None
    """signs each request (Bedrock SigV4); None when the headers carry the key"""
    timeout: float = 120.0
    max_retries: int = 4
    sleep: Sleep = asyncio.sleep
    key_entry: str = ""
    """the keyring entry named in the 401 hint (default: ``name``)"""
    wire: str = "JSON"
    """the wire format's name in error messages (``Chat Completions``, ``Messages``)"""
    shared: httpx.AsyncClient | None = None
    """the runner's one client, whose connections every run reuses (its owner closes it); None: the
    endpoint opens a client of its own"""
    _client: httpx.AsyncClient | None = field(default=None, repr=False)

    def _http(self) -> httpx.AsyncClient:
        if self.shared is not None:
            return self.shared
        if self._client is None:
            self._client = new_client()
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def post(self, path: str, payload: dict[str, Any]) -> Any:
        """The JSON answer to ``payload``, after up to ``max_retries`` retries; else ProviderError."""
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                reply = await self._http().post(
                    f"{self.base_url.rstrip('/')}/{path.lstrip('/')}", json=payload, headers=self.headers,
                    auth=self.auth or httpx.USE_CLIENT_DEFAULT, timeout=httpx.Timeout(self.timeout))
            except httpx.TransportError as exc:
                problem = f"could not reach {self.base_url} ({type(exc).__name__})"
                if last:
                    raise self._gave_up(problem, attempts) from None
                await self._wait(attempt, None, problem)
                continue
            if reply.status_code in RETRY_STATUSES and not last:
                await self._wait(attempt, reply.headers.get("retry-after"), f"HTTP {reply.status_code}")
                continue
            if reply.status_code in RETRY_STATUSES:
                raise self._gave_up(status_problem(reply), attempts)
            if reply.status_code >= 400:
                raise self._refused(reply)
            return json_of(reply, self.wire)
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
        problem = status_problem(reply)
        message = f"the model provider {self.name!r} refused the request: {problem}"
        if reply.status_code == 400 and is_context_error(problem):
            return ContextTooLong(message, hint="the conversation is too long for this model")
        entry = self.key_entry or self.name
        hint = {
            401: f"check the API key: `pizzamail keys set {entry}`",
            403: f"check the API key (`pizzamail keys set {entry}`) and that it may use model {self.model!r}",
            404: f"check `[agent] model` and `[providers.{self.name}] base_url` in config.toml",
        }.get(reply.status_code)
        return ProviderError(message, hint=hint)


@dataclass(kw_only=True)
class HttpProvider:
    """What every HTTP provider has: where it is, how patient it is, and its lazily opened
    :class:`JsonEndpoint`. A provider names its wire format and adds its own credentials."""

    name: str
    """the provider's name in config, used in messages and hints"""
    base_url: str
    model: str
    timeout: float = 120.0
    max_retries: int = 4
    sleep: Sleep = asyncio.sleep
    """injectable so tests check the wait without waiting"""
    key_entry: str = ""
    """the keyring entry named in the 401 hint (default: ``name``)"""
    supports_tools: bool = True
    vision: bool = True
    """the model takes images (``[providers.NAME] vision``); else it reads a line about each"""
    http: httpx.AsyncClient | None = None
    """a client shared with other providers (:attr:`JsonEndpoint.shared`)"""
    _endpoint: JsonEndpoint | None = field(default=None, repr=False)

    #: the wire format's name in error messages
    wire: ClassVar[str] = "JSON"

    def request_headers(self) -> dict[str, str]:
        return {}

    def request_auth(self) -> httpx.Auth | None:
        return None

    def shown(self, messages: list[Message]) -> list[Message]:
        """The messages with the pictures this model is shown (:func:`for_model`)."""
        return for_model(messages, vision=self.vision)

    def endpoint(self) -> JsonEndpoint:
        if self._endpoint is None:
            self._endpoint = JsonEndpoint(
                name=self.name, base_url=self.base_url, model=self.model, headers=self.request_headers(),
                auth=self.request_auth(), timeout=self.timeout, max_retries=self.max_retries,
                sleep=self.sleep, key_entry=self.key_entry, wire=self.wire, shared=self.http,
            )
        return self._endpoint

    async def aclose(self) -> None:
        if self._endpoint is not None:
            await self._endpoint.aclose()
            self._endpoint = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def complete_fitting(
    messages: list[Message], send: Callable[[list[Message]], Awaitable[Response]]
) -> Response:
    """``send(messages)``; on :class:`ContextTooLong`, once more with old history trimmed."""
    try:
        return await send(messages)
    except ContextTooLong:
        shorter = fit_history(messages)
        log.warning("context too long: trimmed the conversation from %d to %d messages and retrying",
                    len(messages), len(shorter))
        return await send(shorter)


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


def status_problem(reply: httpx.Response) -> str:
    """``HTTP 400: <the provider's error message>`` (OpenAI and Anthropic nest it in ``error``,
    Bedrock has a top-level ``message``)."""
    detail = ""
    try:
        body = reply.json()
        error = body.get("error") or body.get("message")
        detail = str(error.get("message") if isinstance(error, dict) else error or "")
    except (ValueError, AttributeError):
        detail = reply.text
    detail = " ".join(detail.split())[:300]
    return f"HTTP {reply.status_code}" + (f": {detail}" if detail else "")


def json_of(reply: httpx.Response, wire: str = "JSON") -> Any:
    try:
        return reply.json()
    except ValueError:
        raise malformed(wire, "the body is not JSON") from None


def malformed(wire: str, why: str) -> ProviderError:
    return ProviderError(
        f"the model provider sent an answer that is not valid {wire} JSON ({why})",
        hint="check that `[providers.NAME] base_url` points at the right kind of endpoint",
    )
