"""The triggers' store repositories: schedules, occurrences, watches, hooks, a sender's last task."""

from __future__ import annotations

import dataclasses

from pizzamail.home import Home
from pizzamail.store import Store
from pizzamail.store.hooks import list_hooks, record_outcome, record_run
from pizzamail.store.runs import create_run
from pizzamail.store.schedules import (
    NewSchedule,
    add_occurrence,
    earliest_due,
    find_schedule,
    move_due,
    remove_schedule,
    save_schedule,
)
from pizzamail.store.senders import last_task_from
from pizzamail.store.threads import NewMessage, add_message, create_thread
from pizzamail.store.watches import Handled, add_handled, find_watch, start_at
from pizzamail.store.watches import record_run as record_watch_run

NEWS = NewSchedule(name="news", cron="0 8 * * *", tz="UTC", prompt="Summarise", catch_up="once",
                   source="cli", enabled=True, next_due="2025-01-06T08:00:00Z")


async def test_saving_again_keeps_the_due_time_and_thread_unless_the_times_change(store: Store) -> None:
    async with store.write() as db:
        thread = await create_thread(db, subject="Schedule: news", agent="bot@x")
    await save_schedule(store, dataclasses.replace(NEWS, thread_id=thread))
    later = "2025-01-09T08:00:00Z"
    same = await save_schedule(store, dataclasses.replace(NEWS, prompt="Other", next_due=later))
    assert (same.prompt, same.next_due, same.thread_id) == ("Other", "2025-01-06T08:00:00Z", thread)
    berlin = dataclasses.replace(NEWS, tz="Europe/Berlin", next_due="2025-01-06T07:00:00Z")
    moved = await save_schedule(store, berlin)
    assert (moved.tz, moved.next_due, moved.thread_id) == ("Europe/Berlin", "2025-01-06T07:00:00Z", thread)
    assert await find_schedule(store, "missing") is None


async def test_an_occurrence_is_recorded_once_and_a_removed_schedule_does_not_move(store: Store) -> None:
    saved = await save_schedule(store, NEWS)
    async with store.write() as db:
        assert await move_due(db, saved.id, "2025-01-07T08:00:00Z")
        assert await add_occurrence(db, saved.id, "2025-01-06T08:00:00Z", "fired")
        assert not await add_occurrence(db, saved.id, "2025-01-06T08:00:00Z", "fired")
    assert await earliest_due(store) == "2025-01-07T08:00:00Z"
    assert await remove_schedule(store, "news")
    async with store.write() as db:
        assert not await move_due(db, saved.id, "2025-01-08T08:00:00Z")
    assert await earliest_due(store) is None


async def test_the_data_version_moves_when_another_connection_commits(store: Store, home: Home) -> None:
    before = await store.data_version()
    assert await store.data_version() == before
    async with store.twin() as other:
        await save_schedule(other, NEWS)
    assert await store.data_version() != before


async def test_a_watched_mail_is_handled_once_and_the_last_uid_never_goes_back(store: Store) -> None:
    await start_at(store, "w", mailbox="me@host:993/INBOX", uidvalidity=7, uid=4, note="started")
    async with store.write() as db:
        assert await add_handled(db, Handled(watch="w", uidvalidity=7, uid=9, message_id="a@x"))
        assert not await add_handled(db, Handled(watch="w", uidvalidity=7, uid=9))
        assert await add_handled(db, Handled(watch="w", uidvalidity=7, uid=6))
    watch = await find_watch(store, "w")
    assert watch is not None and (watch.last_uid, watch.last_outcome) == (9, "started")


async def test_a_watch_keeps_its_thread_when_a_run_starts_in_a_new_one(store: Store) -> None:
    await start_at(store, "w", mailbox="me@host:993/INBOX", uidvalidity=7, uid=0, note="started")
    async with store.write() as db:
        first = await create_thread(db, subject="one", agent="bot@x")
        await record_watch_run(db, Handled(watch="w", uidvalidity=7, uid=1), run_id=1, thread_id=first)
        await record_watch_run(db, Handled(watch="w", uidvalidity=7, uid=2), run_id=2, thread_id=None)
    watch = await find_watch(store, "w")
    assert watch is not None and (watch.thread_id, watch.last_outcome) == (first, "run 2 (UID 2)")


async def test_a_refused_delivery_keeps_the_hooks_thread(store: Store) -> None:
    async with store.write() as db:
        thread = await create_thread(db, subject="Webhook: ci", agent="bot@x")
        await record_run(db, "ci", thread_id=thread, run_id=5)
    await record_outcome(store, "ci", "refused 401: bad signature")
    [hook] = await list_hooks(store)
    assert (hook.name, hook.thread_id, hook.last_outcome) == ("ci", thread, "refused 401: bad signature")


async def test_a_senders_last_task_is_found_whatever_the_case_of_its_address(store: Store) -> None:
    assert await last_task_from(store, "ann@example.org") is None
    async with store.write() as db:
        thread = await create_thread(db, subject="Hi", agent="bot@x")
        message = await add_message(db, thread, NewMessage(
            message_id="m1@x", in_reply_to=None, refs=[], direction="in", kind="task",
            sender="Ann@Example.org", subject="Hi", body="Do it", blob="b", size=1))
        run = await create_run(db, thread, message)
    task = await last_task_from(store, "ann@example.org")
    assert task is not None and (task.run_id, task.status) == (run, "queued")
