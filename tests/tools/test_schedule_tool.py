"""schedule_task: arguments checked before anything is held, the schedule saved in the asking thread
once approved (an upsert: a replay changes nothing), and the scheduler poked."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from pizzamail.approvals.decide import Decision
from pizzamail.approvals.ledger import apply_decision
from pizzamail.cli import cli
from pizzamail.composer import Composer, MailContext
from pizzamail.config import ScheduleSettings
from pizzamail.home import Home
from pizzamail.mailbox.filing import Filer
from pizzamail.store import Store
from pizzamail.store.actions import held_actions
from pizzamail.store.events import ScheduleChanged
from pizzamail.store.runs import get_run
from pizzamail.store.schedules import list_schedules
from pizzamail.store.threads import create_thread
from pizzamail.tools import Explained, RunScope, ToolRegistry
from pizzamail.tools.builtins import Builtins
from pizzamail.tools.schedule import ScheduleTask
from pizzamail.triggers.schedules import save_schedule
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import Harness, bot_mails, html, plain

T0 = datetime(2025, 1, 6, 7, 0, tzinfo=UTC)  # a Monday, 08:00 in Berlin
OWNER = "me@pizzamail.localhost"
WEEKLY = {"name": "weekly", "when": "every Monday at 9", "prompt": "Summarise X"}


@pytest.fixture(autouse=True)
def utc_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")


async def new_thread(store: Store) -> int:
    async with store.write() as db:
        return await create_thread(db, subject="Plans", agent="bot@pizzamail.localhost")


def tool(store: Store, thread_id: int, agent_tz: str = "") -> ScheduleTask:
    return ScheduleTask(store=store, thread_id=thread_id, agent_tz=agent_tz, clock=lambda: T0)


@pytest.mark.parametrize(("arguments", "problem"), [
    ({"name": "x", "when": "every 7 minutes", "prompt": "p"}, "when 'every 7 minutes': cron counts minutes"),
    ({"name": "x", "when": "sometime tomorrow", "prompt": "p"}, "a schedule repeats"),
    ({"name": "x", "prompt": "p"}, "when '': not a schedule pizzamail understands"),
    ({"name": "x", "when": 9, "prompt": "p"}, "when must be a string"),
    ({"name": "bad name!", "when": "hourly", "prompt": "p"}, "name 'bad name!'"),
    ({"name": "x", "when": "hourly", "prompt": " "}, "prompt ' ': the task text"),
    ({"name": "x", "when": "hourly", "prompt": "p", "tz": "Mars/Base"}, "tz 'Mars/Base': an IANA time zone"),
    ({"name": "x", "when": "hourly", "prompt": "p", "catch_up": "all"}, "catch_up 'all': once, skip"),
])
async def test_bad_arguments_are_an_error_result_never_a_schedule(
    store: Store, arguments: dict[str, Any], problem: str
) -> None:
    schedule_task = tool(store, await new_thread(store))
    checked = await schedule_task.check(arguments)
    assert checked is not None and checked.is_error and problem in checked.text
    assert schedule_task.describe(arguments) is None
    called = await schedule_task.call(arguments)
    assert called.is_error and problem in called.text
    assert await list_schedules(store) == []


def test_it_describes_a_call_in_words_with_cron_zone_next_times_and_the_prompt(store: Store) -> None:
    schedule_task = tool(store, 1, agent_tz="Europe/Berlin")
    assert isinstance(schedule_task, Explained)
    assert schedule_task.describe({**WEEKLY, "prompt": "Summarise X\n\nthen Y\n"}) == (
        "Start this task every Monday at 09:00 (cron `0 9 * * 1`, time zone Europe/Berlin), each time in"
        " this thread. Next: Mon 6 Jan 2025 09:00, Mon 13 Jan 09:00, Mon 20 Jan 09:00. Missed occurrences"
        " after downtime: run once.\n\n> Summarise X\n>\n> then Y")


@pytest.mark.parametrize(("when", "said"), [
    ("every weekday at 8:30", "every weekday (Monday to Friday) at 08:30 (cron `30 8 * * 1-5`"),
    ("every mon and thu at 5pm", "every Monday and Thursday at 17:00 (cron `0 17 * * 1,4`"),
    ("every weekend at 10", "every Saturday and Sunday at 10:00 (cron `0 10 * * 0,6`"),
    ("every day at 8 and 17", "every day at 08:00 and 17:00 (cron `0 8,17 * * *`"),
    ("every month on the 1st and 22nd at 9",
     "on the 1st and 22nd of every month at 09:00 (cron `0 9 1,22 * *`"),
    ("every 15 minutes", "every 15 minutes (cron `*/15 * * * *`"),
    ("every minute", "every minute (cron `* * * * *`"),
    ("hourly at :30", "every hour at :30 (cron `30 * * * *`"),
    ("every 6 hours", "every 6 hours from 00:00 (cron `0 */6 * * *`"),
    ("0 9 * 1 *", "at the times of cron `0 9 * 1 *` (time zone UTC)"),
    ("0 9 1 * 1", "at the times of cron `0 9 1 * 1` (time zone UTC)"),
    ("0 9 * * MON", "at the times of cron `0 9 * * MON` (time zone UTC)"),
])
def test_the_times_in_words_or_else_the_cron(store: Store, when: str, said: str) -> None:
    described = tool(store, 1).describe({**WEEKLY, "when": when})
    assert described is not None and described.startswith(f"Start this task {said}")


def test_the_next_times_name_the_year_where_it_changes(store: Store) -> None:
    late = ScheduleTask(store=store, thread_id=1, clock=lambda: datetime(2025, 12, 28, 12, tzinfo=UTC))
    described = late.describe(WEEKLY)
    assert described is not None
    assert " Next: Mon 29 Dec 2025 09:00, Mon 5 Jan 2026 09:00, Mon 12 Jan 09:00. " in described


@pytest.mark.parametrize(("agent_tz", "extra", "zone", "first"), [
    ("", {}, "UTC", "Mon 6 Jan 2025 09:00"),  # the machine's zone (TZ=UTC here): 07:00 UTC is before 9
    ("America/New_York", {}, "America/New_York", "Mon 6 Jan 2025 09:00"),
    ("America/New_York", {"tz": "Asia/Tokyo"}, "Asia/Tokyo", "Mon 13 Jan 2025 09:00"),  # 16:00 there
])
def test_the_zone_is_the_one_the_schedule_will_have(
    store: Store, agent_tz: str, extra: dict[str, str], zone: str, first: str
) -> None:
    described = tool(store, 1, agent_tz=agent_tz).describe({**WEEKLY, **extra, "catch_up": "skip"})
    assert described is not None
    assert f"time zone {zone}), each time in this thread. Next: {first}," in described
    assert "Missed occurrences after downtime: skipped." in described


async def test_a_call_saves_the_schedule_in_its_thread_and_a_replay_changes_nothing(store: Store) -> None:
    thread, changed = await new_thread(store), list[str]()
    store.events.subscribe(ScheduleChanged, lambda e: changed.append(e.name))
    schedule_task = tool(store, thread, agent_tz="Europe/Berlin")
    assert await schedule_task.check(WEEKLY) is None
    result = await schedule_task.call(WEEKLY)
    assert result.text == ("scheduled weekly: next occurrence 2025-01-06 09:00 Europe/Berlin"
                           ' (cron "0 9 * * 1"); each occurrence continues this thread')
    assert (await schedule_task.call(WEEKLY)).text == result.text  # the call repeated after a crash
    [saved] = await list_schedules(store)
    assert (saved.source, saved.cron, saved.tz, saved.thread_id, saved.prompt) == (
        "agent", "0 9 * * 1", "Europe/Berlin", thread, "Summarise X")
    assert saved.next_due == "2025-01-06T08:00:00Z"
    assert changed == ["weekly", "weekly"]  # the running scheduler looks again each time


async def test_the_machine_zone_is_the_default(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    await tool(store, await new_thread(store)).call({**WEEKLY, "catch_up": "skip"})
    [saved] = await list_schedules(store)
    assert (saved.tz, saved.catch_up) == ("Asia/Tokyo", "skip")


async def test_other_schedules_are_not_taken_over(store: Store) -> None:
    first, second = await new_thread(store), await new_thread(store)
    await save_schedule(store, "news", ScheduleSettings(cron="0 8 * * *", prompt="x"), source="config",
                        at=T0, agent_tz="")
    taken = await tool(store, first).check({**WEEKLY, "name": "news"})
    assert taken is not None and "already exists (in config.toml)" in taken.text
    await tool(store, first).call(WEEKLY)
    elsewhere = await tool(store, second).call(WEEKLY)
    assert elsewhere.is_error and "set up in another thread" in elsewhere.text
    assert {s.name: s.thread_id for s in await list_schedules(store)} == {"news": None, "weekly": first}


def _scope(thread_id: int, tmp_path: Path) -> RunScope:
    mail = MailContext(thread_id=thread_id, run_id=1, subject="s", in_reply_to=None, references=[])
    return RunScope(run_id=1, thread_id=thread_id, mail=mail, workspace=tmp_path)


@pytest.mark.parametrize(("rule", "policy"), [("auto", "ask"), ("deny", "deny"), (None, "ask")])
def test_it_is_always_held_and_may_be_denied(harness: Harness, tmp_path: Path, rule: str | None,
                                             policy: str) -> None:
    registry = ToolRegistry(rules={"schedule_*": rule} if rule else {})
    registry.add_source(Builtins(store=harness.store, blobs=harness.blobs,
                                 composer=Composer(config=harness.config), sender="bot@pizzamail.localhost"))
    offered = registry.bind(_scope(1, tmp_path)).get("schedule_task")
    assert offered is not None and offered.policy == policy and offered.idempotent


async def test_in_a_run_a_bad_phrase_goes_back_and_a_good_one_waits_then_saves(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([
        tool_call("schedule_task", {"name": "x", "when": "every 90 minutes", "prompt": "Check X"}),
        tool_call("schedule_task", {"name": "x", "when": "every 2 hours", "prompt": "Check X"}, call_id="c2"),
        text("Scheduled."),
    ])
    pokes: list[str] = []
    harness.store.events.subscribe(ScheduleChanged, lambda e: pokes.append(e.name))
    registry = ToolRegistry()
    registry.add_source(Builtins(
        store=harness.store, blobs=harness.blobs, composer=Composer(config=harness.config),
        sender=harness.config.agent.address))
    filer = Filer(mailbox=harness.mailbox, blobs=harness.blobs)
    run_id = await harness.task("Check X every 90 minutes")
    async with harness.running(tools=registry, filer=filer, poll_interval=0.2) as runner:
        assert await harness.finish(runner, run_id) == "waiting"
        assert "crosses the hour" in fake_openai.requests[1].messages[-1]["content"]
        [action] = await held_actions(harness.store)
        assert action.tool == "schedule_task" and "every 2 hours" in action.arguments
        assert await list_schedules(harness.store) == [] and pokes == []
        [request] = await requests(harness)  # the bad phrase asked nobody
        assert "**This call:** Start this task every 2 hours from 00:00 (cron `0 */2 * * *`" in plain(request)
        async with harness.store.write() as db:
            await apply_decision(db, action, Decision(kind="approve"), by=OWNER, via="test")
        runner.forget(run_id)
        assert await harness.finish(runner, run_id) == "done"
    [saved] = await list_schedules(harness.store)
    thread = (await get_run(harness.store, run_id)).thread_id
    assert (saved.source, saved.cron, saved.thread_id) == ("agent", "0 */2 * * *", thread)
    assert pokes == ["x"]
    assert "scheduled x: next occurrence" in fake_openai.requests[-1].messages[-1]["content"]


def _builtins(harness: Harness) -> ToolRegistry:
    registry, composer = ToolRegistry(), Composer(config=harness.config)
    registry.add_source(Builtins(store=harness.store, blobs=harness.blobs, composer=composer,
                                 sender=harness.config.agent.address))
    return registry


async def requests(harness: Harness) -> list[EmailMessage]:
    return [m for _, m in await bot_mails(harness.mailbox) if m["X-Pizzamail-Approval"]]


BERLIN_WEEKLY = "Start this task every Monday at 09:00 (cron `0 9 * * 1`, time zone Europe/Berlin), each time"
NEXT = re.compile(r"Next: Mon \d{1,2} \w{3} \d{4} 09:00, Mon \d{1,2} \w{3}( \d{4})? 09:00, Mon ")


async def held_weekly(harness: Harness, fake_openai: FakeOpenAI) -> tuple[Filer, int]:
    """A run whose model asked for the weekly schedule, stopped at the held call."""
    fake_openai.script([tool_call("schedule_task", {**WEEKLY, "tz": "Europe/Berlin"})])
    filer = Filer(mailbox=harness.mailbox, blobs=harness.blobs)
    run_id = await harness.task("Summarise X every Monday")
    async with harness.running(tools=_builtins(harness), filer=filer, poll_interval=0.2) as runner:
        assert await harness.finish(runner, run_id) == "waiting"
    return filer, run_id


async def edit_and_resume(harness: Harness, filer: Filer, run_id: int, arguments: dict[str, Any]) -> None:
    """The owner answers with edited arguments; the run goes on until it waits again."""
    [action] = await held_actions(harness.store)
    async with harness.store.write() as db:
        await apply_decision(db, action, Decision(kind="edit", arguments=arguments), by=OWNER, via="test")
    async with harness.running(tools=_builtins(harness), filer=filer, poll_interval=0.2) as runner:
        assert await harness.finish(runner, run_id) == "waiting"


async def test_the_request_mail_says_what_approving_does_above_the_arguments(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    await held_weekly(harness, fake_openai)
    [request] = await requests(harness)
    text = plain(request)
    assert f"**This call:** {BERLIN_WEEKLY}" in text and NEXT.search(text)
    assert text.index("**This call:**") < text.index("> Summarise X") < text.index("**Arguments:**")
    assert (f"<strong>This call:</strong> {BERLIN_WEEKLY.replace('`0 9 * * 1`', '<code>0 9 * * 1</code>')}"
            in html(request))
    assert re.search(r"<blockquote>\s*<p>Summarise X</p>", html(request))


async def test_a_request_written_again_after_a_restart_says_the_same(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    filer, run_id = await held_weekly(harness, fake_openai)
    await edit_and_resume(harness, filer, run_id, {**WEEKLY, "when": 9})  # fails the schema: asked again
    first, again = await requests(harness)
    assert "were not used" in plain(again) and "were not used" not in plain(first)
    said = [re.search(r"\*\*This call:\*\* (.*?) Next:", plain(m)) for m in (first, again)]
    assert said[0] is not None and said[1] is not None
    assert said[0][1] == said[1][1] == f"{BERLIN_WEEKLY} in this thread."


async def test_pizzamail_approvals_shows_what_approving_does(
    harness: Harness, fake_openai: FakeOpenAI, home: Home
) -> None:
    fake_openai.script([tool_call("schedule_task", {**WEEKLY, "tz": "Europe/Berlin"})])
    run_id = await harness.task("Summarise X every Monday")
    async with harness.running(tools=_builtins(harness), poll_interval=0.2) as runner:
        assert await harness.finish(runner, run_id) == "waiting"
    listed = await asyncio.to_thread(_cli, home, "approvals")
    lines = listed.output.splitlines()
    assert lines[1].startswith("   1       1  held     schedule_task {")
    assert lines[2].startswith(f"      {BERLIN_WEEKLY}") and NEXT.search(lines[2])
    assert lines[3:] == ["", "      > Summarise X"]
    [row] = json.loads((await asyncio.to_thread(_cli, home, "approvals", "--json")).output)
    assert row["description"].startswith(BERLIN_WEEKLY) and row["description"].endswith("\n\n> Summarise X")


def _cli(home: Home, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["--home", str(home.root), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


async def test_edited_arguments_the_tool_refuses_are_not_used_and_the_owner_is_asked_again(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    filer, run_id = await held_weekly(harness, fake_openai)
    # fits the schema; the tool cannot run it
    await edit_and_resume(harness, filer, run_id, {**WEEKLY, "when": "every 90 minutes"})
    assert await list_schedules(harness.store) == []
    [again] = (await requests(harness))[1:]
    assert "**Your edited arguments were not used:** not scheduled: when 'every 90 minutes'" in plain(again)
    [still] = await held_actions(harness.store)
    assert still.status == "held"
