"""Typed settings read from ``config.toml``; the one place that validates and explains them.

Each section is a keyword-only dataclass whose fields carry their default and a description. A wrong
value raises :class:`ConfigError` naming the key, the value and what is allowed. Secrets never live
here: a provider names the keyring entry that holds its key.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from pizzamail.errors import ConfigError

ADDRESS_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+$")
MODEL_RE = re.compile(r"^[a-z0-9_-]+:\S+$")


def _port(value: int) -> str | None:
    # 0 asks the OS for a free port (used by tests); `serve` prints the port it got
    return None if 0 <= value <= 65535 else "an integer port from 0 to 65535"


def _positive(value: int | float) -> str | None:
    return None if value > 0 else "a number greater than 0"


def _address(value: str) -> str | None:
    return None if ADDRESS_RE.match(value) else "an email address such as me@pizzamail.localhost"


def _host(value: str) -> str | None:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return "an IP address such as 127.0.0.1"
    return None


def _model(value: str) -> str | None:
    return None if MODEL_RE.match(value) else "provider:model, such as openai:gpt-4.1-mini"


def _user(value: str) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9._-]{1,64}", value) else "letters, digits, . _ -"


_DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(value: str) -> int | None:
    """``30m``, ``2h``, ``1d`` -> seconds; '' (off) -> None. Validated before use (:func:`_duration`)."""
    found = _DURATION.match(value)
    return int(found.group(1)) * _UNIT_SECONDS[found.group(2)] if found else None


def _duration(value: str) -> str | None:
    if value == "" or (duration_seconds(value) or 0) > 0:
        return None
    return 'a duration such as "30m", "2h" or "1d" (or "" for off)'


def setting(default: Any, doc: str, check: Any = None) -> Any:
    """A config field: its default, a one-line description, and an optional validator."""
    if isinstance(default, list | dict):  # a fresh copy per instance, never a shared mutable
        return field(default_factory=lambda: type(default)(default), metadata={"doc": doc, "check": check})
    return field(default=default, metadata={"doc": doc, "check": check})


POLICIES = ("auto", "ask", "deny")
SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")


def _policies(value: dict[str, str]) -> str | None:
    bad = [v for v in value.values() if v not in POLICIES]
    return f"tool patterns mapped to {', '.join(POLICIES)}" if bad else None


def _url(value: str) -> str | None:
    if not value or value.startswith(("http://", "https://")):
        return None
    return "an http:// or https:// URL such as http://127.0.0.1:8000/mcp"


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    host: str = setting("127.0.0.1", "address the SMTP, IMAP and HTTP servers bind to", _host)
    smtp_port: int = setting(1587, "SMTP submission port", _port)
    imap_port: int = setting(1143, "IMAP port (plain, STARTTLS available)", _port)
    imaps_port: int = setting(1993, "IMAP port with implicit TLS", _port)
    http_port: int = setting(8025, "HTTP port (health, client autoconfig)", _port)
    max_message_size: int = setting(25 * 1024 * 1024, "largest mail accepted, bytes", _positive)
    tls_cert: str = setting("", "PEM certificate (default: tls/cert.pem, made by init)")
    tls_key: str = setting("", "PEM private key (default: tls/key.pem, made by init)")


@dataclass(frozen=True, kw_only=True)
class AccountSettings:
    user: str = setting("me", "login name of your mail account", _user)
    address: str = setting("me@pizzamail.localhost", "your address; only it may send tasks", _address)


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    address: str = setting("bot@pizzamail.localhost", "the agent's address", _address)
    name: str = setting("pizzamail", "display name on the agent's mail")
    model: str = setting("openai:gpt-4.1-mini", "provider:model used for runs", _model)
    max_steps: int = setting(20, "most model calls in one run (then one tool-free summary call)", _positive)
    max_tool_calls: int = setting(50, "most tool calls in one run", _positive)
    max_tokens: int = setting(200_000, "most tokens (input + output, all calls) in one run", _positive)
    max_seconds: int = setting(1800, "most wall-clock seconds one run works before it summarises", _positive)
    offline_model: bool = setting(
        True, "answer with the embedded offline model (pizzamail[local]) when no provider has a key")
    history_messages: int = setting(40, "most earlier thread messages shown to the model", _positive)


@dataclass(frozen=True, kw_only=True)
class RunnerSettings:
    concurrency: int = setting(2, "runs worked on at the same time", _positive)
    max_attempts: int = setting(3, "times a run is resumed after a crash before it fails", _positive)


@dataclass(frozen=True, kw_only=True)
class ProviderSettings:
    kind: str = setting("openai", "wire format: openai (any OpenAI-compatible endpoint), anthropic,"
                                   " bedrock or local")
    base_url: str = setting("https://api.openai.com/v1", "endpoint base URL")
    key: str = setting("", "keyring entry holding the API key (default: the provider's name)")
    key_env: str = setting("", "environment variable with the key (openai: OPENAI_API_KEY)")
    key_required: bool = setting(True, "false for local servers that take no key (Ollama, LM Studio)")
    timeout: float = setting(120.0, "seconds to wait for one answer", _positive)
    max_retries: int = setting(4, "retries on 429/5xx and network errors")
    max_tokens: int = setting(4096, "anthropic, bedrock: most tokens in one answer", _positive)
    region: str = setting("", "bedrock: AWS region (default: $AWS_REGION, else us-east-1)")


PROVIDER_KINDS = ("openai", "anthropic", "bedrock", "local")
#: the sections that work without being written in config.toml, with their defaults
BUILTIN_PROVIDERS: dict[str, dict[str, Any]] = {
    "openai": {"key_env": "OPENAI_API_KEY"},
    "anthropic": {"kind": "anthropic", "base_url": "https://api.anthropic.com",
                  "key_env": "ANTHROPIC_API_KEY"},
    "local": {"kind": "local", "base_url": "", "key_required": False},
    # base_url "" = https://bedrock-runtime.{region}.amazonaws.com; no key = SigV4 from the AWS chain
    "bedrock": {"kind": "bedrock", "base_url": "", "key_env": "AWS_BEARER_TOKEN_BEDROCK",
                "key_required": False},
    "ollama": {"base_url": "http://127.0.0.1:11434/v1", "key_required": False},
}


# RUF009 below: setting() turns a list/dict default into a default_factory, so no instance shares one.
@dataclass(frozen=True, kw_only=True)
class McpServerSettings:
    """One MCP server: a program spoken to over stdio (``command``) or a streamable HTTP ``url``."""

    enabled: bool = setting(False, "nothing is started unless this is true")
    command: str = setting("", "stdio: the program to start")
    args: list[str] = setting([], "stdio: its arguments")  # noqa: RUF009
    env: dict[str, str] = setting({}, "stdio: extra environment; values may say ${VAR}")  # noqa: RUF009
    cwd: str = setting("", "stdio: working directory (default: the home folder)")
    url: str = setting("", "streamable HTTP endpoint, such as http://127.0.0.1:8000/mcp", _url)
    headers: dict[str, str] = setting({}, "HTTP headers; values may say ${VAR} or ${secret:NAME}")  # noqa: RUF009
    timeout: float = setting(60.0, "seconds one tool call may take", _positive)
    policy: dict[str, str] = setting({}, "tool name glob -> auto, ask or deny", _policies)  # noqa: RUF009
    expires: str = setting("", "held calls of this server expire unanswered after this (\"2h\")",
                           _duration)

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


@dataclass(frozen=True, kw_only=True)
class McpSettings:
    startup_timeout: float = setting(20.0, "seconds a server may take to start and list its tools",
                                     _positive)
    retry_initial: float = setting(5.0, "seconds before the first restart of a failed server", _positive)
    retry_max: float = setting(300.0, "longest wait between restarts of a failed server", _positive)
    servers: dict[str, McpServerSettings] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ToolsSettings:
    policy: dict[str, str] = setting({}, "tool name glob (as the model sees it) -> auto, ask or deny",  # noqa: RUF009
                                     _policies)
    max_result_chars: int = setting(20000, "longest tool result handed to the model", _positive)
    max_file_bytes: int = setting(10 * 1024 * 1024, "largest file write_file may make", _positive)


@dataclass(frozen=True, kw_only=True)
class SkillsSettings:
    enabled: bool = setting(True, "offer Agent Skills from skills/ and the paths below")
    paths: list[str] = setting([], "more folders holding skill folders")  # noqa: RUF009


def _addresses(value: list[str]) -> str | None:
    bad = [v for v in value if not isinstance(v, str) or _address(v) is not None]
    return f"e-mail addresses (not {bad[0]!r})" if bad else None


@dataclass(frozen=True, kw_only=True)
class ApprovalsSettings:
    approvers: list[str] = setting([], "addresses whose replies decide approvals (empty: your own)",  # noqa: RUF009
                                   _addresses)
    expires: str = setting("", "a held call nobody decided expires after this (\"2h\", \"1d\");"
                           " empty: never", _duration)
    remind_after: str = setting("", "one reminder in the thread after this (\"1d\"); empty: none",
                                _duration)


RELAY_SECURITY = ("starttls", "ssl", "none")


@dataclass(frozen=True, kw_only=True)
class RelaySettings:
    """The outgoing SMTP relay that approved drafts (``draft_email``) are sent through."""

    host: str = setting("", "relay host name, such as smtp.example.com; empty: no relay")
    port: int = setting(587, "relay port (587 submission, 465 implicit TLS)", _port)
    security: str = setting("starttls", "starttls, ssl or none (none only for a relay on loopback)",
                            lambda v: None if v in RELAY_SECURITY else ", ".join(RELAY_SECURITY))
    user: str = setting("", "login at the relay (its password: `pizzamail keys set relay`); empty: none")
    timeout: float = setting(30.0, "seconds the relay may take", _positive)

    @property
    def configured(self) -> bool:
        return bool(self.host)


def _cron(value: str) -> str | None:
    from pizzamail.triggers.cron import cron_problem  # croniter is imported only when used

    return cron_problem(value)


def _tz(value: str) -> str | None:
    from pizzamail.triggers.cron import tz_problem

    return tz_problem(value)


CATCH_UP = ("once", "skip")
HOOK_AUTH = ("hmac", "bearer")
HOOK_THREAD = ("new", "one")


@dataclass(frozen=True, kw_only=True)
class ScheduleSettings:
    """One ``[schedules.NAME]``: a prompt started in the schedule's own thread at each cron time."""

    cron: str = setting("", "cron expression, such as \"0 8 * * 1-5\" (weekdays at 8)", _cron)
    tz: str = setting("UTC", "IANA time zone the cron expression is read in, such as Europe/Berlin", _tz)
    prompt: str = setting("", "the task given to the agent at each occurrence")
    catch_up: str = setting("once", "after downtime: once (run one missed occurrence) or skip",
                            lambda v: None if v in CATCH_UP else ", ".join(CATCH_UP))
    enabled: bool = setting(True, "false pauses the schedule")


@dataclass(frozen=True, kw_only=True)
class HookSettings:
    """One ``[hooks.NAME]``: ``POST /hooks/NAME`` starts a task (secret: `pizzamail keys set hook:NAME`)."""

    auth: str = setting("hmac", "hmac (X-Pizzamail-Signature) or bearer (Authorization: Bearer)",
                        lambda v: None if v in HOOK_AUTH else ", ".join(HOOK_AUTH))
    prompt: str = setting("", "Jinja2 template for the task, given payload (default: the payload)")
    thread: str = setting("new", "new (a thread per delivery) or one (one thread for this hook)",
                          lambda v: None if v in HOOK_THREAD else ", ".join(HOOK_THREAD))
    max_body: int = setting(1024 * 1024, "largest body accepted, bytes", _positive)
    rate: int = setting(30, "deliveries accepted per minute (burst of the same size)", _positive)


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


S = TypeVar("S")


def _section(cls: type[S], data: object, prefix: str) -> S:
    if not isinstance(data, dict):
        raise ConfigError(prefix, data, "a table")
    known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
    for key in data:
        if key not in known:
            raise ConfigError(f"{prefix}.{key}", data[key], "one of " + ", ".join(known))
    values: dict[str, Any] = {}
    for name, value in data.items():
        values[name] = _check(known[name], value, f"{prefix}.{name}")
    return cls(**values)


_TYPES: dict[str, tuple[type, str]] = {
    "int": (int, "a whole number"), "str": (str, "a quoted string"),
    "float": (float, "a number"), "bool": (bool, "true or false"),
    "list[str]": (list, "a list of quoted strings"),
    "dict[str, str]": (dict, "a table of quoted strings"),
}


def _check(f: Any, value: object, key: str) -> object:
    expected, described = _TYPES[f.type]
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigError(key, value, described)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    if any(not isinstance(item, str) for item in items):
        raise ConfigError(key, value, described)
    check = f.metadata.get("check")
    problem = check(value) if check else None
    if problem:
        raise ConfigError(key, value, problem)
    return value


def parse_config(data: dict[str, Any]) -> Config:
    """Build a validated :class:`Config` from parsed TOML."""
    sections = {"server": ServerSettings, "account": AccountSettings, "agent": AgentSettings,
                "runner": RunnerSettings, "tools": ToolsSettings, "skills": SkillsSettings,
                "approvals": ApprovalsSettings, "relay": RelaySettings}
    known = (*sections, "providers", "mcp", "schedules", "hooks")
    for key in data:
        if key not in known:
            raise ConfigError(key, data[key], "sections " + ", ".join(known))
    kwargs: dict[str, Any] = {
        name: _section(cls, data.get(name, {}), name) for name, cls in sections.items()
    }
    kwargs["providers"] = _providers(data.get("providers", {}))
    kwargs["mcp"] = _mcp(data.get("mcp", {}))
    kwargs["schedules"] = _named(data.get("schedules", {}), "schedules", schedule_settings)
    kwargs["hooks"] = _named(data.get("hooks", {}), "hooks", hook_settings)
    config = Config(**kwargs)
    relay = config.relay
    if relay.security == "none" and relay.host and relay.host not in ("127.0.0.1", "::1", "localhost"):
        raise ConfigError("relay.security", "none", "starttls or ssl for a relay beyond loopback")
    if config.account.address == config.agent.address:
        raise ConfigError("agent.address", config.agent.address, "an address other than yours")
    return config


def _providers(data: object) -> dict[str, ProviderSettings]:
    if not isinstance(data, dict):
        raise ConfigError("providers", data, "a table of [providers.NAME] sections")
    result = {}
    for name, table in data.items():
        # a written [providers.local] is the user's own (e.g. an OpenAI-compatible server on this
        # machine): only the embedded model's implicit section has kind "local"
        defaults: dict[str, Any] = dict(BUILTIN_PROVIDERS.get(name, {})) if name != "local" else {}
        settings = _section(ProviderSettings, {**defaults, **table}, f"providers.{name}")
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
    base = _section(McpSettings, rest, "mcp")
    return replace(base, servers={name: mcp_server(name, table) for name, table in servers.items()})


def mcp_server(name: str, table: object) -> McpServerSettings:
    """One ``[mcp.servers.NAME]`` section, validated (also used by ``pizzamail mcp add``)."""
    prefix = f"mcp.servers.{name}"
    if not SERVER_NAME_RE.match(name):
        raise ConfigError(prefix, name, "a server name of letters, digits, _ and - (at most 40)")
    settings = _section(McpServerSettings, table, prefix)
    if settings.command and settings.url:
        raise ConfigError(f"{prefix}.url", settings.url, "either command (stdio) or url, not both")
    if not (settings.command or settings.url):
        raise ConfigError(f"{prefix}.command", "", "a command (stdio) or a url (streamable HTTP)")
    return settings


TRIGGER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")


def _named(data: object, prefix: str, build: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(prefix, data, f"a table of [{prefix}.NAME] sections")
    return {name: build(name, table) for name, table in data.items()}


def _trigger_name(prefix: str, name: str) -> None:
    if not TRIGGER_NAME_RE.match(name):
        raise ConfigError(prefix, name, "a name of letters, digits, _ and - (at most 40)")


def schedule_settings(name: str, table: object) -> ScheduleSettings:
    """One ``[schedules.NAME]`` section, validated (also used by ``pizzamail schedule add``)."""
    prefix = f"schedules.{name}"
    _trigger_name(prefix, name)
    settings = _section(ScheduleSettings, table, prefix)
    if not settings.cron:
        raise ConfigError(f"{prefix}.cron", "", "a cron expression such as \"0 8 * * 1-5\"")
    if not settings.prompt.strip():
        raise ConfigError(f"{prefix}.prompt", settings.prompt, "the task text (not empty)")
    return settings


def hook_settings(name: str, table: object) -> HookSettings:
    prefix = f"hooks.{name}"
    _trigger_name(prefix, name)
    settings = _section(HookSettings, table, prefix)
    if settings.prompt:
        from pizzamail.triggers.hooks import template_problem

        problem = template_problem(settings.prompt)
        if problem:
            raise ConfigError(f"{prefix}.prompt", settings.prompt, problem)
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


def default_config_text() -> str:
    """The config.toml written by ``pizzamail init``: every setting with its default, documented."""
    lines = ["# pizzamail settings. Secrets are never stored here: see `pizzamail keys --help`.", ""]
    for name, cls in (("server", ServerSettings), ("account", AccountSettings),
                      ("agent", AgentSettings), ("runner", RunnerSettings)):
        lines.append(f"[{name}]")
        for f in fields(cls):
            lines.append(f"{f.name} = {_toml(f.default)}  # {f.metadata['doc']}")
        lines.append("")
    lines += [
        "# Any OpenAI-compatible endpoint; select it with agent.model = \"NAME:MODEL\".",
        "[providers.openai]",
        'base_url = "https://api.openai.com/v1"',
        "# key: found in the keyring (`pizzamail keys set openai`) or $OPENAI_API_KEY",
        "",
        *_TOOLS_EXAMPLE,
    ]
    return "\n".join(lines)


_TOOLS_EXAMPLE = [
    "# MCP servers (`pizzamail mcp add`, `pizzamail mcp list`). Nothing starts unless enabled = true.",
    "# [mcp.servers.files]",
    "# enabled = true",
    '# command = "npx"',
    '# args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/you/notes"]',
    "# [mcp.servers.files.policy]     # per tool: auto (run), ask (hold for approval), deny",
    '# "read_*" = "auto"',
    "# [mcp.servers.github]",
    "# enabled = true",
    '# url = "https://api.githubcopilot.com/mcp/"',
    '# headers = { Authorization = "Bearer ${secret:github}" }   # `pizzamail keys set github`',
    "",
    "# [tools.policy]                 # by the name the model sees: post_progress, files__read_file …",
    '# "write_file" = "ask"',
    "# [skills]",
    '# paths = ["~/.agents/skills"]   # besides skills/ in this folder',
    "",
    "# [approvals]",
    '# expires = "2h"                 # a held call nobody decided expires (default: never)',
    '# remind_after = "1d"            # one reminder in the thread',
    "# [relay]                        # approved drafts (draft_email) are sent through it",
    '# host = "smtp.example.com"',
    "# port = 587",
    '# security = "starttls"          # or "ssl" (port 465), "none" (loopback only)',
    '# user = "you@example.com"       # password: `pizzamail keys set relay`',
    "",
    "# Schedules (`pizzamail schedule add/list/rm`, `pizzamail triggers`): one thread per schedule.",
    "# [schedules.morning]",
    '# cron = "0 8 * * 1-5"           # weekdays at 8',
    '# tz = "Europe/Berlin"',
    '# prompt = "Summarise what changed in my projects since yesterday"',
    '# catch_up = "once"              # after downtime: once (one missed occurrence) or skip',
    "# Webhooks: POST http://127.0.0.1:8025/hooks/NAME, secret: `pizzamail keys set hook:NAME`",
    "# [hooks.github]",
    '# auth = "hmac"                  # X-Pizzamail-Signature; or "bearer" (Authorization: Bearer)',
    '# prompt = "New issue: {{ payload.issue.title }}"   # Jinja2; default: the whole payload',
    '# thread = "new"                 # or "one": every delivery continues one thread',
    "",
]


def _toml(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value).lower() if isinstance(value, bool) else str(value)
