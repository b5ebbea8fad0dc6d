"""The core sections of ``config.toml``: servers, account, agent, runner, providers, tools, approvals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pizzamail.config.fields import (
    address_problem,
    addresses_problem,
    duration_problem,
    host_problem,
    model_problem,
    one_of,
    policies_problem,
    port_problem,
    positive,
    setting,
    url_problem,
    user_problem,
)
from pizzamail.config.triggers import tz_check


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    host: str = setting("127.0.0.1", "address the SMTP, IMAP and HTTP servers bind to", host_problem)
    smtp_port: int = setting(1587, "SMTP submission port", port_problem)
    imap_port: int = setting(1143, "IMAP port (plain, STARTTLS available)", port_problem)
    imaps_port: int = setting(1993, "IMAP port with implicit TLS", port_problem)
    http_port: int = setting(8025, "HTTP port (health, client autoconfig)", port_problem)
    max_message_size: int = setting(25 * 1024 * 1024, "largest mail accepted, bytes", positive)
    tls_cert: str = setting("", "PEM certificate (default: tls/cert.pem, made by init)")
    tls_key: str = setting("", "PEM private key (default: tls/key.pem, made by init)")


@dataclass(frozen=True, kw_only=True)
class AccountSettings:
    user: str = setting("me", "login name of your mail account", user_problem)
    address: str = setting("me@pizzamail.localhost", "your address; only it may send tasks", address_problem)


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    address: str = setting("bot@pizzamail.localhost", "the agent's address", address_problem)
    name: str = setting("pizzamail", "display name on the agent's mail")
    model: str = setting("openai:gpt-4.1-mini", "provider:model used for runs", model_problem)
    max_steps: int = setting(20, "most model calls in one run (then one tool-free summary call)", positive)
    max_tool_calls: int = setting(50, "most tool calls in one run", positive)
    max_tokens: int = setting(200_000, "most tokens (input + output, all calls) in one run", positive)
    max_seconds: int = setting(1800, "most wall-clock seconds one run works before it summarises", positive)
    offline_model: bool = setting(
        True, "answer with the embedded offline model (pizzamail[local]) when no provider has a key")
    history_messages: int = setting(40, "most earlier thread messages shown to the model", positive)
    timezone: str = setting("", "IANA zone of schedules that name none, such as Europe/Berlin"
                            " (empty: this machine's zone)", lambda v: tz_check(v) if v else None)


@dataclass(frozen=True, kw_only=True)
class RunnerSettings:
    concurrency: int = setting(2, "runs worked on at the same time", positive)
    max_attempts: int = setting(
        10, "times in a row a crash may cut a run off before it gets any further; then it fails (such a"
            " run resumes alone: another run's crash does not count against it)", positive)


@dataclass(frozen=True, kw_only=True)
class ProviderSettings:
    kind: str = setting("openai", "wire format: openai (any OpenAI-compatible endpoint), anthropic,"
                                   " bedrock or local")
    base_url: str = setting("https://api.openai.com/v1", "endpoint base URL")
    key: str = setting("", "keyring entry holding the API key (default: the provider's name)")
    key_env: str = setting("", "environment variable with the key (openai: OPENAI_API_KEY)")
    key_required: bool = setting(True, "false for local servers that take no key (Ollama, LM Studio)")
    timeout: float = setting(120.0, "seconds to wait for one answer", positive)
    max_retries: int = setting(4, "retries on 429/5xx and network errors")
    max_tokens: int = setting(4096, "anthropic, bedrock: most tokens in one answer", positive)
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
    url: str = setting("", "streamable HTTP endpoint, such as http://127.0.0.1:8000/mcp", url_problem)
    headers: dict[str, str] = setting({}, "HTTP headers; values may say ${VAR} or ${secret:NAME}")  # noqa: RUF009
    timeout: float = setting(60.0, "seconds one tool call may take", positive)
    policy: dict[str, str] = setting({}, "tool name glob -> auto, ask or deny", policies_problem)  # noqa: RUF009
    expires: str = setting("", "held calls of this server expire unanswered after this (\"2h\")",
                           duration_problem)

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


@dataclass(frozen=True, kw_only=True)
class McpSettings:
    startup_timeout: float = setting(20.0, "seconds a server may take to start and list its tools",
                                     positive)
    retry_initial: float = setting(5.0, "seconds before the first restart of a failed server", positive)
    retry_max: float = setting(300.0, "longest wait between restarts of a failed server", positive)
    servers: dict[str, McpServerSettings] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ToolsSettings:
    policy: dict[str, str] = setting({}, "tool name glob (as the model sees it) -> auto, ask or deny",  # noqa: RUF009
                                     policies_problem)
    max_result_chars: int = setting(20000, "longest tool result handed to the model", positive)
    max_file_bytes: int = setting(10 * 1024 * 1024, "largest file write_file may make", positive)


@dataclass(frozen=True, kw_only=True)
class SkillsSettings:
    enabled: bool = setting(True, "offer Agent Skills from skills/ and the paths below")
    paths: list[str] = setting([], "more folders holding skill folders")  # noqa: RUF009




@dataclass(frozen=True, kw_only=True)
class ApprovalsSettings:
    approvers: list[str] = setting([], "addresses whose replies decide approvals (empty: your own)",  # noqa: RUF009
                                   addresses_problem)
    expires: str = setting("", "a held call nobody decided expires after this (\"2h\", \"1d\");"
                           " empty: never", duration_problem)
    remind_after: str = setting("", "one reminder in the thread after this (\"1d\"); empty: none",
                                duration_problem)


RELAY_SECURITY = ("starttls", "ssl", "none")


@dataclass(frozen=True, kw_only=True)
class RelaySettings:
    """The outgoing SMTP relay that approved drafts (``draft_email``) are sent through."""

    host: str = setting("", "relay host name, such as smtp.example.com; empty: no relay")
    port: int = setting(587, "relay port (587 submission, 465 implicit TLS)", port_problem)
    security: str = setting("starttls", "starttls, ssl or none (none only for a relay on loopback)",
                            one_of(RELAY_SECURITY))
    user: str = setting("", "login at the relay (its password: `pizzamail keys set relay`); empty: none")
    timeout: float = setting(30.0, "seconds the relay may take", positive)

    @property
    def configured(self) -> bool:
        return bool(self.host)

