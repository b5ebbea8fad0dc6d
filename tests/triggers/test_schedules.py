"""Schedules driven by a hand-moved clock: firing, catch-up, one thread, crash report, config errors."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from pizzamail.config import Config, ScheduleSettings, parse_config
from pizzamail.errors import ConfigError
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.runs import add_step, get_run
from pizzamail.store.threads import thread_messages
from pizzamail.triggers.cron import next_after
from pizzamail.triggers.scheduler import Scheduler
from pizzamail.triggers.schedules import (
    fire_due,
    list_schedules,
    report_interrupted,
    save_schedule,
)

T0 = datetime(2025, 1, 6, 7, 0, tzinfo=UTC)  # a Monday
CONFIG = Config()


def daily(catch_up: str = "once") -> ScheduleSettings:
    return ScheduleSettings(cron="0 8 * * *", tz="UTC", prompt="Summarise the news", catch_up=catch_up)


async def test_fires_at_the_due_time_once(store: Store, blobs: BlobStore) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0)
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
    await save_schedule(store, "news", daily(catch_up), source="config", at=T0)
    three_days_later = T0 + timedelta(days=3, hours=5)
    firings = await fire_due(store, blobs, CONFIG, at=three_days_later)
    assert [(f.status, f.due_at) for f in firings] == [(status, "2025-01-09T08:00:00Z")]
    assert (firings[0].run_id is not None) == (catch_up == "once")
    [schedule] = await list_schedules(store)
    assert schedule.next_due == "2025-01-10T08:00:00Z"
    assert schedule.last_outcome is not None and schedule.last_outcome.startswith(status)


async def test_occurrences_continue_one_thread(store: Store, blobs: BlobStore) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0)
    [first] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1))
    [second] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(days=1, hours=1))
    assert first.thread_id == second.thread_id
    one, two = await thread_messages(store, first.thread_id or 0)
    assert two.in_reply_to == one.message_id
    assert one.message_id in two.refs
    assert one.subject == two.subject == "Schedule: news"


async def test_interrupted_after_a_tool_call_is_reported_not_replayed(store: Store, blobs: BlobStore) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0)
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


async def test_interrupted_before_any_tool_resumes(store: Store, blobs: BlobStore) -> None:
    await save_schedule(store, "news", daily(), source="cli", at=T0)
    [firing] = await fire_due(store, blobs, CONFIG, at=T0 + timedelta(hours=1))
    async with store.write() as db:
        await db.execute("UPDATE runs SET status = 'running' WHERE id = ?", (firing.run_id,))
    assert await report_interrupted(store, blobs, CONFIG) == []


async def test_scheduler_task_sleeps_until_due_and_fires(store: Store, blobs: BlobStore) -> None:
    now = [T0]
    fired = asyncio.Event()
    config = parse_config({"schedules": {"news": {"cron": "0 8 * * *", "prompt": "Go"}}})
    scheduler = Scheduler(store=store, blobs=blobs, config=config, clock=lambda: now[0], on_fired=fired.set)
    await scheduler.prepare()
    assert await scheduler.seconds_to_next() == 300.0  # an hour away: capped, no polling
    await scheduler.start()
    try:
        await asyncio.sleep(0.05)
        assert not fired.is_set()
        now[0] = T0 + timedelta(hours=1)
        scheduler.poke()
        await asyncio.wait_for(fired.wait(), 5)
    finally:
        await scheduler.stop()
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


def test_cli_schedule_add_list_rm(tmp_path: object) -> None:
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
