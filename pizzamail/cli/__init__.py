"""The ``pizzamail`` command: one click group, commands split by area.

A command's module is imported only when that command runs: together they pull in the MCP SDK,
jinja2, cryptography and the rest, which took over a second before any command could start.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from pizzamail import __version__
from pizzamail.cli.app import App
from pizzamail.errors import PizzamailError

# name: (module under pizzamail.cli, the command's one-line help). The help is written here so that
# `--help` imports no command module; tests/test_cli.py checks that it matches the command's own.
COMMANDS: dict[str, tuple[str, str]] = {
    "account": ("account", "Your mail account on pizzamail's SMTP and IMAP servers."),
    "activity": ("activity", "What each active or recently finished run is doing, as the Activity folder "
                 "shows it."),
    "agents": ("agents", "The agents to write to: the main one ([agent]) and each [agents.NAME]."),
    "approvals": ("approvals", "List the actions waiting for your decision."),
    "approve": ("approvals", "Approve a held action: it runs once and the agent continues."),
    "backup": ("backup", "Write the whole home (mail, threads, config, skills) to FILE (.tar.gz), even "
               "while serving."),
    "deny": ("approvals", "Deny a held action; the optional REASON goes to the agent."),
    "doctor": ("doctor", "Check the home folder, config, secrets, model key, MCP servers, skills and "
               "running server."),
    "export": ("backup", "Write the mails of THREAD to an mbox FILE (default: thread-THREAD.mbox)."),
    "init": ("serve", "Create the home folder, config.toml and the mail password."),
    "keys": ("account", "API keys for model providers, kept in the OS keyring."),
    "logs": ("logs", "Show serve's log readably: time, level, part, message, and the run and thread it is "
             "about."),
    "mailbox": ("mailbox", 'Your own mail account as pizzamail\'s mailbox ([mailbox] mode = "imap" in '
                'config.toml).'),
    "migrate-store": ("migrate", "Copy this home's state (threads, runs, mail, blobs, run files) into an "
                      "empty PostgreSQL database, e.g. postgresql://pizzamail@db.internal/pizzamail."),
    "mcp": ("mcp", "MCP servers: the tools the agent can use beyond the built-ins."),
    "memory": ("memory", "The agent's notes across threads (list; `memory rm ID`, `memory edit ID`)."),
    "models": ("models", "Model providers, the one `[agent] model` selects (*), and where each key is "
               "found."),
    "onboard": ("onboard", "Set up a mail client: an Apple profile for Mail, Thunderbird, neomutt and aerc."),
    "restore": ("backup", "Unpack a backup FILE into an empty home (--home or PIZZAMAIL_HOME)."),
    "rules": ("approvals", 'Standing rules made by "approve always" (list; `rules rm ID` revokes one).'),
    "schedule": ("triggers", "Recurring tasks: a prompt started at set times, each schedule in one thread."),
    "serve": ("serve", "Run the SMTP and IMAP servers and the agent runner until Ctrl-C."),
    "skills": ("skills", "Agent Skills: folders with a SKILL.md in skills/ and in [skills] paths."),
    "stop": ("stop", "Stop the run working in THREAD (and its queued follow-ups); the thread gets a "
             "\"Stopped\" mail."),
    "task": ("threads", "Give the agent a task without writing a mail; the answer arrives in INBOX."),
    "threads": ("threads", "List threads, newest first, with their status."),
    "triggers": ("triggers", "Every trigger (schedules, webhooks, senders, watched mailboxes) with its last "
                 "firing and outcome."),
    "watch": ("watches", "Watched remote mailboxes: new mail there becomes a task ([watches.NAME] in "
              "config.toml)."),
    "worker": ("worker", "Work on queued runs beside a `serve` that shares the PostgreSQL store, until "
               "Ctrl-C."),
}


class LazyGroup(click.Group):
    """A group whose commands are found in :data:`COMMANDS` and imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"pizzamail.cli.{COMMANDS[cmd_name][0]}")
        command: click.Command = getattr(module, cmd_name.replace("-", "_"))
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(map(len, COMMANDS))  # click's own spacing
        # a bare command with the same help shortens it the way the real one would
        rows = [(name, click.Command(name, help=text).get_short_help_str(limit))
                for name, (_, text) in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home", type=click.Path(file_okay=False, path_type=Path), envvar="PIZZAMAIL_HOME",
    help="pizzamail's folder (default: $PIZZAMAIL_HOME, else your user data dir).",
)
@click.version_option(__version__, prog_name="pizzamail")
@click.pass_context
def cli(ctx: click.Context, home: Path | None) -> None:
    """A self-hosted inbox for background AI agents: email a task, get the answer by mail."""
    ctx.obj = App.for_home(home)


def main() -> None:
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except PizzamailError as exc:
        click.echo(exc.cli_message(), err=True)
        sys.exit(exc.exit_code)
