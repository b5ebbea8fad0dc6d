"""``pizzamail schedule add/list/run/rm`` and ``pizzamail triggers``: what starts work by itself."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

from pizzamail.cli.app import App
from pizzamail.config import ScheduleSettings, schedule_settings
from pizzamail.errors import ConfigError
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.triggers.post import Posted
from pizzamail.triggers.scheduler import utcnow
from pizzamail.triggers.schedules import (
    Schedule,
    list_schedules,
    remove_schedule,
    run_now,
    save_schedule,
)


@click.group()
def schedule() -> None:
    """Recurring tasks: a prompt started at set times, each schedule in one thread."""


@schedule.command("add")
@click.argument("name")
@click.option("--when", "when", default="", help='When, in words: "every weekday at 8", "every 15 minutes".')
@click.option("--cron", default="", help='Or a five-field cron expression, e.g. "0 8 * * 1-5".')
@click.option("--prompt", required=True, help="The task given to the agent at each occurrence.")
@click.option("--tz", default="", help="IANA time zone, e.g. Europe/Berlin  [default: [agent] timezone,"
              " else this machine's zone]")
@click.option("--catch-up", type=click.Choice(["once", "skip"]), default="once", show_default=True,
              help="After downtime: run one missed occurrence, or skip it.")
@click.pass_obj
def schedule_add(app: App, name: str, when: str, cron: str, prompt: str, tz: str, catch_up: str) -> None:
    """Add (or change) a schedule. A running `serve` picks it up within seconds."""
    if bool(when) == bool(cron):
        raise click.UsageError('give either --when (in words, e.g. "every weekday at 8") or --cron')
    table = {"when": when, "cron": cron, "prompt": prompt, "tz": tz, "catch_up": catch_up}
    settings = _settings(name, {k: v for k, v in table.items() if v})
    app.home.create_dirs()

    async def save() -> Schedule:
        async with Store(path=app.home.database) as store:
            return await save_schedule(store, name, settings, source="cli", at=utcnow(),
                                       agent_tz=app.config.agent.timezone)

    saved = asyncio.run(save())
    click.echo(f"schedule {name}: {saved.cron} ({saved.tz}), next {saved.next_due}")


def _settings(name: str, table: dict[str, str]) -> ScheduleSettings:
    """The options checked like a config section; a problem names the option, not a config key."""
    try:
        return schedule_settings(name, table)
    except ConfigError as exc:
        field = exc.key.removeprefix(f"schedules.{name}").lstrip(".")
        where = f"--{field.replace('_', '-')}" if field else "NAME"
        raise click.BadParameter(f"{exc.value!r}: {exc.allowed}", param_hint=where) from None


@schedule.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def schedule_list(app: App, as_json: bool) -> None:
    """Every schedule with its next and last occurrence."""
    found = asyncio.run(_schedules(app))
    if as_json:
        click.echo(json.dumps([_schedule_data(s) for s in found], indent=2))
        return
    if not found:
        click.echo('no schedules (add one: pizzamail schedule add NAME --when "every weekday at 8"'
                   " --prompt ...)")
    for s in found:
        state = "" if s.enabled else " [disabled]"
        click.echo(f"{s.name}{state}  {s.cron} ({s.tz})  next {s.next_due}  last {s.last_fired_at or '-'}"
                   f"  {s.last_outcome or ''}".rstrip())


@schedule.command("run")
@click.argument("name")
@click.pass_obj
def schedule_run(app: App, name: str) -> None:
    """Start one occurrence now, in the schedule's thread, to try it out (the schedule's own times
    are not affected)."""
    async def run() -> Posted | None:
        async with Store(path=app.home.database) as store:
            return await run_now(store, BlobStore(root=app.home.blobs), app.config, name, at=utcnow())

    posted = asyncio.run(run()) if app.home.database.exists() else None
    if posted is None:
        raise click.ClickException(f"no schedule {name!r} (see `pizzamail schedule list`)")
    click.echo(f"schedule {name}: run {posted.run_id} queued in thread {posted.thread_id}")
    if not app.home.state_file.exists():
        click.echo("pizzamail is not running; the run starts with `pizzamail serve`.")


@schedule.command("rm")
@click.argument("name")
@click.pass_obj
def schedule_rm(app: App, name: str) -> None:
    """Remove a schedule (its thread stays). One in config.toml comes back at the next start."""
    async def remove() -> bool:
        async with Store(path=app.home.database) as store:
            return await remove_schedule(store, name)

    if not app.home.database.exists() or not asyncio.run(remove()):
        raise click.ClickException(f"no schedule {name!r}")
    click.echo(f"removed schedule {name}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def triggers(app: App, as_json: bool) -> None:
    """Every trigger (schedules, webhooks) with its next/last firing and outcome."""
    found, hooks = asyncio.run(_all(app))
    rows = [{"kind": "schedule", **_schedule_data(s)} for s in found] + hooks
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no triggers: see `pizzamail schedule add` and [hooks.NAME] in config.toml")
    for row in rows:
        if row["kind"] == "schedule":
            click.echo(f"schedule {row['name']}  next {row['next_due']}  last {row['last_fired_at'] or '-'}"
                       f"  {row['last_outcome'] or ''}".rstrip())
        else:
            click.echo(f"hook     {row['name']}  POST /hooks/{row['name']} ({row['auth']})"
                       f"  last {row['last_at'] or '-'}  {row['last_outcome'] or ''}".rstrip())


async def _schedules(app: App) -> list[Schedule]:
    if not app.home.database.exists():
        return []
    async with Store(path=app.home.database) as store:
        return await list_schedules(store)


async def _all(app: App) -> tuple[list[Schedule], list[dict[str, Any]]]:
    last: dict[str, Any] = {}
    found: list[Schedule] = []
    if app.home.database.exists():
        async with Store(path=app.home.database) as store:
            found = await list_schedules(store)
            last = {r["name"]: dict(r) for r in await store.fetchall("SELECT * FROM hooks")}
    hooks = [{"kind": "hook", "name": name, "auth": h.auth, "thread": h.thread,
              "last_at": last.get(name, {}).get("last_at"),
              "last_outcome": last.get(name, {}).get("last_outcome")}
             for name, h in sorted(app.config.hooks.items())]
    return found, hooks


def _schedule_data(s: Schedule) -> dict[str, Any]:
    return {"name": s.name, "cron": s.cron, "tz": s.tz, "catch_up": s.catch_up, "enabled": s.enabled,
            "source": s.source, "thread_id": s.thread_id, "next_due": s.next_due,
            "last_fired_at": s.last_fired_at, "last_outcome": s.last_outcome}
