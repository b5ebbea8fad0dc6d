"""``pizzamail mailbox test``: check the own-mailbox mode ([mailbox] mode = "imap") before `serve`
relies on it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from pizzamail.account.session import client_context
from pizzamail.cli.app import App

#: how a finding is marked: shown to work, shown not to, not shown either way yet
MARKS = {True: "ok  ", False: "FIX ", None: "?   "}


@click.group()
def mailbox() -> None:
    """Your own mail account as pizzamail's mailbox ([mailbox] mode = "imap" in config.toml)."""


@mailbox.command("test")
@click.option("--cafile", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Trust only this CA certificate (PEM), e.g. a server's self-signed one.")
@click.pass_obj
def test(app: App, cafile: Path | None) -> None:
    """Log in, look at INBOX, Sent and Drafts (read-only) and say what works and what to fix."""
    from pizzamail.intake.probe import Owner, probe_mailbox
    from pizzamail.remote.account import mailbox_account, mailbox_password

    config = app.config
    if config.mailbox.mode != "imap":
        raise click.ClickException('[mailbox] mode is "local" (pizzamail\'s own servers); set mode = "imap"'
                                   " and [mailbox.imap] in config.toml to use your own account")
    settings = config.mailbox.imap
    password = mailbox_password(app.secrets)
    owner = Owner(address=config.account.address, agents=tuple(a.address for a in config.all_agents()),
                  authserv_id=settings.authserv_id)
    tls = client_context(str(cafile)) if cafile else None
    findings = asyncio.run(probe_mailbox(mailbox_account(settings), password, owner, tls=tls))
    for finding in findings:
        click.echo(MARKS[finding.ok] + finding.what)
        if finding.fix:
            click.echo(f"      fix: {finding.fix}")
    if any(f.ok is False for f in findings):
        sys.exit(1)
