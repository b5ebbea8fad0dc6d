"""The ``config.toml`` that ``pizzamail init`` writes: core settings documented, examples for the rest."""

from __future__ import annotations

from typing import Any

from pizzamail.config.sections import (
    REMOTE_CONCURRENCY,
    AccountSettings,
    AgentSettings,
    RunnerSettings,
    ServerSettings,
)


def default_config_text() -> str:
    """The config.toml written by ``pizzamail init``: every setting with its default, documented."""
    lines = ["# pizzamail settings. Secrets are never stored here: see `pizzamail keys --help`.", ""]
    sections: tuple[tuple[str, Any], ...] = (("server", ServerSettings), ("account", AccountSettings),
                                             ("agent", AgentSettings), ("runner", RunnerSettings))
    for section, cls in sections:
        lines.append(f"[{section}]")
        for name, f in cls.__pydantic_fields__.items():
            # a default that depends on other settings is shown commented out with its usual value
            value = f"{name} = {_toml(f.default)}" if f.default is not None else f"# {name} = {_USUAL[name]}"
            lines.append(f"{value}  # {f.description}")
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


#: the usual value of a setting whose default depends on others (written commented out)
_USUAL = {"concurrency": REMOTE_CONCURRENCY}

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
    "# Specialist agents, each at its own address (`pizzamail agents`): mail To it runs it.",
    "# [agents.research]               # address: research@ the [agent] address's domain",
    '# name = "Research"',
    '# instructions = "You are a careful researcher; cite every source."   # or instructions_file',
    '# tools = ["web__*", "read_attachment"]   # tool-name globs it is offered (default: all)',
    "# [agents.research.policy]        # on top of [tools.policy]: where both name a tool, the stricter wins",
    '# "web__fetch" = "auto"',
    "",
    "# [approvals]",
    '# expires = "2h"                 # a held call nobody decided expires (default: never)',
    '# remind_after = "1d"            # one reminder in the thread',
    "# [relay]                        # approved drafts (draft_email) are sent through it",
    '# host = "smtp.example.com"',
    "# port = 587",
    '# security = "starttls"          # or "ssl" (port 465), "none" (loopback only)',
    '# user = "you@example.com"       # password: `pizzamail keys set relay`',
    "# [store]                        # state in PostgreSQL, shared by `serve` and `pizzamail worker`s",
    '# url = "postgresql://pizzamail@db.internal/pizzamail"   # password: `pizzamail keys set store`',
    "# [activity]                     # the Activity folder: one status mail per run",
    '# keep_finished = "24h"          # a finished run\'s mail stays this long',
    "",
    "# Schedules (`pizzamail schedule add/list/run/rm`, `pizzamail triggers`): one thread per schedule.",
    "# [schedules.morning]",
    '# when = "every weekday at 8"    # or cron = "0 8 * * 1-5"; "every 15 minutes", "every mon at 9" …',
    '# tz = "Europe/Berlin"           # default: [agent] timezone, else this machine\'s zone',
    '# prompt = "Summarise what changed in my projects since yesterday"',
    '# catch_up = "once"              # after downtime: once (one missed occurrence) or skip',
    '# model = "openai:gpt-4.1"       # its runs\' model (default: [agent] model); hooks, watches too',
    "# Webhooks: POST http://127.0.0.1:8025/hooks/NAME, secret: `pizzamail keys set hook:NAME`",
    "# [hooks.github]",
    '# auth = "hmac"                  # X-Pizzamail-Signature; or "bearer" (Authorization: Bearer)',
    '# prompt = "New issue: {{ payload.issue.title }}"   # Jinja2; default: the whole payload',
    '# thread = "new"                 # or "one": every delivery continues one thread',
    "# [hooks.github.policy]          # its runs read outsiders' text: remember is denied unless named",
    '# "*" = "ask"',
    "# Watched mailboxes: new mail in a remote folder becomes a task; `pizzamail keys set watch:NAME`",
    "# [watches.support]",
    '# host = "imap.example.com"',
    '# user = "support@example.com"',
    '# folder = "INBOX"              # read-only: nothing on that server changes',
    "# [watches.support.policy]       # same as [hooks.NAME.policy]; remember = \"auto\" allows notes",
    '# "*" = "ask"',
    "# Programs that mail tasks with their own SMTP login: `pizzamail account password --sender NAME`",
    "# [senders.cron]",
    '# address = "cron@localhost"     # the From it sends as; login: the NAME (or user = "…")',
    "# approve = false                # its mail may not decide approvals",
    "# rate = 30                      # mails a minute; more are answered 450 (its mailer retries)",
    "",
]


def _toml(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value).lower() if isinstance(value, bool) else str(value)
