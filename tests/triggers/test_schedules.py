"""Schedules driven by a hand-moved clock: firing, catch-up, one thread, crash report, config errors."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pizzamail.config import Config, ScheduleSettings, parse_config
from pizzamail.errors import ConfigError
from pizzamail.home import Home
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.events import RunQueued
from pizzamail.store.runs import add_step, get_run
from pizzamail.store.schedules import list_schedules
from pizzamail.store.threads import log_event, thread_messages
from pizzamail.triggers import schedules
from pizzamail.triggers.scheduler import Scheduler
from pizzamail.triggers.schedules import (
    fire_due,
    report_interrupted,
    run_now,
    save_schedule,
    sync_config,
)
from pizzamail.when.cron import machine_zone, next_after, to_text

T0 = datetime(2025, 1, 6, 7, 0, tzinfo=UTC)  # a Monday
CONFIG = Config()


@pytest.fixture(autouse=True)
def utc_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Schedules without a zone take the machine's: make it the same on every test machine."""
    monkeypatch.setenv("TZ", "UTC")


def daily(catch_up: str = "once") -> ScheduleSettings:
    return ScheduleSettings(cron="0 8 * * *", tz="UTC", prompt="Summarise the news", catch_up=catch_up)


async def test_fires_at_the_due_time_once(store: Store, blobs: BlobStore) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0, agent_tz="")
    assert await fire_due(store, blobs, CONFIG, at=T0 + timedelta(minutes=59)) == []
    [firing] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1, seconds=5))
    assert (firing.status, firing.due_at) == ("fired", "2025-01-06T08:00:00Z")
    run = await get_run(store, firing.run_id or 0)
    assert run.status == "queued"
    assert await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1, seconds=9)) == []
    [schedule] = await list_schedules(store)
    assert schedule.next_due == "2025-01-07T08:00:00Z"
    [message] = await thread_messages(store, firing.thread_id or 0)
    assert "Summarise the news" in message.body and message.kind == "task"


@pytest.mark.parametrize(("catch_up", "status"), [("once", "fired"), ("skip", "skipped")])
async def test_catch_up_after_downtime(store: Store, blobs: BlobStore, catch_up: str, status: str) -> None:
    await save_schedule(store, "news", daily(catch_up), source="config", at=T0, agent_tz="")
    three_days_later = T0 + timedelta(days=3, hours=5)
    firings = await fire_due(store, blobs, CONFIG, at=three_days_later)
    assert [(f.status, f.due_at) for f in firings] == [(status, "2025-01-09T08:00:00Z")]
    assert (firings[0].run_id is not None) == (catch_up == "once")
    [schedule] = await list_schedules(store)
    assert schedule.next_due == "2025-01-10T08:00:00Z"
    assert schedule.last_outcome is not None and schedule.last_outcome.startswith(status)


async def test_occurrences_continue_one_thread(store: Store, blobs: BlobStore) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0, agent_tz="")
    [first] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1))
    [second] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(days=1, hours=1))
    assert first.thread_id == second.thread_id
    one, two = await thread_messages(store, first.thread_id or 0)
    assert two.in_reply_to == one.message_id
    assert one.message_id in two.refs
    assert one.subject == two.subject == "Schedule: news"


async def test_interrupted_after_a_tool_call_is_reported_not_replayed(store: Store, blobs: BlobStore) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0, agent_tz="")
    [firing] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1))
    run_id = firing.run_id or 0
    async with store.write() as db:
        await db.execute("UPDATE runs SET status = 'running' WHERE id = ?", (run_id,))
        await add_step(db, run_id, 1, "model", {"text": "", "tool_calls": [{"id": "c1", "name": "x"}]})
    assert await report_interrupted(store, blobs, CONFIG) == [run_id]
    assert (await get_run(store, run_id)).status == "failed"
    notice = (await thread_messages(store, firing.thread_id or 0))[-1]
    assert notice.kind == "notice" and "not run again" in notice.body
    [schedule] = await list_schedules(store)
    assert schedule.last_outcome is not None and schedule.last_outcome.startswith("interrupted")


async def test_a_schedule_run_a_live_worker_holds_is_not_reported_as_interrupted(
    store: Store, blobs: BlobStore
) -> None:
    """With PostgreSQL a serve that starts while workers elsewhere run schedule runs leaves those
    alone (their leases are alive); with SQLite this home's one runner is not running yet, so every
    running run was cut off."""
    await save_schedule(store, "news", daily(), source="cli", at=T0, agent_tz="")
    [firing] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1))
    run_id = firing.run_id or 0
    async with store.write() as db:
        await db.execute("UPDATE runs SET status = 'running', lease_owner = 'elsewhere', lease_until = ?"
                         " WHERE id = ?", (int(time.time()) + 3600, run_id))
        await add_step(db, run_id, 1, "model", {"text": "", "tool_calls": [{"id": "c1", "name": "x"}]})
    reported = await report_interrupted(store, blobs, CONFIG)
    assert reported == ([run_id] if store.dialect == "sqlite" else [])
    assert (await get_run(store, run_id)).status == ("failed" if store.dialect == "sqlite" else "running")


async def test_a_run_taken_back_while_it_is_being_reported_is_left_alone(
    store: Store, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between finding a cut-off run and failing it, a worker's heartbeat may put it back in the
    queue (or another worker finish it): then it is not failed, and no second mail says so."""
    await save_schedule(store, "news", daily(), source="cli", at=T0, agent_tz="")
    [firing] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1))
    run_id = firing.run_id or 0
    async with store.write() as db:
        await db.execute("UPDATE runs SET status = 'running' WHERE id = ?", (run_id,))

    async def taken_back_meanwhile(_: Store, run: int) -> bool:
        async with store.write() as db:
            await db.execute("UPDATE runs SET status = 'queued' WHERE id = ?", (run,))
        return True

    monkeypatch.setattr(schedules, "_acted", taken_back_meanwhile)
    before = len(await thread_messages(store, firing.thread_id or 0))
    assert await report_interrupted(store, blobs, CONFIG) == []
    assert (await get_run(store, run_id)).status == "queued"
    assert len(await thread_messages(store, firing.thread_id or 0)) == before


async def test_interrupted_before_any_tool_resumes(store: Store, blobs: BlobStore) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0, agent_tz="")
    [firing] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1))
    async with store.write() as db:
        await db.execute("UPDATE runs SET status = 'running' WHERE id = ?", (firing.run_id,))
    assert await report_interrupted(store, blobs, CONFIG) == []


async def test_scheduler_task_sleeps_until_due_and_fires(store: Store, blobs: BlobStore) -> None:
    now = [T0]
    fired = asyncio.Event()
    config = parse_config({"schedules": {"news": {"cron": "0 8 * * *", "prompt": "Go"}}})
    store.events.subscribe(RunQueued, lambda _: fired.set())
    scheduler = Scheduler(store=store, blobs=blobs, config=config, clock=lambda: now[0])
    async with scheduler:
        assert await scheduler.seconds_to_next() == 300.0  # an hour away: capped, no polling
        await asyncio.sleep(0.05)
        assert not fired.is_set()
        now[0] = T0 + timedelta(hours=1)
        scheduler.poke()
        await asyncio.wait_for(fired.wait(), 30)
    [schedule] = await list_schedules(store)
    assert schedule.source == "config" and schedule.last_fired_at == "2025-01-06T08:00:00Z"


def test_time_zone_is_honoured_across_dst() -> None:
    summer = next_after("0 8 * * 1-5", "Europe/Berlin", datetime(2025, 3, 28, 12, tzinfo=UTC))
    assert summer == datetime(2025, 3, 31, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize(("table", "key"), [
    ({"cron": "61 * * * *", "prompt": "x"}, "schedules.s.cron"),
    ({"cron": "0 8 * * *", "tz": "Mars/Olympus", "prompt": "x"}, "schedules.s.tz"),
    ({"cron": "0 8 * * *", "prompt": "x", "catch_up": "all"}, "schedules.s.catch_up"),
    ({"cron": "0 8 * * *"}, "schedules.s.prompt"),
    ({"cron": "0 8 * * *", "prompt": "x", "when": 1}, "schedules.s.when"),
])
def test_config_errors_name_the_key(table: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"schedules": {"s": table}})
    assert caught.value.key == key


def test_bad_hook_template_names_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"hooks": {"gh": {"prompt": "{{ payload.title "}}})
    assert caught.value.key == "hooks.gh.prompt"


def test_cli_schedule_add_list_rm(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pizzamail.cli import cli

    runner = CliRunner()
    home = ["--home", str(tmp_path)]
    added = runner.invoke(cli, [*home, "schedule", "add", "news", "--cron", "0 8 * * 1-5",
                                "--tz", "Europe/Berlin", "--prompt", "Summarise"])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(cli, [*home, "schedule", "list", "--json"])
    assert json.loads(listed.output)[0]["tz"] == "Europe/Berlin"
    bad = runner.invoke(cli, [*home, "schedule", "add", "x", "--cron", "nope", "--prompt", "p"])
    assert bad.exit_code != 0
    shown = runner.invoke(cli, [*home, "triggers", "--json"])
    assert [t["name"] for t in json.loads(shown.output)] == ["news"]
    assert runner.invoke(cli, [*home, "schedule", "rm", "news"]).exit_code == 0
    assert runner.invoke(cli, [*home, "schedule", "rm", "news"]).exit_code != 0


# -- when = "phrase", time zones ----------------------------------------------------------------


def test_when_is_translated_into_cron() -> None:
    config = parse_config({"schedules": {"s": {"when": "every weekday at 8:30", "prompt": "x"}}})
    settings = config.schedules["s"]
    assert (settings.cron, settings.when) == ("30 8 * * 1-5", "every weekday at 8:30")


@pytest.mark.parametrize(("table", "allowed"), [
    ({"when": "every day at 8", "cron": "0 8 * * *", "prompt": "x"}, "either cron or when, not both"),
    ({"prompt": "x"}, "a phrase such as"),
    ({"when": "every 7 minutes", "prompt": "x"}, "divides 60"),
    ({"when": "sometime tomorrow", "prompt": "x"}, "a schedule repeats"),
])
def test_exactly_one_of_cron_and_a_clear_when(table: dict[str, object], allowed: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"schedules": {"s": table}})
    assert caught.value.key == "schedules.s.when" and allowed in caught.value.allowed


def test_agent_timezone_must_be_a_zone() -> None:
    assert parse_config({"agent": {"timezone": "Europe/Berlin"}}).agent.timezone == "Europe/Berlin"
    with pytest.raises(ConfigError) as caught:
        parse_config({"agent": {"timezone": "Berlin"}})
    assert caught.value.key == "agent.timezone"


@pytest.mark.parametrize(("agent", "machine", "stored"), [
    ("Europe/Berlin", "Asia/Tokyo", "Europe/Berlin"),
    ("", "Asia/Tokyo", "Asia/Tokyo"),
])
async def test_a_schedule_without_tz_takes_agent_timezone_else_the_machines(
    store: Store, monkeypatch: pytest.MonkeyPatch, agent: str, machine: str, stored: str
) -> None:
    monkeypatch.setenv("TZ", machine)
    config = parse_config({"agent": {"timezone": agent},
                           "schedules": {"s": {"when": "every day at 8", "prompt": "x"},
                                         "fixed": {"cron": "0 8 * * *", "tz": "UTC", "prompt": "x"}}})
    await sync_config(store, config, at=T0)
    zones = {s.name: (s.tz, s.next_due) for s in await list_schedules(store)}
    assert zones["fixed"] == ("UTC", "2025-01-06T08:00:00Z")
    assert zones["s"][0] == stored
    assert zones["s"][1] == to_text(next_after("0 8 * * *", stored, T0))


def _link(tmp_path: Path, target: str) -> Path:
    link = tmp_path / "localtime"
    link.symlink_to(target)
    return link


@pytest.mark.parametrize(("tz", "target", "zone"), [
    ("Europe/Berlin", "/usr/share/zoneinfo/Asia/Tokyo", "Europe/Berlin"),
    (":Europe/Paris", "", "Europe/Paris"),
    ("/usr/share/zoneinfo/Asia/Tokyo", "", "Asia/Tokyo"),
    ("CET-1CEST", "/usr/share/zoneinfo/America/New_York", "America/New_York"),
    (None, "/var/db/timezone/zoneinfo/Europe/Rome", "Europe/Rome"),
    (None, "/etc/elsewhere", "UTC"),
    (None, "", "UTC"),
])
def test_machine_zone_from_tz_or_the_localtime_link(
    tmp_path: Path, tz: str | None, target: str, zone: str
) -> None:
    environ = {} if tz is None else {"TZ": tz}
    localtime = _link(tmp_path, target) if target else tmp_path / "missing"
    assert machine_zone(environ, localtime) == zone


def test_a_copied_localtime_file_means_utc(tmp_path: Path) -> None:
    copied = tmp_path / "localtime"
    copied.write_bytes(b"TZif")
    assert machine_zone({}, copied) == "UTC"


# -- another process changes the schedules ------------------------------------------------------


async def test_a_schedule_added_by_another_process_fires_without_a_poke(
    home: Home, store: Store, blobs: BlobStore
) -> None:
    fired = asyncio.Event()
    store.events.subscribe(RunQueued, lambda _: fired.set())
    async with Scheduler(store=store, blobs=blobs, config=CONFIG, clock=lambda: T0, check_every=0.05):
        await asyncio.sleep(0.1)  # asleep: no schedules, so it planned MAX_SLEEP
        async with store.twin() as other:  # its own connections, like `pizzamail schedule add`
            # due at 07:00: the scheduler's now
            await save_schedule(other, "now", ScheduleSettings(cron="0 7 * * *", tz="UTC", prompt="Go"),
                                source="cli", agent_tz="", at=T0 - timedelta(minutes=1))
        await asyncio.wait_for(fired.wait(), 30)
    [schedule] = await list_schedules(store)
    assert schedule.last_fired_at == "2025-01-06T07:00:00Z"


async def test_a_schedule_saved_in_this_process_wakes_the_sleeping_scheduler(
    store: Store, blobs: BlobStore
) -> None:
    fired = asyncio.Event()
    store.events.subscribe(RunQueued, lambda _: fired.set())
    # it never looks by itself within the test: only the store's ScheduleChanged can wake it
    async with Scheduler(store=store, blobs=blobs, config=CONFIG, clock=lambda: T0, check_every=3600):
        await asyncio.sleep(0.1)  # asleep: no schedules, so it planned MAX_SLEEP
        await save_schedule(store, "now", ScheduleSettings(cron="0 7 * * *", tz="UTC", prompt="Go"),
                            source="agent", agent_tz="", at=T0 - timedelta(minutes=1))
        await asyncio.wait_for(fired.wait(), 30)
    [schedule] = await list_schedules(store)
    assert schedule.last_fired_at == "2025-01-06T07:00:00Z"


async def test_change_marker_ignores_commits_that_move_no_due_time(
    home: Home, store: Store, blobs: BlobStore
) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0, agent_tz="")
    scheduler = Scheduler(store=store, blobs=blobs, config=CONFIG, clock=lambda: T0)
    await scheduler.seconds_to_next()
    await scheduler.changed()
    assert not await scheduler.changed()  # nothing committed: one PRAGMA, no table read
    async with store.write() as db:  # the service's own work (a run step, a message)
        await log_event(db, "test.unrelated")
    assert not await scheduler.changed()
    async with store.twin() as other:
        await save_schedule(other, "early", ScheduleSettings(cron="30 7 * * *", tz="UTC", prompt="x"),
                            source="cli", at=T0, agent_tz="")
    assert await scheduler.changed()


# -- pizzamail schedule run ----------------------------------------------------------------------


async def test_run_by_hand_continues_the_thread_and_leaves_the_times_alone(
    store: Store, blobs: BlobStore
) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0, agent_tz="")
    first = await run_now(store, blobs, CONFIG, "news", at=T0 + timedelta(minutes=5))
    second = await run_now(store, blobs, CONFIG, "news", at=T0 + timedelta(minutes=6))
    assert first is not None and second is not None and first.thread_id == second.thread_id
    assert await run_now(store, blobs, CONFIG, "nope", at=T0) is None
    [schedule] = await list_schedules(store)
    assert (schedule.next_due, schedule.last_fired_at, schedule.last_outcome) == (
        "2025-01-06T08:00:00Z", None, None)
    [firing] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1))
    assert firing.status == "fired" and firing.thread_id == first.thread_id
    one, two, three = await thread_messages(store, first.thread_id)
    assert "run by hand" in one.body and "run by hand" in two.body and "scheduled occurrence" in three.body
    assert two.in_reply_to == one.message_id and three.in_reply_to == two.message_id
    assert (await get_run(store, second.run_id)).status == "queued"


def test_cli_schedule_add_when_and_run(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pizzamail.cli import cli

    runner = CliRunner()
    home = ["--home", str(tmp_path)]
    added = runner.invoke(cli, [*home, "schedule", "add", "news", "--when", "every weekday at 8",
                                "--prompt", "Summarise"])
    assert added.exit_code == 0, added.output
    assert "every weekday (Monday to Friday) at 08:00 (UTC), next " in added.output
    [shown] = json.loads(runner.invoke(cli, [*home, "schedule", "list", "--json"]).output)
    assert (shown["cron"], shown["tz"], shown["source"]) == ("0 8 * * 1-5", "UTC", "cli")
    both = runner.invoke(cli, [*home, "schedule", "add", "x", "--when", "hourly", "--cron", "0 * * * *",
                               "--prompt", "p"])
    assert both.exit_code == 2 and "either --when" in both.output
    unclear = runner.invoke(cli, [*home, "schedule", "add", "x", "--when", "every 7 minutes",
                                  "--prompt", "p"])
    assert unclear.exit_code == 2 and "--when" in unclear.output and "divides 60" in unclear.output
    ran = runner.invoke(cli, [*home, "schedule", "run", "news"])
    assert ran.exit_code == 0, ran.output
    assert "run 1 queued in thread 1" in ran.output and "not running" in ran.output
    assert runner.invoke(cli, [*home, "schedule", "run", "nope"]).exit_code == 1
