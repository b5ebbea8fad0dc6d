"""MCP servers: one supervised connection per enabled server, whose tools are offered to runs.

Each connection lives in its own task, because the MCP client's ``async with`` must be entered and
left by one task; runner workers call tools through it from theirs. A server that fails to start
(or dies) is reported and started again after a growing pause, and the runner goes on without it.
Every call has a timeout: a call that takes longer is an error result for the model, as is a server
that dies during a call (the call's effect is then unknown, and the result says so).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client._transport import Transport
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT, Implementation
from mcp.types import Tool as McpToolDefinition

from pizzamail import __version__
from pizzamail.config import McpServerSettings
from pizzamail.errors import PizzamailError
from pizzamail.providers.types import ToolSpec
from pizzamail.secrets import SecretStore
from pizzamail.tools import Offered, ToolResult
from pizzamail.tools.expand import expand_all
from pizzamail.tools.mcp_results import tool_result
from pizzamail.tools.names import exposed_name
from pizzamail.tools.oauth import (
    Callback,
    KeyringTokens,
    login_needed,
    oauth_provider,
    secret_name,
    serving_provider,
)
from pizzamail.tools.policy import Policy, effective, from_annotations

log = logging.getLogger("pizzamail.mcp")

CLIENT_INFO = Implementation(name="pizzamail", version=__version__)
#: pages of tools/list followed at most (a server that keeps sending cursors must not hang us)
MAX_PAGES = 100


def describe(exc: BaseException) -> str:
    """One line for a failure: the innermost cause of an exception group, with its type."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, PizzamailError):
        return exc.message + (f" ({exc.hint})" if exc.hint else "")
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def list_all_tools(client: Client) -> list[McpToolDefinition]:
    """Every tool, following ``next_cursor`` page by page."""
    tools: list[McpToolDefinition] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    log.warning("a server listed more than %d pages of tools; the rest are ignored", MAX_PAGES)
    return tools


@dataclass(kw_only=True)
class McpConnection:
    """One configured server, started and restarted by its own task."""

    name: str
    settings: McpServerSettings
    startup_timeout: float = 20.0
    retry_initial: float = 5.0
    retry_max: float = 300.0
    secrets: SecretStore | None = None
    log_dir: Path | None = None
    """stdio servers' stderr goes to ``mcp-NAME.log`` here (default: our stderr)"""
    cwd: Path | None = None
    """where stdio servers start when ``cwd`` is not set"""
    target: Any = None
    """an in-process MCP server object to talk to instead of ``settings`` (fast tests)"""
    status: str = "stopped"
    """stopped, starting, ready or failed"""
    error: str | None = None
    tools: list[McpToolDefinition] = field(default_factory=list)
    failures: int = 0
    client: Client | None = field(default=None, repr=False)
    first_outcome: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _stop: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _reset: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    def start(self) -> None:
        self._stop.clear()
        self._task = asyncio.create_task(self._supervise(), name=f"pizzamail-mcp-{self.name}")

    async def stop(self) -> None:
        self._stop.set()
        self._reset.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self.status, self.client = "stopped", None

    # -- supervision ---------------------------------------------------------------------------

    async def _supervise(self) -> None:
        delay = self.retry_initial
        while not self._stop.is_set():
            was_ready = await self._attempt()
            self.first_outcome.set()
            if self._stop.is_set():
                return
            delay = self.retry_initial if was_ready else delay
            log.info("MCP server %s: trying again in %.0f s", self.name, delay)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
            delay = min(delay * 2, self.retry_max)

    async def _attempt(self) -> bool:
        """One life of the server: start, serve until reset or stop. True if it got ready."""
        self._reset.clear()
        self.status = "starting"
        ready = asyncio.Event()
        session = asyncio.create_task(self._session(ready), name=f"pizzamail-mcp-{self.name}-session")
        if not await self._started(session, ready):
            return False
        self.first_outcome.set()
        try:
            await session
        except Exception as exc:
            if self.status == "ready":  # else the failure that ended it is already recorded
                self._failed(f"stopped: {describe(exc)}")
        return True

    async def _started(self, session: asyncio.Task[None], ready: asyncio.Event) -> bool:
        waiters = [asyncio.create_task(ready.wait()), asyncio.create_task(self._stop.wait())]
        try:
            await asyncio.wait([session, *waiters], timeout=self.startup_timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        if ready.is_set():
            return True
        if session.done():
            exc = session.exception()
            self._failed(f"failed to start: {describe(exc)}" if exc else "exited while starting")
            return False
        session.cancel()
        await asyncio.gather(session, return_exceptions=True)
        if not self._stop.is_set():
            self._failed(f"did not start within {self.startup_timeout:g} s")
        return False

    def _failed(self, reason: str) -> None:
        self.status, self.error, self.client, self.tools = "failed", reason, None, []
        self.failures += 1
        log.warning("MCP server %s %s", self.name, reason)

    async def _session(self, ready: asyncio.Event) -> None:
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(self._client(stack))
            tools = await list_all_tools(client)
            self.client, self.tools, self.status, self.error = client, tools, "ready", None
            log.info("MCP server %s ready with %d tool(s)", self.name, len(tools))
            ready.set()
            await self._reset.wait()
            self.client = None

    def _client(self, stack: AsyncExitStack) -> Client:
        target = self.target if self.target is not None else self.transport(stack, self._oauth())
        return Client(target, client_info=CLIENT_INFO,
                      read_timeout_seconds=self.settings.timeout)

    def transport(self, stack: AsyncExitStack, auth: httpx2.Auth | None) -> Transport:
        s, key = self.settings, f"mcp.servers.{self.name}"
        if s.url:
            headers = expand_all(s.headers, key=f"{key}.headers", secrets=self.secrets)
            if s.sse:
                return sse_client(s.url, headers=headers, timeout=30.0, auth=auth)
            # we own this client, so the stack closes it after the MCP session has ended
            http = httpx2.AsyncClient(headers=headers, auth=auth, timeout=httpx2.Timeout(30.0, read=300.0))
            stack.push_async_callback(http.aclose)
            return streamable_http_client(s.url, http_client=http)
        env = expand_all(s.env, key=f"{key}.env", secrets=self.secrets)
        cwd = Path(s.cwd).expanduser() if s.cwd else self.cwd
        params = StdioServerParameters(command=s.command, args=list(s.args), env=env, cwd=cwd)
        if self.log_dir is None:
            return stdio_client(params)
        path = self.log_dir / f"mcp-{self.name}.log"
        errlog = stack.enter_context(path.open("a", encoding="utf-8"))
        return stdio_client(params, errlog=errlog)

    def _oauth(self) -> httpx2.Auth | None:
        if self.settings.auth != "oauth":
            return None
        if self.secrets is None or self.secrets.get(secret_name(self.name)) is None:
            raise login_needed(self.name)
        return serving_provider(self.name, self.settings.url, self.secrets, scope=self.settings.scope)

    # -- calls ---------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        client = self.client
        if client is None:
            why = self.error or self.status
            return ToolResult(text=f"the MCP server {self.name!r} is not running ({why})", is_error=True)
        try:
            result = await client.call_tool(tool, arguments, read_timeout_seconds=self.settings.timeout)
        except MCPError as exc:
            return self._call_failed(tool, exc)
        except Exception as exc:  # transport trouble (HTTP errors, bad payloads): the model is told
            why = describe(exc)
            log.warning("MCP server %s: call to %s failed: %s", self.name, tool, why)
            return ToolResult(is_error=True, text=f"calling {tool!r} on server {self.name!r} failed: {why}")
        return await tool_result(result)

    def offered(self, rules: dict[str, str]) -> list[Offered]:
        """Its tools as runs are offered them, each with its policy (``rules``: ``[tools.policy]``)."""
        offered = []
        for d in self.tools:
            tool = McpTool(connection=self, definition=d, exposed=exposed_name(self.name, d.name))
            hints = d.annotations
            offered.append(Offered(tool=tool, policy=self.policy(d, rules), source=self.name,
                                   original=d.name, ruled=True,
                                   idempotent=bool(hints and (hints.idempotent_hint or hints.read_only_hint)),
                                   annotations=describe_annotations(d),
                                   open_world=hints is None or hints.open_world_hint is not False))
        return offered

    def policy(self, definition: McpToolDefinition, rules: dict[str, str]) -> Policy:
        """The tool's annotations, then the server's own ``policy`` table, then ``rules``."""
        exposed = exposed_name(self.name, definition.name)
        return effective(from_annotations(definition.annotations),
                         rules=[(self.settings.policy, definition.name), (rules, exposed)])

    def _call_failed(self, tool: str, exc: MCPError) -> ToolResult:
        if exc.code == REQUEST_TIMEOUT:
            log.warning("MCP server %s: %s timed out after %g s", self.name, tool, self.settings.timeout)
            return ToolResult(is_error=True, text=(
                f"the tool {tool!r} on MCP server {self.name!r} did not answer within"
                f" {self.settings.timeout:g} s and was cancelled"))
        if exc.code == CONNECTION_CLOSED:
            self._failed(f"stopped during a call to {tool!r} (connection closed)")
            self._reset.set()  # the supervisor starts it again after a pause
            return ToolResult(is_error=True, text=(
                f"the MCP server {self.name!r} stopped while running {tool!r}; whether the call took"
                " effect is unknown. Its tools are unavailable until it is restarted."))
        log.warning("MCP server %s: %s failed: %s", self.name, tool, describe(exc))
        return ToolResult(text=f"the MCP server {self.name!r} refused the call: {exc.message}", is_error=True)


async def log_in(name: str, settings: McpServerSettings, secrets: SecretStore, *,
                 show: Callable[[str], Awaitable[None]], browser_wait: float = 300.0
                 ) -> list[McpToolDefinition]:
    """``pizzamail mcp login``: the OAuth flow for one server, through the browser (``show`` gets the
    address to open); returns the tools it lists once logged in. A login starts afresh: the old
    tokens and registration are dropped first."""
    KeyringTokens(secrets=secrets, server=name).forget_registration()
    async with Callback(timeout=browser_wait) as callback, AsyncExitStack() as stack:
        auth = oauth_provider(name, settings.url, secrets, scope=settings.scope,
                              redirect_uri=callback.redirect_uri, redirect=show, callback=callback.wait)
        connection = McpConnection(name=name, settings=settings, secrets=secrets)
        target = connection.transport(stack, auth)
        client = await stack.enter_async_context(
            Client(target, client_info=CLIENT_INFO, read_timeout_seconds=settings.timeout))
        return await list_all_tools(client)


@dataclass(frozen=True, kw_only=True)
class McpTool:
    """One listed tool of a connection, under the name the model sees."""

    connection: McpConnection
    definition: McpToolDefinition
    exposed: str

    @property
    def spec(self) -> ToolSpec:
        d = self.definition
        schema = dict(d.input_schema) if d.input_schema else {"type": "object", "properties": {}}
        return ToolSpec(name=self.exposed, description=d.description or d.title or d.name, parameters=schema)

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        return await self.connection.call(self.definition.name, arguments)


def describe_annotations(definition: McpToolDefinition) -> str:
    """The tool's own hints in words, for the approval request."""
    hints = definition.annotations
    if hints is None:
        return "no annotations (treated as possibly destructive)"
    flags = ((hints.read_only_hint, "read-only"), (hints.destructive_hint, "destructive"),
             (hints.idempotent_hint, "idempotent"), (hints.open_world_hint, "open-world"))
    said = [word for flag, word in flags if flag]
    return ", ".join(said) or "no hints set"
