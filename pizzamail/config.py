"""Typed settings read from ``config.toml``; the one place that validates and explains them.

Each section is a keyword-only dataclass whose fields carry their default and a description. A wrong
value raises :class:`ConfigError` naming the key, the value and what is allowed. Secrets never live
here: a provider names the keyring entry that holds its key.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import dataclass, field, fields
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


def setting(default: Any, doc: str, check: Any = None) -> Any:
    """A config field: its default, a one-line description, and an optional validator."""
    return field(default=default, metadata={"doc": doc, "check": check})


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
    max_steps: int = setting(20, "most model calls in one run", _positive)
    history_messages: int = setting(40, "most earlier thread messages shown to the model", _positive)


@dataclass(frozen=True, kw_only=True)
class RunnerSettings:
    concurrency: int = setting(2, "runs worked on at the same time", _positive)
    max_attempts: int = setting(3, "times a run is resumed after a crash before it fails", _positive)


@dataclass(frozen=True, kw_only=True)
class ProviderSettings:
    kind: str = setting("openai", "wire format: openai (any OpenAI-compatible endpoint)")
    base_url: str = setting("https://api.openai.com/v1", "endpoint base URL")
    key: str = setting("", "keyring entry holding the API key (default: the provider's name)")
    key_env: str = setting("", "environment variable with the key (openai: OPENAI_API_KEY)")
    key_required: bool = setting(True, "false for local servers that take no key (Ollama, LM Studio)")
    timeout: float = setting(120.0, "seconds to wait for one answer", _positive)
    max_retries: int = setting(4, "retries on 429/5xx and network errors")


PROVIDER_KINDS = ("openai",)


@dataclass(frozen=True, kw_only=True)
class Config:
    server: ServerSettings = field(default_factory=ServerSettings)
    account: AccountSettings = field(default_factory=AccountSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)
    runner: RunnerSettings = field(default_factory=RunnerSettings)
    providers: dict[str, ProviderSettings] = field(default_factory=dict)

    @property
    def domain(self) -> str:
        return self.agent.address.rpartition("@")[2]

    def provider(self, name: str) -> ProviderSettings | None:
        """Settings for a provider; ``openai`` works without a section."""
        if name in self.providers:
            return self.providers[name]
        if name == "openai":
            return ProviderSettings(key_env="OPENAI_API_KEY")
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
}


def _check(f: Any, value: object, key: str) -> object:
    expected, described = _TYPES[f.type]
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigError(key, value, described)
    check = f.metadata.get("check")
    problem = check(value) if check else None
    if problem:
        raise ConfigError(key, value, problem)
    return value


def parse_config(data: dict[str, Any]) -> Config:
    """Build a validated :class:`Config` from parsed TOML."""
    sections = {"server": ServerSettings, "account": AccountSettings, "agent": AgentSettings,
                "runner": RunnerSettings}
    for key in data:
        if key not in (*sections, "providers"):
            raise ConfigError(key, data[key], "sections " + ", ".join([*sections, "providers"]))
    kwargs: dict[str, Any] = {
        name: _section(cls, data.get(name, {}), name) for name, cls in sections.items()
    }
    kwargs["providers"] = _providers(data.get("providers", {}))
    config = Config(**kwargs)
    if config.account.address == config.agent.address:
        raise ConfigError("agent.address", config.agent.address, "an address other than yours")
    return config


def _providers(data: object) -> dict[str, ProviderSettings]:
    if not isinstance(data, dict):
        raise ConfigError("providers", data, "a table of [providers.NAME] sections")
    result = {}
    for name, table in data.items():
        defaults = {"key_env": "OPENAI_API_KEY"} if name == "openai" else {}
        settings = _section(ProviderSettings, {**defaults, **table}, f"providers.{name}")
        if settings.kind not in PROVIDER_KINDS:
            raise ConfigError(f"providers.{name}.kind", settings.kind, ", ".join(PROVIDER_KINDS))
        result[name] = settings
    return result


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
    ]
    return "\n".join(lines)


def _toml(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value).lower() if isinstance(value, bool) else str(value)
