"""``activity``: the rows of the Activity board, one per active or recently finished run."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from datetime import UTC, datetime

import click

from pizzamail.activity.status import LABELS
from pizzamail.cli.app import App
from pizzamail.store.activity import BoardRun, board_runs


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def activity(app: App, as_json: bool) -> None:
    """What each active or recently finished run is doing, as the Activity folder shows it."""
    runs = asyncio.run(_runs(app)) if app.has_store() else []
    if as_json:
        click.echo(json.dumps([{**asdict(r), "state": _state(r)} for r in runs], indent=2))
        return
    if not runs:
        click.echo(f"nothing is running or recently finished; write to {app.config.agent.address}")
        return
    click.echo(f"{'RUN':>4} {'THREAD':>6}  {'STATE':<21} {'STEPS':>5}  {'LAST TOOL':<20} SUBJECT")
    for r in runs:
        click.echo(f"{r.run:>4} {r.thread:>6}  {_state(r):<21} {r.steps:>5}  {r.last_tool or '-':<20} "
                   f"{r.subject}")


def _state(run: BoardRun) -> str:
    return LABELS.get(run.status, run.status)


async def _runs(app: App) -> list[BoardRun]:
    async with app.store() as store:
        return await board_runs(store, finished_since=datetime.now(UTC) - app.config.activity.keep)
