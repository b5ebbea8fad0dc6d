"""Schedules and their occurrences (one row per schedule and due time, so none fires twice)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pizzamail.config import ScheduleSettings
from pizzamail.store import Row, Store, Tx, now
from pizzamail.store.events import ScheduleChanged, record
from pizzamail.store.leases import lease_ran_out
from pizzamail.when.cron import default_zone, next_after, to_text

_LIST = (
    "SELECT s.*, (SELECT o.status || coalesce(' (run ' || o.run_id || ': ' || r.status || ')', '')"
    " FROM occurrences o LEFT JOIN runs r ON r.id = o.run_id WHERE o.schedule_id = s.id"
    " ORDER BY o.due_at DESC LIMIT 1) AS last_outcome FROM schedules s"
)


@dataclass(frozen=True, kw_only=True)
class NewSchedule:
    """A schedule about to be saved: its zone is decided and its next due time computed."""

    name: str
    cron: str
    tz: str
    prompt: str
    catch_up: str
    source: str
    enabled: bool
    next_due: str
    """used when the schedule is new or its cron or zone changed; else the stored one stays"""
    thread_id: int | None = None
    """None keeps the thread an earlier occurrence started"""


def new_schedule(
    name: str, settings: ScheduleSettings, *, source: str, at: datetime, agent_tz: str,
    thread_id: int | None = None,
) -> NewSchedule:
    """The schedule ``settings`` make, due next after ``at``. Without a zone of its own it gets
    ``agent_tz`` (``[agent] timezone``), else this machine's zone."""
    tz = settings.tz or default_zone(agent_tz)
    return NewSchedule(name=name, cron=settings.cron, tz=tz, prompt=settings.prompt,
                       catch_up=settings.catch_up, source=source, enabled=settings.enabled,
                       next_due=to_text(next_after(settings.cron, tz, at)), thread_id=thread_id)


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


@dataclass(frozen=True, kw_only=True)
class Interrupted:
    """An occurrence whose run was cut off while running."""

    run_id: int
    due_at: str
    schedule: str
    thread_id: int


def _schedule(row: Row) -> Schedule:
    values: dict[str, Any] = dict(row)
    values.pop("created_at")
    values["enabled"] = bool(values["enabled"])
    return Schedule(**values)


async def list_schedules(store: Store) -> list[Schedule]:
    return [_schedule(row) for row in await store.fetchall(f"{_LIST} ORDER BY s.name")]


async def find_schedule(store: Store, name: str) -> Schedule | None:
    row = await store.fetchone(f"{_LIST} WHERE s.name = ?", (name,))
    return None if row is None else _schedule(row)


async def save_schedule(store: Store, new: NewSchedule) -> Schedule:
    """Add or update (by name) a schedule, in a transaction of its own."""
    async with store.write() as db:
        await db.execute(
            "INSERT INTO schedules(name, cron, tz, prompt, catch_up, source, thread_id, next_due, enabled,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET"
            " next_due = CASE WHEN schedules.cron != excluded.cron OR schedules.tz != excluded.tz"
            " OR schedules.next_due IS NULL THEN excluded.next_due ELSE schedules.next_due END,"
            " cron = excluded.cron, tz = excluded.tz, prompt = excluded.prompt,"
            " catch_up = excluded.catch_up, source = excluded.source, enabled = excluded.enabled,"
            " thread_id = coalesce(excluded.thread_id, schedules.thread_id)",
            (new.name, new.cron, new.tz, new.prompt, new.catch_up, new.source, new.thread_id,
             new.next_due, int(new.enabled), now()),
        )
        record(db, ScheduleChanged(name=new.name))
    found = await find_schedule(store, new.name)
    assert found is not None  # just written
    return found


async def remove_schedule(store: Store, name: str) -> bool:
    async with store.write() as db:
        cursor = await db.execute("DELETE FROM schedules WHERE name = ?", (name,))
        record(db, ScheduleChanged(name=name))
        return cursor.rowcount > 0


async def disable_config_schedules(store: Store, *, keep: list[str]) -> None:
    """Schedules from config.toml whose section is gone (all but ``keep``) stop firing."""
    marks = ", ".join("?" * len(keep))
    kept = f" AND name NOT IN ({marks})" if keep else ""  # "IN ()" is SQLite's alone
    async with store.write() as db:
        await db.execute(f"UPDATE schedules SET enabled = 0 WHERE source = 'config'{kept}", keep)


async def move_due(db: Tx, schedule_id: int, next_due: str) -> bool:
    """False: the schedule is gone (removed in another process since it was read)."""
    cursor = await db.execute("UPDATE schedules SET next_due = ? WHERE id = ?", (next_due, schedule_id))
    return cursor.rowcount > 0


async def add_occurrence(db: Tx, schedule_id: int, due_at: str, status: str) -> bool:
    """False: this occurrence was recorded before (it fired or was skipped already)."""
    cursor = await db.execute(
        "INSERT INTO occurrences(schedule_id, due_at, status, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(schedule_id, due_at) DO NOTHING", (schedule_id, due_at, status, now()),
    )
    return cursor.rowcount > 0


async def link_occurrence(
    db: Tx, schedule_id: int, due_at: str, *, run_id: int, message_id: str
) -> None:
    await db.execute(
        "UPDATE occurrences SET run_id = ?, message_id = ? WHERE schedule_id = ? AND due_at = ?",
        (run_id, message_id, schedule_id, due_at),
    )


async def schedule_thread(db: Tx, schedule_id: int) -> int | None:
    """Read inside the caller's write transaction: another process may have just started the
    schedule's thread, and a second thread would split the conversation."""
    async with db.execute("SELECT thread_id FROM schedules WHERE id = ?", (schedule_id,)) as cursor:
        row = await cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])


async def set_schedule_thread(
    db: Tx, schedule_id: int, thread_id: int, *, fired_at: str | None = None
) -> None:
    """The thread the schedule continues; ``fired_at`` also records a scheduled occurrence."""
    await db.execute(
        "UPDATE schedules SET thread_id = ?, last_fired_at = coalesce(?, last_fired_at) WHERE id = ?",
        (thread_id, fired_at, schedule_id),
    )


async def running_occurrences(store: Store, *, expired_by: int | None = None) -> list[Interrupted]:
    """Occurrences whose run is marked running: before this home's one runner starts, all of them
    were cut off by a crash; with ``expired_by`` (epoch seconds; workers share the store) only
    those whose lease ran out by then, as the others' workers are alive."""
    expired, params = _cut_off("r", expired_by)
    rows = await store.fetchall(
        "SELECT o.run_id, o.due_at, s.name, s.thread_id FROM occurrences o JOIN schedules s"
        f" ON s.id = o.schedule_id JOIN runs r ON r.id = o.run_id WHERE r.status = 'running'{expired}",
        params)
    return [Interrupted(run_id=int(r["run_id"]), due_at=str(r["due_at"]), schedule=str(r["name"]),
                        thread_id=int(r["thread_id"])) for r in rows]


async def still_cut_off(db: Tx, run_id: int, *, expired_by: int | None) -> bool:
    """Inside the transaction that reports it: the run is still ``running`` (and, with ``expired_by``,
    its lease still ran out): no worker took it back or finished it since it was found."""
    expired, params = _cut_off("runs", expired_by)
    async with db.execute(f"SELECT 1 FROM runs WHERE id = ? AND status = 'running'{expired}",
                          (run_id, *params)) as cursor:
        return await cursor.fetchone() is not None


def _cut_off(runs: str, expired_by: int | None) -> tuple[str, tuple[int, ...]]:
    """The extra condition (and its parameter) on a running run that it was cut off: none when this
    home's one runner is not running yet; otherwise its lease ran out by ``expired_by``."""
    if expired_by is None:
        return "", ()
    return f" AND {lease_ran_out(runs)}", (expired_by,)


async def mark_interrupted(db: Tx, run_id: int) -> None:
    await db.execute("UPDATE occurrences SET status = 'interrupted' WHERE run_id = ?", (run_id,))


async def earliest_due(store: Store) -> str | None:
    row = await store.fetchone("SELECT min(next_due) FROM schedules WHERE enabled = 1")
    return None if row is None or row[0] is None else str(row[0])
