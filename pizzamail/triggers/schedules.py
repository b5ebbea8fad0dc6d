"""Schedules in the store, and firing their occurrences (idempotent per schedule and due time).

A schedule continues **one** thread: each occurrence is a task message whose References chain to
the previous one, so a mail client shows one conversation and the runner's bounded history shows
the agent what earlier occurrences found.

After downtime (``next_due`` in the past by more than :data:`GRACE_SECONDS`) the latest missed
occurrence runs once (``catch_up = "once"``) or is recorded as skipped (``"skip"``). An occurrence
whose run was interrupted by a crash after it called a tool is not replayed (its side effects may
have happened): :func:`report_interrupted` fails that run and says so in the schedule's thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import aiosqlite

from pizzamail.config import Config, ScheduleSettings
from pizzamail.store import Store, now
from pizzamail.store.blobs import BlobStore
from pizzamail.store.events import ScheduleChanged, record
from pizzamail.store.threads import log_event
from pizzamail.triggers.cron import GRACE_SECONDS, default_zone, from_text, next_after, to_text
from pizzamail.triggers.post import Posted, TriggerMail, post_notice, post_task


@dataclass(frozen=True, kw_only=True)
class Schedule:
    id: int
    name: str
    cron: str
    tz: str
    prompt: str
    catch_up: str
    source: str
    thread_id: int | None
    last_fired_at: str | None
    next_due: str | None
    enabled: bool
    last_outcome: str | None = None


async def list_schedules(store: Store) -> list[Schedule]:
    rows = await store.fetchall(
        "SELECT s.*, (SELECT o.status || coalesce(' (run ' || o.run_id || ': ' || r.status || ')', '')"
        " FROM occurrences o LEFT JOIN runs r ON r.id = o.run_id WHERE o.schedule_id = s.id"
        " ORDER BY o.due_at DESC LIMIT 1) AS last_outcome FROM schedules s ORDER BY s.name"
    )
    return [_schedule(dict(row)) for row in rows]


def _schedule(values: dict[str, Any]) -> Schedule:
    values.pop("created_at")
    values["enabled"] = bool(values["enabled"])
    return Schedule(**values)


async def save_schedule(
    store: Store, name: str, settings: ScheduleSettings, *, source: str, at: datetime, agent_tz: str,
    thread_id: int | None = None,
) -> Schedule:
    """Add or update a schedule; a changed cron or zone computes ``next_due`` afresh from ``at``.

    A schedule without a zone gets ``agent_tz`` (``[agent] timezone``), else this machine's zone.
    ``thread_id`` (the agent's own schedules) is the thread its occurrences continue; None keeps the
    thread an earlier occurrence started.
    """
    tz = settings.tz or default_zone(agent_tz)
    due = to_text(next_after(settings.cron, tz, at))
    async with store.write() as db:
        await db.execute(
            "INSERT INTO schedules(name, cron, tz, prompt, catch_up, source, thread_id, next_due, enabled,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET"
            " next_due = CASE WHEN cron != excluded.cron OR tz != excluded.tz OR next_due IS NULL"
            " THEN excluded.next_due ELSE next_due END,"
            " cron = excluded.cron, tz = excluded.tz, prompt = excluded.prompt,"
            " catch_up = excluded.catch_up, source = excluded.source, enabled = excluded.enabled,"
            " thread_id = coalesce(excluded.thread_id, thread_id)",
            (name, settings.cron, tz, settings.prompt, settings.catch_up, source, thread_id, due,
             int(settings.enabled), now()),
        )
        record(db, ScheduleChanged(name=name))
    found = await find_schedule(store, name)
    assert found is not None  # just written
    return found


async def find_schedule(store: Store, name: str) -> Schedule | None:
    return next((s for s in await list_schedules(store) if s.name == name), None)


async def remove_schedule(store: Store, name: str) -> bool:
    async with store.write() as db:
        cursor = await db.execute("DELETE FROM schedules WHERE name = ?", (name,))
        record(db, ScheduleChanged(name=name))
        return cursor.rowcount > 0


async def sync_config(store: Store, config: Config, *, at: datetime) -> None:
    """``[schedules.NAME]`` sections into the store; one removed from config.toml is disabled."""
    for name, settings in config.schedules.items():
        await save_schedule(store, name, settings, source="config", at=at, agent_tz=config.agent.timezone)
    async with store.write() as db:
        names = list(config.schedules)
        marks = ", ".join("?" * len(names))
        await db.execute(f"UPDATE schedules SET enabled = 0 WHERE source = 'config'"
                         f" AND name NOT IN ({marks})", names)


@dataclass(frozen=True, kw_only=True)
class Firing:
    schedule: str
    due_at: str
    status: str
    """``fired`` (a run was queued) or ``skipped`` (missed during downtime, catch_up = skip)"""
    run_id: int | None = None
    thread_id: int | None = None


def _plan(schedule: Schedule, at: datetime) -> tuple[datetime, bool, datetime]:
    """(the occurrence to act on, whether it was missed, the next due time after ``at``)."""
    due = from_text(schedule.next_due or to_text(at))
    latest = due
    while (following := next_after(schedule.cron, schedule.tz, latest)) <= at:
        latest = following
    missed = latest != due or at - latest > timedelta(seconds=GRACE_SECONDS)
    return latest, missed, next_after(schedule.cron, schedule.tz, at)


async def fire_due(store: Store, blobs: BlobStore, config: Config, *, at: datetime) -> list[Firing]:
    """Act on every enabled schedule whose ``next_due`` has come."""
    firings = []
    for schedule in await list_schedules(store):
        if schedule.enabled and schedule.next_due and from_text(schedule.next_due) <= at:
            firing = await _fire(store, blobs, config, schedule, at)
            if firing is not None:
                firings.append(firing)
    return firings


async def _fire(
    store: Store, blobs: BlobStore, config: Config, schedule: Schedule, at: datetime
) -> Firing | None:
    occurrence, missed, following = _plan(schedule, at)
    due_at = to_text(occurrence)
    status = "skipped" if missed and schedule.catch_up == "skip" else "fired"
    async with store.write() as db:
        moved = await db.execute("UPDATE schedules SET next_due = ? WHERE id = ?",
                                 (to_text(following), schedule.id))
        if moved.rowcount == 0:
            return None  # removed (`schedule rm` in another process) since it was listed
        cursor = await db.execute(
            "INSERT INTO occurrences(schedule_id, due_at, status, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(schedule_id, due_at) DO NOTHING", (schedule.id, due_at, status, now()),
        )
        if cursor.rowcount == 0:
            return None  # fired already (idempotent per schedule and due time)
        if status == "skipped":
            await log_event(db, "schedule.skipped", schedule=schedule.name, due_at=due_at)
            return Firing(schedule=schedule.name, due_at=due_at, status=status)
        note = "missed while pizzamail was not running" if missed else ""
        posted = await post_task(db, blobs, _mail(config, schedule, occurrence, note=note),
                                 thread_id=await _thread_of(db, schedule.id))
        await db.execute(
            "UPDATE occurrences SET run_id = ?, message_id = ? WHERE schedule_id = ? AND due_at = ?",
            (posted.run_id, posted.message_id, schedule.id, due_at),
        )
        await db.execute("UPDATE schedules SET thread_id = ?, last_fired_at = ? WHERE id = ?",
                         (posted.thread_id, to_text(at), schedule.id))
    return Firing(schedule=schedule.name, due_at=due_at, status=status, run_id=posted.run_id,
                  thread_id=posted.thread_id)


async def _thread_of(db: aiosqlite.Connection, schedule_id: int) -> int | None:
    """Read inside the write transaction: a `schedule run` in another process may have just started
    the schedule's thread, and a second thread would split the conversation."""
    async with db.execute("SELECT thread_id FROM schedules WHERE id = ?", (schedule_id,)) as cursor:
        row = await cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])


async def run_now(
    store: Store, blobs: BlobStore, config: Config, name: str, *, at: datetime
) -> Posted | None:
    """``pizzamail schedule run``: one occurrence now, by hand, continuing the schedule's thread.

    It is none of the cron times: ``next_due`` and the occurrences (one per schedule and due time)
    are left alone, so the next scheduled time still fires, exactly once. None: no such schedule.
    """
    schedule = await find_schedule(store, name)
    if schedule is None:
        return None
    async with store.write() as db:
        posted = await post_task(db, blobs, _mail(config, schedule, at, by_hand=True),
                                 thread_id=await _thread_of(db, schedule.id))
        await db.execute("UPDATE schedules SET thread_id = ? WHERE id = ?", (posted.thread_id, schedule.id))
        await log_event(db, "schedule.run_by_hand", thread_id=posted.thread_id, run_id=posted.run_id,
                        schedule=name)
    return posted


def _mail(config: Config, schedule: Schedule, moment: datetime, *, note: str = "",
          by_hand: bool = False) -> TriggerMail:
    local = moment.astimezone(ZoneInfo(schedule.tz))
    when = f"{local:%Y-%m-%d %H:%M} {schedule.tz}" + (f" ({note})" if note else "")
    label = "run by hand (pizzamail schedule run)" if by_hand else "scheduled occurrence"
    return TriggerMail(
        subject=f"Schedule: {schedule.name}", text=f"{schedule.prompt}\n\n[{label}: {when}]",
        source=f"schedule:{schedule.name}" + (" (by hand)" if by_hand else ""),
        sender=config.account.address, agent=config.agent.address, domain=config.domain,
    )


async def report_interrupted(store: Store, blobs: BlobStore, config: Config) -> list[int]:
    """Before the runner resumes: occurrences whose run crashed after a tool call are failed and reported.

    An occurrence interrupted before any tool ran resumes like every run (nothing happened yet).
    """
    rows = await store.fetchall(
        "SELECT o.run_id, o.due_at, s.name, s.thread_id FROM occurrences o JOIN schedules s"
        " ON s.id = o.schedule_id JOIN runs r ON r.id = o.run_id WHERE r.status = 'running'"
    )
    reported = []
    for row in rows:
        if not await _acted(store, int(row["run_id"])):
            continue
        await _report(store, blobs, config, row)
        reported.append(int(row["run_id"]))
    return reported


async def _acted(store: Store, run_id: int) -> bool:
    steps = await store.fetchall("SELECT kind, data FROM steps WHERE run_id = ?", (run_id,))
    return any(s["kind"] == "tool" or (s["kind"] == "model" and json.loads(s["data"]).get("tool_calls"))
               for s in steps)


async def _report(store: Store, blobs: BlobStore, config: Config, row: aiosqlite.Row) -> None:
    run_id, due_at, name, thread_id = row["run_id"], row["due_at"], row["name"], row["thread_id"]
    text = (f"The occurrence of schedule {name!r} due at {due_at} was interrupted (pizzamail stopped"
            " unexpectedly) after it had started using tools. It is not run again, because what it"
            " already did (mail, files, calls) may have happened. Check its results; the next"
            " occurrence runs as planned.")
    mail = TriggerMail(subject=f"Schedule: {name}", text=text, source=f"schedule:{name}",
                       sender=config.agent.address, agent=config.agent.address, domain=config.domain)
    async with store.write() as db:
        await db.execute("UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE id = ?",
                         ("interrupted by a crash; not replayed", now(), run_id))
        await db.execute("UPDATE threads SET status = 'failed', updated_at = ? WHERE id = ?",
                         (now(), thread_id))
        await db.execute("UPDATE occurrences SET status = 'interrupted' WHERE run_id = ?", (run_id,))
        await post_notice(db, blobs, mail, thread_id=int(thread_id))
        await log_event(db, "schedule.interrupted", thread_id=thread_id, run_id=run_id, schedule=name)
