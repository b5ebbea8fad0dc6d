"""``backup``, ``restore`` and ``export``: the user's own copies of their pizzamail."""

from __future__ import annotations

import asyncio
import mailbox
import time
from datetime import datetime
from pathlib import Path

import click

from pizzamail import __version__
from pizzamail.cli.app import App
from pizzamail.errors import BackupError, ConfigError
from pizzamail.secrets import ACCOUNT_PASSWORD
from pizzamail.store import backup as archive
from pizzamail.store.threads import Message, thread_messages


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.pass_obj
def backup(app: App, file: Path) -> None:
    """Write the whole home (mail, threads, config, skills) to FILE (.tar.gz), even while serving."""
    if _postgres(app):
        raise click.ClickException(
            "[store] url names a PostgreSQL database: back it up with `pg_dump` (its own tool, consistent"
            " while pizzamail runs). `pizzamail backup` copies a home whose state is its SQLite file.")
    manifest = archive.Manifest(version=__version__, home=str(app.home.root), secrets=secrets_used(app))
    archive.backup(app.home, file, manifest)
    click.echo(f"backed up {app.home.root} to {file}")
    if manifest.secrets:
        click.echo("Secrets are not in the backup; after a restore, set them again:")
        for secret in manifest.secrets:
            click.echo(f"  {secret.name:<24} `{secret.command}`{'' if secret.stored else ' (not set here)'}")


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_obj
def restore(app: App, file: Path) -> None:
    """Unpack a backup FILE into an empty home (--home or PIZZAMAIL_HOME)."""
    manifest = archive.restore(file, app.home)
    click.echo(f"restored {app.home.root} from {file} (taken {manifest.created} of {manifest.home})")
    used = [s for s in manifest.secrets if s.stored and s.name != ACCOUNT_PASSWORD]
    if used:
        click.echo("Backups hold no secrets; set these again before serving:")
        for secret in used:
            click.echo(f"  {secret.name:<24} `{secret.command}`")
    click.echo("The mail password is new once it serves: `pizzamail account password` shows it for your"
               " mail clients.")
    click.echo(f"Then start it: `pizzamail --home {app.home.root} serve`")


def _postgres(app: App) -> bool:
    """Whether the home's state is in PostgreSQL; a config that does not load is backed up as it is
    (the backup may be what saves its user)."""
    try:
        return bool(app.config.store.url)
    except ConfigError:
        return False


def secrets_used(app: App) -> list[archive.Secret]:
    """Every secret the config can use, and any other stored (a key set by hand), by name."""
    store = app.secrets
    wanted = {ACCOUNT_PASSWORD: "pizzamail account password"}  # made anew by the first start
    wanted |= _configured(app)
    for name in store.names():
        if not name.startswith("__"):
            wanted.setdefault(name, f"pizzamail keys set {name}")
    return [archive.Secret(name=n, stored=bool(store.get(n)), command=c) for n, c in sorted(wanted.items())]


def _configured(app: App) -> dict[str, str]:
    """The secrets config.toml names, each with the command that sets it. A config that does not
    load names none: a backup is still worth taking then."""
    try:
        config = app.config
    except ConfigError:
        return {}
    wanted = {f"sender:{n}": f"pizzamail account password --sender {n}" for n in config.senders}
    wanted |= {f"hook:{n}": f"pizzamail keys set hook:{n}" for n in config.hooks}
    wanted |= {f"watch:{n}": f"pizzamail keys set watch:{n}" for n in config.watches}
    for name in {a.model.partition(":")[0] for a in config.all_agents()} | set(config.providers):
        settings = config.provider(name)
        if settings is not None and settings.kind != "local":
            wanted.setdefault(settings.key or name, f"pizzamail keys set {settings.key or name}")
    from pizzamail.tools.oauth import secret_name  # the MCP SDK: only when a backup is made

    # an MCP server's OAuth login is made by logging in again, not typed in
    wanted |= {secret_name(n): f"pizzamail mcp login {n}" for n, s in config.mcp.servers.items()
               if s.auth == "oauth"}
    return wanted


@click.command()
@click.argument("thread", type=int)
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def export(app: App, thread: int, file: Path | None) -> None:
    """Write the mails of THREAD to an mbox FILE (default: thread-THREAD.mbox)."""
    target = file or Path(f"thread-{thread}.mbox")
    if target.exists():
        raise BackupError(f"{target} exists already", hint="name a new file, or remove that one first")
    messages = asyncio.run(_messages(app, thread))
    if not messages:
        raise BackupError(f"no thread {thread}", hint="`pizzamail threads` lists them")
    box = mailbox.mbox(target, create=True)
    try:
        for message, data in messages:
            mail = mailbox.mboxMessage(data)
            mail.set_from(message.sender or "MAILER-DAEMON", _time(message.created_at))
            box.add(mail)
        box.flush()
    finally:
        box.close()
    click.echo(f"wrote {len(messages)} mail(s) of thread {thread} to {target}")


async def _messages(app: App, thread: int) -> list[tuple[Message, bytes]]:
    if not app.has_store():
        return []
    async with app.store() as store:
        blobs = app.blobs(store)
        return [(m, await blobs.load(m.blob)) for m in await thread_messages(store, thread)]


def _time(stamp: str) -> time.struct_time:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").timetuple()
