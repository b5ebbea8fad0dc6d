"""``task`` (start work without mail) and ``threads`` (what the agent is doing)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from pizzamail.cli.app import App
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.threads import Thread, list_threads
from pizzamail.store.usage import Usage, thread_usage

if TYPE_CHECKING:
    from pizzamail.intake.tasks import Stored


@click.command()
@click.argument("text")
@click.pass_obj
def task(app: App, text: str) -> None:
    """Give the agent a task without writing a mail; the answer arrives in INBOX."""
    if not text.strip():
        raise click.UsageError("the task is empty")
    app.initialise()
    stored = asyncio.run(_submit(app, text))
    click.echo(f"thread {stored.thread_id}: queued")
    if not app.home.state_file.exists():
        click.echo("pizzamail is not running; the task starts with `pizzamail serve`.")


async def _submit(app: App, text: str) -> Stored:
    from pizzamail.intake.tasks import submit_text  # mail parsing: `threads` starts without it

    config = app.config
    async with Store(path=app.home.database) as store:
        return await submit_text(
            store, BlobStore(root=app.home.blobs), text, sender=config.account.address,
            agent=config.agent.address, domain=config.domain,
        )


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def threads(app: App, as_json: bool) -> None:
    """List threads, newest first, with their status."""
    found, usage = asyncio.run(_threads(app)) if app.home.database.exists() else ([], {})
    if as_json:
        click.echo(json.dumps([{**asdict(t), "usage": asdict(usage.get(t.id, Usage()))} for t in found],
                              indent=2))
        return
    if not found:
        click.echo("no threads yet: write to " + app.config.agent.address)
        return
    click.echo(f"{'ID':>4}  {'STATUS':<8} {'MSGS':>4}  {'UPDATED':<20} SUBJECT")
    for t in found:
        click.echo(f"{t.id:>4}  {t.status:<8} {t.messages:>4}  {t.updated_at:<20} {t.subject}")


async def _threads(app: App) -> tuple[list[Thread], dict[int, Usage]]:
    async with Store(path=app.home.database) as store:
        return await list_threads(store), await thread_usage(store)
