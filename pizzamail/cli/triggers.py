"""``pizzamail schedule add/list/run/rm`` and ``pizzamail triggers``: what starts work by itself."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

from pizzamail.auth import sender_key
from pizzamail.cli.app import App
from pizzamail.config import HookSettings, ScheduleSettings, schedule_settings
from pizzamail.errors import ConfigError
from pizzamail.store.hooks import Hook, list_hooks
from pizzamail.store.schedules import Schedule, list_schedules, remove_schedule
from pizzamail.store.senders import LastTask, last_task_from
from pizzamail.triggers.post import Posted
from pizzamail.triggers.scheduler import utcnow
from pizzamail.triggers.schedules import run_now, save_schedule
from pizzamail.triggers.watch import watch_rows
from pizzamail.when.words import cron_in_words, local_time, when_in_words


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
        async with app.store() as store:
            return await save_schedule(store, name, settings, source="cli", at=utcnow(),
                                       agent_tz=app.config.agent.timezone)

    saved = asyncio.run(save())
    next_due = local_time(saved.next_due, saved.tz)
    click.echo(f"schedule {name}: {when_in_words(saved.cron, saved.tz)}, next {next_due}")


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
        click.echo(f"{s.name}  {_what({'kind': 'schedule', **_schedule_data(s)})}"
                   f"  last {s.last_fired_at or '-'}  {s.last_outcome or ''}".rstrip())


@schedule.command("run")
@click.argument("name")
@click.pass_obj
def schedule_run(app: App, name: str) -> None:
    """Start one occurrence now, in the schedule's thread, to try it out (the schedule's own times
    are not affected)."""
    async def run() -> Posted | None:
        async with app.store() as store:
            return await run_now(store, app.blobs(store), app.config, name, at=utcnow())

    posted = asyncio.run(run()) if app.has_store() else None
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
        async with app.store() as store:
            return await remove_schedule(store, name)

    if not app.has_store() or not asyncio.run(remove()):
        raise click.ClickException(f"no schedule {name!r}")
    click.echo(f"removed schedule {name}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def triggers(app: App, as_json: bool) -> None:
    """Every trigger (schedules, webhooks, senders, watched mailboxes) with its last firing and outcome."""
    rows = asyncio.run(_all(app))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no triggers: see `pizzamail schedule add`, and [hooks.NAME], [senders.NAME] and"
                   " [watches.NAME] in config.toml")
    for row in rows:
        last = f"last {row['last_at'] or '-'}  {row['last_outcome'] or ''}".rstrip()
        click.echo(f"{row['kind']:<8} {row['name']}  {_what(row)}  {last}")


def _what(row: dict[str, Any]) -> str:
    """The kind-specific middle of a `triggers` line."""
    if row["kind"] == "schedule":
        paused = "" if row["enabled"] else " [disabled]"
        next_due = local_time(row["next_due"], row["tz"])
        return f"{when_in_words(row['cron'], row['tz'])}  next {next_due}{paused}"
    if row["kind"] == "hook":
        return f"POST /hooks/{row['name']} ({row['auth']})"
    if row["kind"] == "sender":
        return f"{row['address']} (login {row['login']})" + ("" if row["can_log_in"] else " [no password]")
    return f"{row['where']} [{row['state']}]"


async def _schedules(app: App) -> list[Schedule]:
    if not app.has_store():
        return []
    async with app.store() as store:
        return await list_schedules(store)


async def _all(app: App) -> list[dict[str, Any]]:
    if not app.has_store():
        return _rows(app, [], {}, {}) + await watch_rows(None, app.config)
    async with app.store() as store:
        schedules = await list_schedules(store)
        hooks = {h.name: h for h in await list_hooks(store)}
        senders = {name: _last_task(await last_task_from(store, s.address))
                   for name, s in app.config.senders.items()}
        return _rows(app, schedules, hooks, senders) + await watch_rows(store, app.config)


def _rows(app: App, schedules: list[Schedule], hooks: dict[str, Hook],
          senders: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [{"kind": "schedule", **_schedule_data(s),
             "last_at": s.last_fired_at, "last_outcome": s.last_outcome} for s in schedules]
    rows += [_hook_row(name, h, hooks.get(name)) for name, h in sorted(app.config.hooks.items())]
    rows += [{"kind": "sender", "name": name, "address": s.address, "login": s.login(name),
              "approve": s.approve, "enabled": s.enabled,
              "can_log_in": s.enabled and bool(app.secrets.get(sender_key(name))),
              **senders.get(name, {"last_at": None, "last_outcome": None})}
             for name, s in sorted(app.config.senders.items())]
    return rows


def _hook_row(name: str, settings: HookSettings, seen: Hook | None) -> dict[str, Any]:
    return {"kind": "hook", "name": name, "auth": settings.auth, "thread": settings.thread,
            "last_at": seen.last_at if seen else None, "last_outcome": seen.last_outcome if seen else None}


def _last_task(task: LastTask | None) -> dict[str, Any]:
    """When a sender's latest task arrived, and how its run went."""
    if task is None:
        return {"last_at": None, "last_outcome": None}
    return {"last_at": task.received_at, "last_outcome": f"run {task.run_id}: {task.status}"}


def _schedule_data(s: Schedule) -> dict[str, Any]:
    return {"name": s.name, "cron": s.cron, "when": cron_in_words(s.cron), "tz": s.tz,
            "catch_up": s.catch_up, "enabled": s.enabled,
            "source": s.source, "thread_id": s.thread_id, "next_due": s.next_due,
            "last_fired_at": s.last_fired_at, "last_outcome": s.last_outcome}
