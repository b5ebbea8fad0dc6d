"""``[agents.NAME]``: specialist agents, each at its own address, beside the main ``[agent]``.

A section is read as written (:class:`SpecialistSettings`, empty meaning "as the main agent") and then
resolved into an :class:`Agent`, the one shape the runner and intake use for every agent, the main one
included: its address, display name, instructions, model, allowlists, limits and policy overlay.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated

from pydantic import StrictBool, StrictStr
from pydantic.dataclasses import dataclass as section

from pizzamail.config.checks import (
    SECTION,
    Count,
    Policies,
    address_problem,
    checked,
    model_problem,
    setting,
    unless_empty,
)
from pizzamail.config.named import check_name
from pizzamail.config.sections import AgentSettings
from pizzamail.errors import ConfigError

MAIN = "agent"
"""the key of the main agent (its section is ``[agent]``)"""


@section(frozen=True, kw_only=True, config=SECTION)
class SpecialistSettings:
    """One ``[agents.NAME]`` section: an agent of its own, answering at its own address."""

    address: Annotated[StrictStr, checked(unless_empty(address_problem))] = setting(
        "", "its address (default: NAME@ the [agent] address's domain)")
    name: StrictStr = setting("", "display name on its mail (default: NAME)")
    description: StrictStr = setting("", "what it does, as agents that delegate to it see it")
    instructions: StrictStr = setting("", "its system prompt")
    instructions_file: StrictStr = setting("", "instead: a file holding its system prompt, relative to"
                                           " the home folder")
    model: Annotated[StrictStr, checked(unless_empty(model_problem))] = setting(
        "", "provider:model for its runs (default: [agent] model)")
    skills: list[StrictStr] | None = setting(None, "the skills it is offered (default: all)")
    tools: list[StrictStr] | None = setting(None, "globs of the tool names it is offered (default: all)")
    delegate: StrictBool = setting(False, "whether it may delegate to other agents")
    max_steps: Count | None = setting(None, "as in [agent] (default: [agent] max_steps)")
    max_tool_calls: Count | None = setting(None, "as in [agent] (default: [agent] max_tool_calls)")
    max_tokens: Count | None = setting(None, "as in [agent] (default: [agent] max_tokens)")
    max_seconds: Count | None = setting(None, "as in [agent] (default: [agent] max_seconds)")
    history_messages: Count | None = setting(None, "as in [agent] (default: [agent] history_messages)")
    max_delegates: Count | None = setting(None, "as in [agent] (default: [agent] max_delegates)")
    policy: Policies = setting({}, "tool glob -> auto, ask or deny on top of [tools.policy] (where"
                               " both have a rule, the stricter answer wins)")


@dataclass(frozen=True, kw_only=True)
class Agent:
    """An agent as its runs see it, the main one or a specialist, with every default filled in."""

    key: str
    """``agent`` for the main agent, else the NAME of ``[agents.NAME]``"""
    address: str
    name: str
    model: str
    max_steps: int
    max_tool_calls: int
    max_tokens: int
    max_seconds: int
    history_messages: int
    description: str = ""
    instructions: str = ""
    skills: tuple[str, ...] | None = None
    """skill names it is offered; None: all"""
    tools: tuple[str, ...] | None = None
    """globs over the tool names it is offered; None: all"""
    delegate: bool = False
    max_delegates: int = 8
    policy: dict[str, str] = field(default_factory=dict)

    @property
    def section(self) -> str:
        """Where its settings live in config.toml, for messages."""
        return "[agent]" if self.key == MAIN else f"[agents.{self.key}]"

    def offers_tool(self, name: str) -> bool:
        return self.tools is None or any(fnmatchcase(name, pattern) for pattern in self.tools)

    def offers_skill(self, name: str) -> bool:
        return self.skills is None or name in self.skills


def main_agent(settings: AgentSettings) -> Agent:
    return Agent(key=MAIN, address=settings.address.lower(), name=settings.name, model=settings.model,
                 max_steps=settings.max_steps, max_tool_calls=settings.max_tool_calls,
                 max_tokens=settings.max_tokens, max_seconds=settings.max_seconds,
                 history_messages=settings.history_messages, delegate=True,
                 max_delegates=settings.max_delegates)


def specialist(key: str, settings: SpecialistSettings, main: AgentSettings) -> Agent:
    """``[agents.key]`` with the main agent's values where it names none (after :func:`finish_agent`)."""
    return Agent(
        key=key, address=settings.address.lower(), name=settings.name or key,
        description=settings.description, instructions=settings.instructions,
        model=settings.model or main.model, skills=_names(settings.skills), tools=_names(settings.tools),
        delegate=settings.delegate, policy=dict(settings.policy),
        max_steps=settings.max_steps or main.max_steps,
        max_tool_calls=settings.max_tool_calls or main.max_tool_calls,
        max_tokens=settings.max_tokens or main.max_tokens,
        max_seconds=settings.max_seconds or main.max_seconds,
        max_delegates=settings.max_delegates or main.max_delegates,
        history_messages=settings.history_messages or main.history_messages,
    )


def _names(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def finish_agent(key: str, settings: SpecialistSettings, *, domain: str, home: Path | None
                 ) -> SpecialistSettings:
    """The rules of one ``[agents.NAME]`` beyond its keys' types: its address (NAME@domain when
    unset) at the main agent's domain, and its instructions read from ``instructions_file``
    (relative to ``home``; not read without one)."""
    check_name("agents", key)
    prefix = f"agents.{key}"
    address = settings.address or f"{key}@{domain}"
    if address.rpartition("@")[2].lower() != domain.lower():
        raise ConfigError(f"{prefix}.address", address, f"an address at {domain} (the [agent] address's"
                          " domain), such as " + f"{key}@{domain}")
    if settings.instructions and settings.instructions_file:
        raise ConfigError(f"{prefix}.instructions_file", settings.instructions_file,
                          "either instructions or instructions_file, not both")
    instructions = settings.instructions
    if settings.instructions_file and home is not None:
        instructions = _read_instructions(f"{prefix}.instructions_file", home / settings.instructions_file)
    return replace(settings, address=address, instructions=instructions)


def _read_instructions(key: str, path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(key, str(path), "a readable UTF-8 file, relative to the home folder",
                          hint=f"create {path} with the agent's instructions, or write them inline as"
                               " instructions = \"…\"") from exc


def check_addresses(agents: list[Agent], taken: dict[str, str]) -> None:
    """Each agent's address is its own: no other agent's, the account's or a sender's (``taken``
    maps such addresses to their key)."""
    seen = dict(taken)
    for agent in agents:
        key = "agent.address" if agent.key == MAIN else f"agents.{agent.key}.address"
        if agent.address in seen:
            raise ConfigError(key, agent.address, f"an address other than {seen[agent.address]}'s")
        seen[agent.address] = key
