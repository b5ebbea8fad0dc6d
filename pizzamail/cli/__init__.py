"""The ``pizzamail`` command: one click group, commands split by area."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pizzamail import __version__
from pizzamail.cli.account import account, keys
from pizzamail.cli.app import App
from pizzamail.cli.approvals import approvals, approve, deny, rules
from pizzamail.cli.doctor import doctor
from pizzamail.cli.mcp import mcp
from pizzamail.cli.models import models
from pizzamail.cli.serve import init, serve
from pizzamail.cli.skills import skills
from pizzamail.cli.threads import task, threads
from pizzamail.cli.triggers import schedule, triggers
from pizzamail.cli.watches import watch
from pizzamail.errors import PizzamailError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home", type=click.Path(file_okay=False, path_type=Path), envvar="PIZZAMAIL_HOME",
    help="pizzamail's folder (default: $PIZZAMAIL_HOME, else your user data dir).",
)
@click.version_option(__version__, prog_name="pizzamail")
@click.pass_context
def cli(ctx: click.Context, home: Path | None) -> None:
    """A self-hosted inbox for background AI agents: email a task, get the answer by mail."""
    ctx.obj = App.for_home(home)


for command in (init, serve, task, threads, account, keys, models, mcp, skills, doctor, approvals, approve,
                deny, rules, schedule, triggers, watch):
    cli.add_command(command)


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
