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

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from pizzamail.config import Config, ScheduleSettings
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.runs import finish_run, get_run, steps_of
from pizzamail.store.schedules import (
    Interrupted,
    Schedule,
    add_occurrence,
    disable_config_schedules,
    find_schedule,
    link_occurrence,
    list_schedules,
    mark_interrupted,
    move_due,
    new_schedule,
    running_occurrences,
    schedule_thread,
    set_schedule_thread,
    still_cut_off,
)
from pizzamail.store.schedules import save_schedule as save_new
from pizzamail.store.sql import SQLITE
from pizzamail.store.threads import log_event
from pizzamail.triggers.post import Posted, TriggerMail, post_notice, post_task
from pizzamail.when.cron import GRACE_SECONDS, from_text, next_after, to_text


async def save_schedule(
    store: Store, name: str, settings: ScheduleSettings, *, source: str, at: datetime, agent_tz: str,
    thread_id: int | None = None,
) -> Schedule:
    """Add or update a schedule; a changed cron or zone computes ``next_due`` afresh from ``at``.

    ``thread_id`` (the agent's own schedules) is the thread its occurrences continue; None keeps the
    thread an earlier occurrence started.
    """
    return await save_new(store, new_schedule(name, settings, source=source, at=at, agent_tz=agent_tz,
                                              thread_id=thread_id))


async def sync_config(store: Store, config: Config, *, at: datetime) -> None:
    """``[schedules.NAME]`` sections into the store; one removed from config.toml is disabled."""
    for name, settings in config.schedules.items():
        await save_schedule(store, name, settings, source="config", at=at, agent_tz=config.agent.timezone)
    await disable_config_schedules(store, keep=list(config.schedules))


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
        if not await move_due(db, schedule.id, to_text(following)):
            return None  # removed (`schedule rm` in another process) since it was listed
        if not await add_occurrence(db, schedule.id, due_at, status):
            return None  # fired already (idempotent per schedule and due time)
        if status == "skipped":
            await log_event(db, "schedule.skipped", schedule=schedule.name, due_at=due_at)
            return Firing(schedule=schedule.name, due_at=due_at, status=status)
        note = "missed while pizzamail was not running" if missed else ""
        posted = await post_task(db, blobs, _mail(config, schedule, occurrence, note=note),
                                 thread_id=await schedule_thread(db, schedule.id))
        await link_occurrence(db, schedule.id, due_at, run_id=posted.run_id, message_id=posted.message_id)
        await set_schedule_thread(db, schedule.id, posted.thread_id, fired_at=to_text(at))
    return Firing(schedule=schedule.name, due_at=due_at, status=status, run_id=posted.run_id,
                  thread_id=posted.thread_id)


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
                                 thread_id=await schedule_thread(db, schedule.id))
        await set_schedule_thread(db, schedule.id, posted.thread_id)
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
        model=_model(config, schedule.name),
    )


def _model(config: Config, name: str) -> str:
    """The ``model`` of ``[schedules.NAME]``; a schedule made by ``pizzamail schedule add`` or the
    schedule_task tool has none (its runs use the agent's)."""
    settings = config.schedules.get(name)
    return settings.model if settings else ""


async def report_interrupted(store: Store, blobs: BlobStore, config: Config) -> list[int]:
    """Before the runner resumes: occurrences whose run crashed after a tool call are failed and reported.

    An occurrence interrupted before any tool ran resumes like every run (nothing happened yet).
    """
    reported = []
    # with PostgreSQL, workers elsewhere may be running schedule runs right now: only a lease that
    # ran out means a crash
    expired_by = None if store.dialect == SQLITE else int(time.time())
    for occurrence in await running_occurrences(store, expired_by=expired_by):
        if await _acted(store, occurrence.run_id) and await _report(store, blobs, config, occurrence,
                                                                   expired_by=expired_by):
            reported.append(occurrence.run_id)
    return reported


async def _acted(store: Store, run_id: int) -> bool:
    return any(s.kind == "tool" or (s.kind == "model" and s.data.get("tool_calls"))
               for s in await steps_of(store, run_id))


async def _report(store: Store, blobs: BlobStore, config: Config, occurrence: Interrupted, *,
                  expired_by: int | None) -> bool:
    """Fail the run and say so in its thread, unless a worker took it back or ended it meanwhile."""
    name, due_at, thread_id = occurrence.schedule, occurrence.due_at, occurrence.thread_id
    text = (f"The occurrence of schedule {name!r} due at {due_at} was interrupted (pizzamail stopped"
            " unexpectedly) after it had started using tools. It is not run again, because what it"
            " already did (mail, files, calls) may have happened. Check its results; the next"
            " occurrence runs as planned.")
    mail = TriggerMail(subject=f"Schedule: {name}", text=text, source=f"schedule:{name}",
                       sender=config.agent.address, agent=config.agent.address, domain=config.domain)
    run = await get_run(store, occurrence.run_id)
    async with store.write() as db:
        if not await still_cut_off(db, run.id, expired_by=expired_by):
            return False
        await finish_run(db, run, status="failed", error="interrupted by a crash; not replayed")
        await mark_interrupted(db, run.id)
        await post_notice(db, blobs, mail, thread_id=thread_id)
        await log_event(db, "schedule.interrupted", thread_id=thread_id, run_id=run.id, schedule=name)
    return True
