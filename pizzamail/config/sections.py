"""The core sections of ``config.toml``: servers, account, agent, runner, providers, tools, approvals."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from pizzamail.config.checks import (
    SECTION,
    Address,
    Amount,
    BindAddress,
    Count,
    Duration,
    Policies,
    Port,
    Seconds,
    Zone,
    addresses_problem,
    checked,
    duration_seconds,
    model_problem,
    one_of,
    pool_problem,
    setting,
    store_url_problem,
    url_problem,
    user_problem,
)


@dataclass(frozen=True, kw_only=True, config=SECTION)
class ServerSettings:
    host: BindAddress = setting(
        "127.0.0.1", "address the SMTP, IMAP and HTTP servers bind to")
    smtp_port: Port = setting(1587, "SMTP submission port")
    imap_port: Port = setting(1143, "IMAP port (plain, STARTTLS available)")
    imaps_port: Port = setting(1993, "IMAP port with implicit TLS")
    http_port: Port = setting(8025, "HTTP port (health, client autoconfig)")
    max_message_size: Count = setting(25 * 1024 * 1024, "largest mail accepted, bytes")
    tls_cert: StrictStr = setting("", "PEM certificate (default: tls/cert.pem, made by init)")
    tls_key: StrictStr = setting("", "PEM private key (default: tls/key.pem, made by init)")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class AccountSettings:
    user: Annotated[StrictStr, checked(user_problem)] = setting("me", "login name of your mail account")
    address: Address = setting("me@pizzamail.localhost", "your address; only it may send tasks")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class AgentSettings:
    address: Address = setting("bot@pizzamail.localhost", "the agent's address")
    name: StrictStr = setting("pizzamail", "display name on the agent's mail")
    model: Annotated[StrictStr, checked(model_problem)] = setting(
        "openai:gpt-4.1-mini", "provider:model used for runs")
    max_steps: Count = setting(20, "most model calls in one run (then one tool-free summary call)")
    max_tool_calls: Count = setting(50, "most tool calls in one run")
    max_tokens: Count = setting(200_000, "most tokens (input + output, all calls) in one run")
    max_seconds: Count = setting(1800, "most wall-clock seconds one run works before it summarises")
    offline_model: StrictBool = setting(
        True, "answer with the embedded offline model (pizzamail[local]) when no provider has a key")
    history_messages: Count = setting(40, "most earlier thread messages shown to the model")
    max_delegates: Count = setting(8, "most child runs one run may start with `delegate`")
    timezone: Zone = setting("", "IANA zone of schedules that name none, such as Europe/Berlin"
                             " (empty: this machine's zone)")


#: runs worked on at once by default when a remote provider answers: they mostly wait on its answers
REMOTE_CONCURRENCY = 32


@dataclass(frozen=True, kw_only=True, config=SECTION)
class RunnerSettings:
    concurrency: Amount | None = setting(
        None, f"runs worked on at the same time (default: {REMOTE_CONCURRENCY} with a remote model"
              " provider, 1 when the embedded offline model answers; 0: none in serve, all in"
              " `pizzamail worker`s, which need [store] url)")
    max_attempts: Count = setting(
        10, "times in a row a crash may cut a run off before it gets any further; then it fails (such a"
            " run resumes alone: another run's crash does not count against it)")
    delegation_depth: Count = setting(
        2, "most delegations in a row: a run this many delegations away from the user's task is"
           " not offered `delegate`")
    separate: StrictBool = setting(
        False, "work on runs in a process of their own beside serve (a SQLite home): taking and"
               " serving mail keeps serve's process to itself while runs work")

    def runs_at_once(self, *, embedded_model: bool) -> int:
        """``concurrency`` when config.toml sets it; else one run at a time for the embedded model (one
        llama.cpp engine in this process answers one prompt at a time, on this machine's cores),
        :data:`REMOTE_CONCURRENCY` for a remote provider."""
        if self.concurrency is not None:
            return self.concurrency
        return 1 if embedded_model else REMOTE_CONCURRENCY


@dataclass(frozen=True, kw_only=True, config=SECTION)
class ProviderSettings:
    kind: StrictStr = setting("openai", "wire format: openai (any OpenAI-compatible endpoint), anthropic,"
                                   " bedrock, local or a kind a plugin registers")
    base_url: StrictStr = setting("https://api.openai.com/v1", "endpoint base URL")
    key: StrictStr = setting("", "keyring entry holding the API key (default: the provider's name)")
    key_env: StrictStr = setting("", "environment variable with the key (openai: OPENAI_API_KEY)")
    key_required: StrictBool = setting(True, "false for local servers that take no key (Ollama, LM Studio)")
    timeout: Seconds = setting(120.0, "seconds to wait for one answer")
    max_retries: StrictInt = setting(4, "retries on 429/5xx and network errors")
    max_tokens: Count = setting(4096, "anthropic, bedrock: most tokens in one answer")
    region: StrictStr = setting("", "bedrock: AWS region (default: $AWS_REGION, else us-east-1)")
    vision: StrictBool = setting(True, "the model takes images; false: it is told each image's name,"
                                       " type and size instead")


#: the sections that work without being written in config.toml, with their defaults
BUILTIN_PROVIDERS: dict[str, dict[str, Any]] = {
    "openai": {"key_env": "OPENAI_API_KEY"},
    "anthropic": {"kind": "anthropic", "base_url": "https://api.anthropic.com",
                  "key_env": "ANTHROPIC_API_KEY"},
    "local": {"kind": "local", "base_url": "", "key_required": False},
    # base_url "" = https://bedrock-runtime.{region}.amazonaws.com; no key = SigV4 from the AWS chain
    "bedrock": {"kind": "bedrock", "base_url": "", "key_env": "AWS_BEARER_TOKEN_BEDROCK",
                "key_required": False},
    # most models pulled into Ollama are text-only: set vision = true for one that sees
    "ollama": {"base_url": "http://127.0.0.1:11434/v1", "key_required": False, "vision": False},
}


@dataclass(frozen=True, kw_only=True, config=SECTION)
class McpServerSettings:
    """One MCP server: a program spoken to over stdio (``command``) or a streamable HTTP ``url``."""

    enabled: StrictBool = setting(False, "nothing is started unless this is true")
    command: StrictStr = setting("", "stdio: the program to start")
    args: list[StrictStr] = setting([], "stdio: its arguments")
    env: dict[str, StrictStr] = setting({}, "stdio: extra environment; values may say ${VAR}")
    cwd: StrictStr = setting("", "stdio: working directory (default: the home folder)")
    url: Annotated[StrictStr, checked(url_problem)] = setting(
        "", "streamable HTTP endpoint, such as http://127.0.0.1:8000/mcp")
    headers: dict[str, StrictStr] = setting({}, "HTTP headers; values may say ${VAR} or ${secret:NAME}")
    sse: StrictBool = setting(False, "url: the legacy HTTP+SSE transport instead of streamable HTTP")
    auth: Literal["", "oauth"] = setting(
        "", '"oauth": log in with OAuth 2.1 (`pizzamail mcp login NAME`; tokens stay in the keyring)')
    scope: StrictStr = setting("", "oauth: the scopes to ask for (default: those the server names)")
    timeout: Seconds = setting(60.0, "seconds one tool call may take")
    policy: Policies = setting({}, "tool name glob -> auto, ask or deny")
    expires: Duration = setting("", "held calls of this server expire unanswered after this (\"2h\")")

    @property
    def transport(self) -> str:
        return ("sse" if self.sse else "http") if self.url else "stdio"


@dataclass(frozen=True, kw_only=True, config=SECTION)
class McpSettings:
    startup_timeout: Seconds = setting(20.0, "seconds a server may take to start and list its tools")
    retry_initial: Seconds = setting(5.0, "seconds before the first restart of a failed server")
    retry_max: Seconds = setting(300.0, "longest wait between restarts of a failed server")
    servers: dict[str, McpServerSettings] = Field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, config=SECTION)
class ToolsSettings:
    policy: Policies = setting({}, "tool name glob (as the model sees it) -> auto, ask or deny")
    max_result_chars: Count = setting(20000, "longest tool result handed to the model")
    max_file_bytes: Count = setting(10 * 1024 * 1024, "largest file write_file may make")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class SkillsSettings:
    enabled: StrictBool = setting(True, "offer Agent Skills from skills/ and the paths below")
    paths: list[StrictStr] = setting([], "more folders holding skill folders")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class ApprovalsSettings:
    approvers: Annotated[list[StrictStr], checked(addresses_problem)] = setting(
        [], "addresses whose replies decide approvals (empty: your own)")
    expires: Duration = setting("", "a held call nobody decided expires after this (\"2h\", \"1d\");"
                                " empty: never")
    remind_after: Duration = setting("", "one reminder in the thread after this (\"1d\"); empty: none")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class ActivitySettings:
    keep_finished: Duration = setting(
        "24h", "a finished run's status mail leaves Activity after this (\"1h\", \"2d\"); empty: at once")

    @property
    def keep(self) -> timedelta:
        return timedelta(seconds=duration_seconds(self.keep_finished) or 0)


@dataclass(frozen=True, kw_only=True, config=SECTION)
class StoreSettings:
    """Where pizzamail's state lives: SQLite in the home folder, or a PostgreSQL database that any
    number of ``serve`` and ``worker`` processes share."""

    url: Annotated[StrictStr, checked(store_url_problem)] = setting(
        "", "postgresql://USER@HOST/DB (password: `pizzamail keys set store` or $PGPASSWORD);"
        " empty: SQLite in the home folder")
    pool: Annotated[StrictInt, checked(pool_problem)] = setting(
        10, "PostgreSQL: most connections one process keeps open (at least 3)")
    lease_seconds: Seconds = setting(
        30.0, "PostgreSQL: a worker that stops renewing its claim on a run this long loses it to another")


RELAY_SECURITY = ("starttls", "ssl", "none")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class RelaySettings:
    """The outgoing SMTP relay that approved drafts (``draft_email``) are sent through."""

    host: StrictStr = setting("", "relay host name, such as smtp.example.com; empty: no relay")
    port: Port = setting(587, "relay port (587 submission, 465 implicit TLS)")
    security: Annotated[StrictStr, one_of(RELAY_SECURITY)] = setting(
        "starttls", "starttls, ssl or none (none only for a relay on loopback)")
    user: StrictStr = setting(
        "", "login at the relay (its password: `pizzamail keys set relay`); empty: none")
    timeout: Seconds = setting(30.0, "seconds the relay may take")

    @property
    def configured(self) -> bool:
        return bool(self.host)

