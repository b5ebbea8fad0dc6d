"""``migrate-store``: a home's SQLite state copied into PostgreSQL, for workers on other machines."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit

import click

from pizzamail.cli.app import App
from pizzamail.errors import TransferError
from pizzamail.home import serving

if TYPE_CHECKING:
    from pizzamail.store.transfer import Copied


@click.command("migrate-store")
@click.argument("url")
@click.pass_obj
def migrate_store(app: App, url: str) -> None:
    """Copy this home's state (threads, runs, mail, blobs, run files) into an empty PostgreSQL
    database, e.g. postgresql://pizzamail@db.internal/pizzamail."""
    if urlsplit(url).scheme not in ("postgresql", "postgres"):
        raise TransferError(f"{url!r} is not a PostgreSQL url",
                            hint="give one such as postgresql://pizzamail@db.internal/pizzamail")
    if not app.home.database.exists():
        raise TransferError(f"{app.home.root} has no SQLite state to copy ({app.home.database.name})",
                            hint="pass the home that `serve` used with --home")
    with serving(app.home):  # serve on this home would go on writing what is being copied
        copied = asyncio.run(_copy(app, url))
    click.echo(f"copied {sum(copied.rows.values())} row(s) of {len(copied.rows)} tables,"
               f" {copied.blobs} blob(s) and {copied.run_files} run file(s) into {_shown(url)}")
    click.echo("Next:")
    click.echo(f'  1. in {app.home.config}, under [store], set url = "{_shown(url)}"')
    click.echo("  2. if the database asks for a password: `pizzamail keys set store`")
    click.echo(f"  3. start it: `pizzamail --home {app.home.root} serve` (the SQLite file {app.home.database}"
               " stays as it was: keep it as a backup)")


async def _copy(app: App, url: str) -> Copied:
    import psycopg  # only this command needs it before the store does

    from pizzamail.store import Store
    from pizzamail.store.location import STORE_KEY
    from pizzamail.store.transfer import copy_state

    target = Store(url=url, password=app.secrets.get(STORE_KEY))
    try:
        await target.open()  # migrates an empty database to this version's schema
    except psycopg.Error as exc:
        raise TransferError(f"cannot open {_shown(url)}: {exc}",
                            hint="check the url; a password goes in `pizzamail keys set store` or PGPASSWORD"
                            ) from None
    try:
        async with Store(path=app.home.database) as source:
            return await copy_state(source, target, blobs=app.home.blobs,
                                    workspaces=app.home.root / "workspaces")
    finally:
        await target.close()


def _shown(url: str) -> str:
    """The url without a password typed into it, in its address or as ``?password=`` (config.toml
    never holds one)."""
    parts = urlsplit(url)
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    if parts.password is not None:
        host = parts.hostname or ""
        parts = parts._replace(netloc=f"{parts.username}@{host}" + (f":{parts.port}" if parts.port else ""))
    return parts._replace(query=query).geturl()
