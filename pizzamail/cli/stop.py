"""``stop``: end a thread's working run from the command line, as a ``stop`` reply does."""

from __future__ import annotations

import asyncio

import click

from pizzamail.cli.app import App
from pizzamail.store.runs import ask_stop
from pizzamail.store.threads import thread_subject


@click.command()
@click.argument("thread_id", metavar="THREAD", type=int)
@click.pass_obj
def stop(app: App, thread_id: int) -> None:
    """Stop the run working in THREAD (and its queued follow-ups); the thread gets a "Stopped" mail."""
    if not app.has_store():
        raise click.ClickException(f"there is no thread {thread_id}; see `pizzamail threads`")
    run_id = asyncio.run(_stop(app, thread_id))
    if run_id is None:
        click.echo(f"thread {thread_id}: nothing is running; nothing changed")
        return
    click.echo(f"thread {thread_id}: run {run_id} asked to stop; it ends within seconds and the"
               " thread gets a mail saying so")
    if not app.home.state_file.exists():
        click.echo("pizzamail is not running; the run ends stopped when `pizzamail serve` starts.")


async def _stop(app: App, thread_id: int) -> int | None:
    async with app.store() as store:
        if not await thread_subject(store, thread_id):  # every thread has one ("(no subject)" at least)
            raise click.ClickException(f"there is no thread {thread_id}; see `pizzamail threads`")
        async with store.write() as db:
            return await ask_stop(db, thread_id, by="cli")
