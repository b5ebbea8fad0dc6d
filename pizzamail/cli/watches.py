"""``pizzamail watch test NAME``: check a watched mailbox's settings before `serve` relies on them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from pizzamail.account.session import client_context
from pizzamail.cli.app import App
from pizzamail.errors import SecretMissing
from pizzamail.triggers.watch import POLL_SECONDS, probe


@click.group()
def watch() -> None:
    """Watched remote mailboxes: new mail there becomes a task ([watches.NAME] in config.toml)."""


@watch.command("test")
@click.argument("name")
@click.option("--cafile", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Trust only this CA certificate (PEM), e.g. a server's self-signed one.")
@click.pass_obj
def watch_test(app: App, name: str, cafile: Path | None) -> None:
    """Connect, log in and examine the folder (read-only); print what the watch would see."""
    settings = app.config.watches.get(name)
    if settings is None:
        raise click.ClickException(f"no watch {name!r} (add [watches.{name}] to config.toml)")
    password = app.secrets.get(f"watch:{name}")
    if not password:
        raise SecretMissing(f"watch:{name}", f"pizzamail keys set watch:{name}")
    tls = client_context(str(cafile)) if cafile else None
    found = asyncio.run(probe(name, settings, password, tls=tls))
    click.echo(f"watch {name}: logged in to {settings.host}:{settings.port} as {settings.user}")
    click.echo(f"folder {settings.folder}: {found.exists} message(s), UIDNEXT {found.uidnext},"
               f" UIDVALIDITY {found.uidvalidity}")
    click.echo("IDLE: supported (new mail is pushed)" if found.idle
               else f"IDLE: not supported (the folder is polled every {POLL_SECONDS:g} s)")
    mode = "read-only (nothing is marked seen)" if settings.read_only else "mail handled is marked seen"
    click.echo(f"mode: {mode}; thread: {settings.thread}")
