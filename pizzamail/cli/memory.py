"""``pizzamail memory``: the notes the agent keeps across threads, listed, edited and deleted.

``memory.md`` in the home folder is rewritten after every change; it is generated, not read back
(see :mod:`pizzamail.tools.memory`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path

import click

from pizzamail.cli.app import App
from pizzamail.store.memory import Note, delete_note, edit_note, get_note, notes
from pizzamail.tools.memory import MAX_NOTE, note_line, write_memory_file


@click.group(invoke_without_command=True)
@click.pass_context
def memory(ctx: click.Context) -> None:
    """The agent's notes across threads (list; `memory rm ID`, `memory edit ID`)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(memory_list)


@memory.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def memory_list(app: App, as_json: bool = False) -> None:
    """List the notes, oldest first, with their ids."""
    found = asyncio.run(_notes(app)) if app.has_store() else []
    if as_json:
        click.echo(json.dumps([asdict(n) for n in found], indent=2))
        return
    if not found:
        click.echo("no notes: the agent keeps one when it calls `remember`")
        return
    for note in found:
        click.echo(note_line(note)[2:])


@memory.command("rm")
@click.argument("note_id", type=int)
@click.pass_obj
def memory_rm(app: App, note_id: int) -> None:
    """Delete a note: later tasks no longer see it."""
    asyncio.run(_change(app, note_id, None))
    click.echo(f"note {note_id} deleted")


@memory.command("edit")
@click.argument("note_id", type=int)
@click.argument("text", required=False)
@click.pass_obj
def memory_edit(app: App, note_id: int, text: str | None) -> None:
    """Replace a note's TEXT, or edit it in $EDITOR when no TEXT is given."""
    if text is None:
        current = asyncio.run(_note(app, note_id))
        text = click.edit(current.text + "\n", require_save=True)
        if text is None:
            click.echo("unchanged")
            return
    text = " ".join(text.split())
    if not text:
        raise click.ClickException(f"the note is empty; to delete it: pizzamail memory rm {note_id}")
    if len(text) > MAX_NOTE:
        raise click.ClickException(f"notes are at most {MAX_NOTE} characters")
    asyncio.run(_change(app, note_id, text))
    click.echo(f"note {note_id} changed")


async def _notes(app: App) -> list[Note]:
    async with app.store() as store:
        return list(reversed(await notes(store, limit=100_000)))


async def _note(app: App, note_id: int) -> Note:
    async with app.store() as store:
        found = await get_note(store, note_id)
    if found is None:
        raise click.ClickException(f"there is no note {note_id}; see `pizzamail memory list`")
    return found


async def _change(app: App, note_id: int, text: str | None) -> None:
    """Edit (``text``) or delete (None) a note, then rewrite ``memory.md``."""
    async with app.store() as store:
        async with store.write() as db:
            done = await (delete_note(db, note_id) if text is None else edit_note(db, note_id, text))
        if not done:
            raise click.ClickException(f"there is no note {note_id}; see `pizzamail memory list`")
        aside = await write_memory_file(store, _memory_file(app))
    if aside is not None:
        click.echo(f"memory.md had been edited by hand; that copy is kept as {aside}", err=True)


def _memory_file(app: App) -> Path:
    return app.home.root / "memory.md"
