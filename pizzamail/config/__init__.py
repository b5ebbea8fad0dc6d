"""Typed settings read from ``config.toml``; the one place that validates and explains them.

Each section is a frozen keyword-only pydantic dataclass whose fields carry their default and a
description; unknown keys are refused (``extra="forbid"``) and types are strict. A wrong value raises
:class:`ConfigError` naming the key, the value and what is allowed (:mod:`.explain`). Secrets never live
here: a provider names the keyring entry that holds its key.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field
from pydantic.dataclasses import dataclass

from pizzamail.config.agents import (
    MAIN,
    Agent,
    SpecialistSettings,
    check_addresses,
    finish_agent,
    main_agent,
    specialist,
)
from pizzamail.config.checks import POLICIES, SECTION, SERVER_NAME_RE, duration_seconds
from pizzamail.config.explain import read_toml, validate
from pizzamail.config.mailbox import ImapAccountSettings, MailboxSettings, check_mailbox, with_plus_addresses
from pizzamail.config.named import check_name, check_required
from pizzamail.config.sections import (
    BUILTIN_PROVIDERS,
    AccountSettings,
    ActivitySettings,
    AgentSettings,
    ApprovalsSettings,
    McpServerSettings,
    McpSettings,
    ProviderSettings,
    RelaySettings,
    RunnerSettings,
    ServerSettings,
    SkillsSettings,
    StoreSettings,
    ToolsSettings,
)
from pizzamail.config.template import default_config_text
from pizzamail.config.triggers import (
    SENDER_REQUIRED,
    HookSettings,
    ScheduleSettings,
    SenderSettings,
    finish_schedule,
    hook_settings,
    schedule_settings,
    sender_settings,
)
from pizzamail.config.watches import WATCH_REQUIRED, WatchSettings, finish_watch, watch_settings
from pizzamail.errors import ConfigError, ConfigSyntaxError

__all__ = [
    "BUILTIN_PROVIDERS",
    "MAIN",
    "POLICIES",
    "AccountSettings",
    "ActivitySettings",
    "Agent",
    "AgentSettings",
    "ApprovalsSettings",
    "Config",
    "HookSettings",
    "ImapAccountSettings",
    "MailboxSettings",
    "McpServerSettings",
    "McpSettings",
    "ProviderSettings",
    "RelaySettings",
    "RunnerSettings",
    "ScheduleSettings",
    "SenderSettings",
    "ServerSettings",
    "SkillsSettings",
    "SpecialistSettings",
    "StoreSettings",
    "ToolsSettings",
    "WatchSettings",
    "default_config_text",
    "duration_seconds",
    "hook_settings",
    "load_config",
    "mcp_server",
    "parse_config",
    "read_toml",
    "schedule_settings",
    "sender_settings",
    "watch_settings",
]


@dataclass(frozen=True, kw_only=True, config=SECTION)
class Config:
    server: ServerSettings = Field(default_factory=ServerSettings)
    account: AccountSettings = Field(default_factory=AccountSettings)
    mailbox: MailboxSettings = Field(default_factory=MailboxSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    agents: dict[str, SpecialistSettings] = Field(default_factory=dict)
    runner: RunnerSettings = Field(default_factory=RunnerSettings)
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    mcp: McpSettings = Field(default_factory=McpSettings)
    tools: ToolsSettings = Field(default_factory=ToolsSettings)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)
    approvals: ApprovalsSettings = Field(default_factory=ApprovalsSettings)
    relay: RelaySettings = Field(default_factory=RelaySettings)
    activity: ActivitySettings = Field(default_factory=ActivitySettings)
    schedules: dict[str, ScheduleSettings] = Field(default_factory=dict)
    hooks: dict[str, HookSettings] = Field(default_factory=dict)
    senders: dict[str, SenderSettings] = Field(default_factory=dict)
    watches: dict[str, WatchSettings] = Field(default_factory=dict)

    @property
    def domain(self) -> str:
        return self.agent.address.rpartition("@")[2]

    @property
    def main_agent(self) -> Agent:
        return main_agent(self.agent)

    def all_agents(self) -> list[Agent]:
        """The main agent, then the specialists in the order config.toml lists them."""
        return [self.main_agent, *(specialist(key, s, self.agent) for key, s in self.agents.items())]

    def agent_at(self, address: str | None) -> Agent | None:
        """The agent answering at ``address``; None (or an empty address) is the main agent."""
        if not address:
            return self.main_agent
        address = address.lower()
        return next((a for a in self.all_agents() if a.address == address), None)

    @property
    def approvers(self) -> frozenset[str]:
        """Who may decide approvals: ``[approvals] approvers``, by default the owner."""
        return frozenset(a.lower() for a in self.approvals.approvers or [self.account.address])

    def expiry(self, server: str) -> str:
        """How long a held call of ``server`` waits before it expires ('' for ever)."""
        mcp = self.mcp.servers.get(server)
        return (mcp.expires if mcp else "") or self.approvals.expires

    def expiry_seconds(self, server: str) -> int | None:
        return duration_seconds(self.expiry(server))

    def provider(self, name: str) -> ProviderSettings | None:
        """Settings for a provider; the :data:`BUILTIN_PROVIDERS` work without a section."""
        if name in self.providers:
            return self.providers[name]
        if name in BUILTIN_PROVIDERS:
            return ProviderSettings(**BUILTIN_PROVIDERS[name])
        return None


def parse_config(data: dict[str, Any], *, home: Path | None = None) -> Config:
    """Build a validated :class:`Config` from parsed TOML. An agent's ``instructions_file`` is read
    relative to ``home`` (without one it is not read)."""
    config = _named_sections(validate(Config, with_plus_addresses(_with_builtin_providers(data))), home)
    check_mailbox(config.mailbox)
    relay = config.relay
    if relay.security == "none" and relay.host and relay.host not in ("127.0.0.1", "::1", "localhost"):
        raise ConfigError("relay.security", "none", "starttls or ssl for a relay beyond loopback")
    if config.account.address == config.agent.address:
        raise ConfigError("agent.address", config.agent.address, "an address other than yours")
    _check_senders(config)
    _check_models(config)
    if config.runner.concurrency == 0 and not config.store.url:
        raise ConfigError("runner.concurrency", 0, "a number greater than 0 with SQLite (0 leaves the runs to"
                          " `pizzamail worker`s, which share a PostgreSQL [store] url)")
    check_addresses(config.all_agents(), {config.account.address.lower(): "account.address",
                                          **{s.address.lower(): f"senders.{n}.address"
                                             for n, s in config.senders.items()}})
    return config


def _named_sections(config: Config, home: Path | None) -> Config:
    """The rules of each ``[KIND.NAME]`` section beyond its keys' types; ``when`` becomes ``cron``."""
    servers = {name: _check_mcp_server(name, server) for name, server in config.mcp.servers.items()}
    return replace(
        config, mcp=replace(config.mcp, servers=servers),
        schedules={name: finish_schedule(name, _named("schedules", name, s))
                   for name, s in config.schedules.items()},
        hooks={name: _named("hooks", name, s) for name, s in config.hooks.items()},
        agents={key: finish_agent(key, s, domain=config.domain, home=home)
                for key, s in config.agents.items()},
        senders={name: _named("senders", name, s, SENDER_REQUIRED) for name, s in config.senders.items()},
        watches={name: finish_watch(name, _named("watches", name, s, WATCH_REQUIRED))
                 for name, s in config.watches.items()},
    )


S = TypeVar("S")


def _named(kind: str, name: str, settings: S, required: dict[str, str] | None = None) -> S:
    check_name(kind, name)
    return check_required(kind, name, settings, required)


def _with_builtin_providers(data: dict[str, Any]) -> dict[str, Any]:
    """A written section of a built-in provider starts from the built-in defaults; a written
    [providers.local] is the user's own (e.g. an OpenAI-compatible server on this machine): only the
    embedded model's implicit section has kind "local"."""
    providers = data.get("providers")
    if not isinstance(providers, dict):
        return data
    merged = {name: {**BUILTIN_PROVIDERS.get(name, {}), **table}
              if name != "local" and isinstance(table, dict) else table
              for name, table in providers.items()}
    return {**data, "providers": merged}


def _check_models(config: Config) -> None:
    """Every ``provider:model`` names a provider: a typo must stop ``serve``, not fall back."""
    known = list(dict.fromkeys([*BUILTIN_PROVIDERS, *config.providers]))
    for key, model in _models(config):
        name = model.partition(":")[0]
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            guess = f"did you mean {close[0]}:? " if close else ""
            raise ConfigError(key, model, f"a known provider before the colon ({', '.join(known)}); {guess}"
                                          f"or add a [providers.{name}] section")


def _models(config: Config) -> list[tuple[str, str]]:
    """``(key, provider:model)`` of every section that names a model."""
    found = [(f"{a.section.strip('[]')}.model", a.model) for a in config.all_agents()]
    for kind, sections in (("schedules", config.schedules), ("hooks", config.hooks),
                           ("watches", config.watches)):
        found += [(f"{kind}.{name}.model", s.model) for name, s in sections.items() if s.model]
    return found


def _check_senders(config: Config) -> None:
    """Every login and every From address belongs to exactly one account."""
    logins = {config.account.user: "account.user"}
    addresses = {config.account.address.lower(): "account.address",
                 config.agent.address.lower(): "agent.address"}
    for name, sender in config.senders.items():
        for key, value, seen in (("user", sender.login(name), logins),
                                 ("address", sender.address.lower(), addresses)):
            if value in seen:
                raise ConfigError(f"senders.{name}.{key}", value, f"a value other than {seen[value]}'s")
            seen[value] = f"senders.{name}.{key}"


def mcp_server(name: str, table: object) -> McpServerSettings:
    """One ``[mcp.servers.NAME]`` section, validated (also used by ``pizzamail mcp add``)."""
    return _check_mcp_server(name, validate(McpServerSettings, table, f"mcp.servers.{name}"))


def _check_mcp_server(name: str, settings: McpServerSettings) -> McpServerSettings:
    prefix = f"mcp.servers.{name}"
    if not SERVER_NAME_RE.match(name):
        raise ConfigError(prefix, name, "a server name of letters, digits, _ and - (at most 40)")
    if settings.command and settings.url:
        raise ConfigError(f"{prefix}.url", settings.url, "either command (stdio) or url, not both")
    if not (settings.command or settings.url):
        raise ConfigError(f"{prefix}.command", "", "a command (stdio) or a url (streamable HTTP)")
    return settings


def load_config(path: Path) -> Config:
    """Read and validate ``config.toml``; a missing file means all defaults."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    try:
        return parse_config(read_toml(text, path), home=path.parent)
    except ConfigError as exc:
        if not isinstance(exc, ConfigSyntaxError):
            exc.hint = f"edit {path}"
        raise
