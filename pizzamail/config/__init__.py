"""Typed settings read from ``config.toml``; the one place that validates and explains them.

Each section is a keyword-only dataclass whose fields carry their default and a description. A wrong
value raises :class:`ConfigError` naming the key, the value and what is allowed. Secrets never live
here: a provider names the keyring entry that holds its key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pizzamail.config.fields import POLICIES, SERVER_NAME_RE, duration_seconds, named, section
from pizzamail.config.sections import (
    BUILTIN_PROVIDERS,
    PROVIDER_KINDS,
    AccountSettings,
    AgentSettings,
    ApprovalsSettings,
    McpServerSettings,
    McpSettings,
    ProviderSettings,
    RelaySettings,
    RunnerSettings,
    ServerSettings,
    SkillsSettings,
    ToolsSettings,
)
from pizzamail.config.template import default_config_text
from pizzamail.config.triggers import (
    HookSettings,
    ScheduleSettings,
    SenderSettings,
    hook_settings,
    schedule_settings,
    sender_settings,
)
from pizzamail.config.watches import WatchSettings, watch_settings
from pizzamail.errors import ConfigError

__all__ = [
    "BUILTIN_PROVIDERS",
    "POLICIES",
    "PROVIDER_KINDS",
    "AccountSettings",
    "AgentSettings",
    "ApprovalsSettings",
    "Config",
    "HookSettings",
    "McpServerSettings",
    "McpSettings",
    "ProviderSettings",
    "RelaySettings",
    "RunnerSettings",
    "ScheduleSettings",
    "SenderSettings",
    "ServerSettings",
    "SkillsSettings",
    "ToolsSettings",
    "WatchSettings",
    "default_config_text",
    "duration_seconds",
    "hook_settings",
    "load_config",
    "mcp_server",
    "parse_config",
    "schedule_settings",
    "sender_settings",
    "watch_settings",
]


@dataclass(frozen=True, kw_only=True)
class Config:
    server: ServerSettings = field(default_factory=ServerSettings)
    account: AccountSettings = field(default_factory=AccountSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)
    runner: RunnerSettings = field(default_factory=RunnerSettings)
    providers: dict[str, ProviderSettings] = field(default_factory=dict)
    mcp: McpSettings = field(default_factory=McpSettings)
    tools: ToolsSettings = field(default_factory=ToolsSettings)
    skills: SkillsSettings = field(default_factory=SkillsSettings)
    approvals: ApprovalsSettings = field(default_factory=ApprovalsSettings)
    relay: RelaySettings = field(default_factory=RelaySettings)
    schedules: dict[str, ScheduleSettings] = field(default_factory=dict)
    hooks: dict[str, HookSettings] = field(default_factory=dict)
    senders: dict[str, SenderSettings] = field(default_factory=dict)
    watches: dict[str, WatchSettings] = field(default_factory=dict)

    @property
    def domain(self) -> str:
        return self.agent.address.rpartition("@")[2]

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



def parse_config(data: dict[str, Any]) -> Config:
    """Build a validated :class:`Config` from parsed TOML."""
    sections = {"server": ServerSettings, "account": AccountSettings, "agent": AgentSettings,
                "runner": RunnerSettings, "tools": ToolsSettings, "skills": SkillsSettings,
                "approvals": ApprovalsSettings, "relay": RelaySettings}
    known = (*sections, "providers", "mcp", "schedules", "hooks", "senders", "watches")
    for key in data:
        if key not in known:
            raise ConfigError(key, data[key], "sections " + ", ".join(known))
    kwargs: dict[str, Any] = {
        name: section(cls, data.get(name, {}), name) for name, cls in sections.items()
    }
    kwargs["providers"] = _providers(data.get("providers", {}))
    kwargs["mcp"] = _mcp(data.get("mcp", {}))
    kwargs["schedules"] = named(data.get("schedules", {}), "schedules", schedule_settings)
    kwargs["hooks"] = named(data.get("hooks", {}), "hooks", hook_settings)
    kwargs["senders"] = named(data.get("senders", {}), "senders", sender_settings)
    kwargs["watches"] = named(data.get("watches", {}), "watches", watch_settings)
    config = Config(**kwargs)
    relay = config.relay
    if relay.security == "none" and relay.host and relay.host not in ("127.0.0.1", "::1", "localhost"):
        raise ConfigError("relay.security", "none", "starttls or ssl for a relay beyond loopback")
    if config.account.address == config.agent.address:
        raise ConfigError("agent.address", config.agent.address, "an address other than yours")
    _check_senders(config)
    return config


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


def _providers(data: object) -> dict[str, ProviderSettings]:
    if not isinstance(data, dict):
        raise ConfigError("providers", data, "a table of [providers.NAME] sections")
    result = {}
    for name, table in data.items():
        # a written [providers.local] is the user's own (e.g. an OpenAI-compatible server on this
        # machine): only the embedded model's implicit section has kind "local"
        defaults: dict[str, Any] = dict(BUILTIN_PROVIDERS.get(name, {})) if name != "local" else {}
        settings = section(ProviderSettings, {**defaults, **table}, f"providers.{name}")
        if settings.kind not in PROVIDER_KINDS:
            raise ConfigError(f"providers.{name}.kind", settings.kind, ", ".join(PROVIDER_KINDS))
        result[name] = settings
    return result


def _mcp(data: object) -> McpSettings:
    if not isinstance(data, dict):
        raise ConfigError("mcp", data, "a table with [mcp.servers.NAME] sections")
    rest = {k: v for k, v in data.items() if k != "servers"}
    servers = data.get("servers", {})
    if not isinstance(servers, dict):
        raise ConfigError("mcp.servers", servers, "a table of [mcp.servers.NAME] sections")
    base = section(McpSettings, rest, "mcp")
    return replace(base, servers={name: mcp_server(name, table) for name, table in servers.items()})


def mcp_server(name: str, table: object) -> McpServerSettings:
    """One ``[mcp.servers.NAME]`` section, validated (also used by ``pizzamail mcp add``)."""
    prefix = f"mcp.servers.{name}"
    if not SERVER_NAME_RE.match(name):
        raise ConfigError(prefix, name, "a server name of letters, digits, _ and - (at most 40)")
    settings = section(McpServerSettings, table, prefix)
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
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "(unreadable)", f"valid TOML ({exc})") from None
    return parse_config(data)

