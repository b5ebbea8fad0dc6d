"""The tools an agent may call, behind one registry.

Built-in tools and MCP servers take part through the same seam: a :class:`ToolSource` offers tools
for one run (built-ins need to know the run's thread; MCP servers come and go), static tools are
added with :meth:`ToolRegistry.add`. Each offered tool carries its policy (``auto``, ``ask``,
``deny``, see :mod:`pizzamail.tools.policy`); the runner enforces it.

A failure the model can fix (unknown tool, bad arguments, a tool reporting an error, a timeout) is a
:class:`ToolResult` with ``is_error`` set that goes back into the conversation; an exception raised by
a tool is our failure and stops the run.

A tool may also speak about its own calls (:class:`Explained`): check the arguments before a call is
held, and say in plain words what a held call will do, for the approval request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pizzamail.composer import MailContext
from pizzamail.config import Agent
from pizzamail.providers.types import ToolSpec
from pizzamail.tools.names import belongs_to
from pizzamail.tools.outputs import keep
from pizzamail.tools.policy import Policy, effective, match_rule, overlay, strictest_rule
from pizzamail.transcript import ToolResult as ToolResult  # a tool's result is a transcript step's


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    async def call(self, arguments: dict[str, Any]) -> ToolResult: ...


@runtime_checkable
class Explained(Protocol):
    """Optional, next to :class:`Tool`: a tool that checks and describes its own calls
    (``isinstance(tool, Explained)``; schedule_task is one).

    ``check`` runs before a call is held: an error result goes back to the model to fix, so the user
    is never asked to approve a call that cannot run. ``describe`` says what a call with these
    arguments will do, in a sentence or two of Markdown for the approval request (None: nothing to
    add to the arguments). It is recomputed from the stored arguments whenever a request is written,
    so it may depend on them, the tool's settings and the clock, never on the run's state.
    """

    async def check(self, arguments: dict[str, Any]) -> ToolResult | None: ...

    def describe(self, arguments: dict[str, Any]) -> str | None: ...


@dataclass(frozen=True, kw_only=True)
class RunScope:
    """The run a set of tools is bound to."""

    run_id: int
    thread_id: int
    mail: MailContext
    """threading for mail written during the run (progress notes)"""
    workspace: Path
    """the run's own folder (``workspaces/<run>``); files written there go out with the reply"""
    kept: Callable[[], Awaitable[None]] | None = None
    """called after each tool call: makes what it wrote in the workspace last beyond this machine
    (:meth:`~pizzamail.store.runfiles.Workspaces.keep`); None: the folder alone"""
    rules: tuple[dict[str, str], ...] = ()
    """rule tables of this run alone (each read on its own; the strictest answer among those with a
    rule for a tool wins) (a ``[senders.NAME]`` policy for the runs its mail starts):
    globs over the names the model sees, beating every other rule where they match"""
    outside: bool = False
    """the run works on text written by outsiders (its thread holds a webhook's or watched mailbox's
    task): open-world tools ask first"""
    agent: Agent | None = None
    """the agent the run is of: only its allowed tools and skills, its policy on top (None: all, none)"""


@dataclass(frozen=True, kw_only=True)
class Offered:
    """A tool as offered to one run, with the policy that gates its calls."""

    tool: Tool
    policy: Policy
    source: str = "builtin"
    """``builtin``, or the MCP server the tool lives on"""
    original: str = ""
    """the tool's name at its source, when that differs from the name the model sees"""
    never_auto: bool = False
    """no rule may make this tool run by itself (sending mail to other people)"""
    idempotent: bool = False
    """calling it twice does no more than once (MCP ``idempotent_hint``): a call whose outcome a
    crash left unknown may be repeated without asking"""
    annotations: str = ""
    """what the tool says about itself, for the approval request (``destructive, open-world``)"""
    open_world: bool = False
    """it may reach beyond this machine (MCP ``open_world_hint``, true unless the tool says false)"""
    ruled: bool = False
    """a user rule of the source's own (``[mcp.servers.NAME.policy]``) decided: it beats
    ``[tools.policy]``"""
    spawns: bool = False
    """a call starts a child run instead of running here (``delegate``): the runner records it
    together with the child and waits for the child's end, which becomes the call's result. Such a
    call is never held: the child's own consequential calls are"""

    @property
    def name(self) -> str:
        return self.tool.spec.name

    @property
    def label(self) -> str:
        """How the user reads it: ``post_progress``, or ``github: create_issue``."""
        if self.source == "builtin":
            return self.name
        return f"{self.source}: {self.original or self.name}"


@dataclass(frozen=True, kw_only=True)
class SkillEntry:
    """A skill in the system prompt's catalog."""

    name: str
    description: str
    location: str


@dataclass(frozen=True, kw_only=True)
class Unavailable:
    """A tool source that should be there but is not (an MCP server that failed to start)."""

    server: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class Offer:
    tools: list[Offered] = field(default_factory=list)
    skills: list[SkillEntry] = field(default_factory=list)
    unavailable: list[Unavailable] = field(default_factory=list)


class ToolSource(Protocol):
    def offer(self, scope: RunScope) -> Offer: ...


@dataclass(kw_only=True)
class Toolbox:
    """The tools of one run: what the model is offered and how a name finds its tool."""

    tools: dict[str, Offered] = field(default_factory=dict)
    skills: list[SkillEntry] = field(default_factory=list)
    unavailable: list[Unavailable] = field(default_factory=list)
    max_result_chars: int = 20000
    workspace: Path | None = None
    """where a result's files and pictures are kept (:mod:`pizzamail.tools.outputs`)"""
    kept: Callable[[], Awaitable[None]] | None = None
    """the run's :attr:`RunScope.kept`"""

    def specs(self) -> list[ToolSpec]:
        """Denied tools are not offered: a model should not plan around a tool it may not use."""
        return [o.tool.spec for o in self.tools.values() if o.policy != "deny"]

    def get(self, name: str) -> Offered | None:
        return self.tools.get(name)

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        offered = self.tools.get(name)
        if offered is None:
            return self.missing(name)
        result = await offered.tool.call(arguments)
        if self.workspace is not None:
            await keep(result, self.workspace)
        if self.kept is not None:  # the tool itself may have written there (write_file)
            await self.kept()
        if len(result.text) > self.max_result_chars:
            cut = result.text[: self.max_result_chars]
            return replace(result, text=f"{cut}\n[… cut: the result had {len(result.text)} characters]")
        return result

    def missing(self, name: str) -> ToolResult:
        for down in self.unavailable:
            if belongs_to(name, down.server):
                return ToolResult(text=f"the MCP server {down.server!r} is not available right now"
                                       f" ({down.reason}); its tools cannot be used in this run",
                                  is_error=True)
        known = ", ".join(sorted(self.tools)) or "none"
        return ToolResult(text=f"there is no tool named {name!r}; available tools: {known}",
                          is_error=True)


@dataclass(kw_only=True)
class ToolRegistry:
    """Every tool source of the service; :meth:`bind` gives one run its :class:`Toolbox`."""

    rules: dict[str, str] = field(default_factory=dict)
    """``[tools.policy]``: globs over the names the model sees, applied after each source's own"""
    max_result_chars: int = 20000
    _tools: dict[str, Offered] = field(default_factory=dict)
    _sources: list[ToolSource] = field(default_factory=list)

    def add(self, tool: Tool, *, policy: Policy = "auto") -> None:
        name = tool.spec.name
        if name in self._tools:
            raise ValueError(f"a tool named {name!r} is already registered")
        self._tools[name] = Offered(tool=tool, policy=policy)

    def add_source(self, source: ToolSource) -> None:
        self._sources.append(source)

    def bind(self, scope: RunScope, *, extra: Sequence[Offer] = ()) -> Toolbox:
        """The run's tools; ``extra``: offers of the run's own (``delegate``), after every source."""
        box = Toolbox(max_result_chars=self.max_result_chars, workspace=scope.workspace, kept=scope.kept)
        offers = [Offer(tools=list(self._tools.values())), *(s.offer(scope) for s in self._sources), *extra]
        for offer in offers:
            for offered in offer.tools:
                if offered.name in box.tools:  # the first source wins; built-ins come first
                    continue
                if scope.agent is None or scope.agent.offers_tool(offered.name):
                    box.tools[offered.name] = self._ruled(offered, scope)
            box.skills += offer.skills
            box.unavailable += offer.unavailable
        return box

    def _ruled(self, offered: Offered, scope: RunScope) -> Offered:
        """The run's own rules first, then ``[tools.policy]`` unless the source's own rule decided.

        In a run on outsiders' text an open-world tool asks first, unless the run's own rules (the
        trigger's policy) allow it: what the text says must not reach the world by itself."""
        tables: list[tuple[dict[str, str], str]] = []
        run_rule = strictest_rule(scope.rules, offered.name)
        if run_rule is not None:
            tables.append(({offered.name: run_rule}, offered.name))
        if not offered.ruled:
            tables.append((self.rules, offered.name))
        policy = effective(offered.policy, rules=tables, never_auto=offered.never_auto)
        if scope.agent is not None:
            decided = offered.ruled or any(match_rule(t, n) is not None for t, n in tables)
            policy = overlay(policy, match_rule(scope.agent.policy, offered.name), decided=decided,
                             never_auto=offered.never_auto)
        if scope.outside and offered.open_world and policy == "auto" and run_rule != "auto":
            policy = "ask"
        if policy == offered.policy:
            return offered
        return replace(offered, policy=policy, ruled=True)
