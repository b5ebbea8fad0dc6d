"""``account`` (the mail login) and ``keys`` (provider API keys)."""

from __future__ import annotations

import secrets as _random
import sys

import click

from pizzamail.auth import sender_key
from pizzamail.cli.app import App
from pizzamail.config import SenderSettings
from pizzamail.secrets import ACCOUNT_PASSWORD


@click.group()
def account() -> None:
    """Your mail account on pizzamail's SMTP and IMAP servers."""


@account.command("password")
@click.option("--sender", "name", metavar="NAME",
              help="Print the password of the program [senders.NAME] instead (created if missing).")
@click.pass_obj
def account_password(app: App, name: str | None) -> None:
    """Print the mail password (for your mail client), or a sender's (for its program)."""
    if name is None:
        click.echo(app.secrets.account_password())
        return
    sender = _configured_sender(app, name)
    click.echo(_sender_password(app, name))
    click.echo(_sender_hint(app, name, sender), err=True)  # stderr: PASSWORD=$(…) gets the password only


def _configured_sender(app: App, name: str) -> SenderSettings:
    senders = app.config.senders
    if name not in senders:
        known = ", ".join(sorted(senders)) or "none; add a [senders.NAME] section to config.toml"
        raise click.ClickException(f"no sender {name!r} in config.toml; configured senders: {known}")
    return senders[name]


def _sender_password(app: App, name: str) -> str:
    """The stored password, or a new one stored now (the program needs it before it can log in)."""
    key = sender_key(name)
    password = app.secrets.get(key)
    if not password:
        password = _random.token_urlsafe(18)
        app.home.create_dirs()
        app.secrets.set(key, password)
        app.secrets.remember_name(key, present=True)
    return password


def _sender_hint(app: App, name: str, sender: SenderSettings) -> str:
    server = app.config.server
    hint = (f"{name}: SMTP {server.host} port {server.smtp_port}, login {sender.login(name)},"
            f" send from {sender.address}")
    return hint if sender.enabled else hint + " (disabled: set enabled = true to let it log in)"


@click.group()
def keys() -> None:
    """API keys for model providers, kept in the OS keyring."""


@keys.command("set")
@click.argument("name")
@click.pass_obj
def keys_set(app: App, name: str) -> None:
    """Store the key NAME, read from stdin (or typed at a hidden prompt)."""
    _refuse_reserved(name)
    if sys.stdin.isatty():
        value = click.prompt(f"Key for {name}", hide_input=True)
    else:
        value = sys.stdin.read()
    value = value.strip()
    if not value:
        raise click.UsageError("the key is empty; pipe it in: `echo KEY | pizzamail keys set NAME`")
    app.home.create_dirs()
    app.secrets.set(name, value)
    app.secrets.remember_name(name, present=True)
    click.echo(f"stored key {name!r} in {app.secrets.location}")


@keys.command("list")
@click.pass_obj
def keys_list(app: App) -> None:
    """List the names of stored keys (never their values)."""
    names = [n for n in app.secrets.names() if n != ACCOUNT_PASSWORD]
    for name in names:
        click.echo(name)
    if not names:
        click.echo("no keys stored; add one with `pizzamail keys set openai`", err=True)


@keys.command("delete")
@click.argument("name")
@click.pass_obj
def keys_delete(app: App, name: str) -> None:
    """Delete the key NAME."""
    _refuse_reserved(name)
    if not app.secrets.delete(name):
        raise click.ClickException(f"no key named {name!r}")
    app.secrets.remember_name(name, present=False)
    click.echo(f"deleted key {name!r}")


def _refuse_reserved(name: str) -> None:
    if name == ACCOUNT_PASSWORD or name.startswith("__"):
        raise click.UsageError(f"{name!r} is reserved for pizzamail's own use")
