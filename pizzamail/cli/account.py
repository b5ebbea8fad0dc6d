"""``account`` (the mail login) and ``keys`` (provider API keys)."""

from __future__ import annotations

import sys

import click

from pizzamail.cli.app import App
from pizzamail.secrets import ACCOUNT_PASSWORD


@click.group()
def account() -> None:
    """Your mail account on pizzamail's SMTP and IMAP servers."""


@account.command("password")
@click.pass_obj
def account_password(app: App) -> None:
    """Print the mail password (for your mail client)."""
    click.echo(app.secrets.account_password())


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
