"""``init`` and ``serve``."""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING

import click

from pizzamail import collector
from pizzamail.cli.app import App
from pizzamail.home import serving, usable
from pizzamail.lanes import Loop
from pizzamail.logs import setup_logging
from pizzamail.tls import fingerprint, server_context

if TYPE_CHECKING:  # the service pulls in every server; other commands start faster without it
    from pizzamail.service import Listening, Service


@click.command()
@click.pass_obj
def init(app: App) -> None:
    """Create the home folder, config.toml and the mail password."""
    made = app.initialise()
    for item in made:
        click.echo(f"created {item}")
    if not made:
        click.echo(f"already set up in {app.home.root}")
    _warn_no_keyring(app)
    click.echo(account_settings(app))


@click.command()
@click.option("--demo-data", is_flag=True, help="Add a tour: two threads, one waiting for your approval.")
@click.option("-v", "--verbose", is_flag=True, help="Log debug detail to the terminal too.")
@click.pass_obj
def serve(app: App, demo_data: bool, verbose: bool) -> None:
    """Run the SMTP and IMAP servers and the agent runner until Ctrl-C."""
    with serving(app.home):  # before anything is written: a second serve on this home changes nothing
        with usable(app.home):
            for item in app.initialise():
                click.echo(f"created {item}")
            setup_logging(app.home.logs, verbose=verbose)
        from pizzamail.providers.registry import check_kinds
        from pizzamail.service import Service

        check_kinds(app.config)
        _warn_no_keyring(app)
        service = Service(home=app.home, config=app.config, secrets=app.secrets,
                          tls=server_context(*app.tls_paths()), demo_data=demo_data)
        collector.pace()
        # the runs in a lane behind mail, IMAP and everything else someone waits for
        with asyncio.Runner(loop_factory=Loop) as runner:
            runner.run(_serve(app, service))


async def _serve(app: App, service: Service) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def ready(listening: Listening) -> None:
        click.echo(account_settings(app, listening))
        click.echo(model_line(app))
        if app.config.runner.concurrency == 0:
            click.echo("Runs are left to `pizzamail worker`s ([runner] concurrency = 0).\n")
        click.echo("pizzamail is ready. Stop it with Ctrl-C.", nl=True)

    await service.run(stop, ready)
    click.echo("pizzamail stopped.")


def account_settings(app: App, listening: Listening | None = None) -> str:
    if app.config.mailbox.mode == "imap":
        return _own_account(app, listening)
    server = app.config.server
    host = listening.host if listening else server.host
    imap = listening.imap if listening else server.imap_port
    imaps = listening.imaps if listening else server.imaps_port
    smtp = listening.smtp if listening else server.smtp_port
    cert = app.tls_paths()[0]
    plain = "no encryption (loopback only) or STARTTLS"
    return "\n".join([
        "",
        "Mail account settings (add them in Thunderbird, Apple Mail, mutt …):",
        f"  IMAP server  {host} port {imap}, {plain}, normal password",
        f"               or port {imaps} with SSL/TLS",
        f"  SMTP server  {host} port {smtp}, {plain}, normal password",
        f"  user name    {app.config.account.user}",
        "  password     run `pizzamail account password`"
        f" (kept in {app.secrets.location})",
        f"  your address {app.config.account.address}",
        f"  write to     {app.config.agent.address}",
        *([f"  webhooks     http://{host}:{listening.http}/hooks/NAME"]
          if listening and listening.http else []),
        f"  home         {app.home.root}",
        f"  certificate  {cert}",
        f"               SHA-256 {fingerprint(cert) if cert.exists() else '(not created yet)'}",
        "",
    ])


def _own_account(app: App, listening: Listening | None) -> str:
    """IMAP mode: the user's own account is the mailbox, and pizzamail opens no mail port."""
    imap = app.config.mailbox.imap
    return "\n".join([
        "",
        "Your own mailbox (IMAP mode: pizzamail opens no SMTP or IMAP port):",
        f"  account      {imap.user} at {imap.host} port {imap.port} ({imap.security})",
        "  password     `pizzamail keys set mailbox`",
        f"  write to     {app.config.agent.address}",
        f"  its folders  {imap.prefix}/Action, {imap.prefix}/Activity",
        *([f"  webhooks     http://{listening.host}:{listening.http}/hooks/NAME"]
          if listening and listening.http else []),
        f"  home         {app.home.root}",
        "",
    ])


def model_line(app: App) -> str:
    """Which model answers: the selected one and where its key is, or why the offline toy model
    stands in (or nothing does) and the command that fixes it."""
    from pizzamail.providers.registry import answering

    found = answering(app.config, app.secrets)
    fix = f"\n  fix: {found.fix}" if found.problem else ""
    return f"Model that answers your mail:\n  {found.summary}{fix}\n"


def _warn_no_keyring(app: App) -> None:
    if not app.secrets.use_keyring:
        click.secho(
            "WARNING: no OS keyring on this machine. Secrets are kept in "
            f"{app.home.secrets_file} (mode 0600, readable only by you). Install and unlock a "
            "keyring (GNOME Keyring, KWallet, macOS Keychain) to protect them better.",
            fg="yellow", err=True,
        )
