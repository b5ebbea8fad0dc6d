"""Commit events: published after the commit, never for a rollback, never a writer's failure."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing

import psycopg
import pytest

from pizzamail.store import Store
from pizzamail.store.events import CommitEvent, Follow, MessageAdded, Resync, RunQueued, decode, encode
from pizzamail.store.runs import create_run
from pizzamail.store.threads import NewMessage, add_message, create_thread


def new_message(subject: str) -> NewMessage:
    return NewMessage(message_id=f"{subject}@test", in_reply_to=None, refs=[], direction="in", kind="task",
                      sender="me@pizzamail.localhost", subject=subject, body="", blob="0" * 64, size=0)


async def add_task(store: Store, subject: str) -> int:
    async with store.write() as db:
        thread = await create_thread(db, subject=subject, agent="bot@pizzamail.localhost")
        row = await add_message(db, thread, new_message(subject))
        return await create_run(db, thread, row)


def committed_subject(store: Store, row: int) -> str | None:
    """Read by a connection of its own, as another process would: only committed rows are there."""
    if store.url is not None:
        with psycopg.connect(store.url) as pg:
            found = pg.execute("SELECT subject FROM messages WHERE id = %s", (row,)).fetchone()
    else:
        with closing(sqlite3.connect(str(store.path))) as db:
            found = db.execute("SELECT subject FROM messages WHERE id = ?", (row,)).fetchone()
    return str(found[0]) if found else None


async def test_a_subscriber_finds_the_row_committed_when_it_is_told(store: Store) -> None:
    seen: list[tuple[MessageAdded, str | None]] = []
    store.events.subscribe(MessageAdded, lambda e: seen.append((e, committed_subject(store, e.message))))
    queued: list[RunQueued] = []
    store.events.subscribe(RunQueued, queued.append)

    run = await add_task(store, "Summarise issues")

    [(event, subject)] = seen
    assert subject == "Summarise issues"
    assert (event.folder, event.direction, event.kind) == ("INBOX", "in", "task")
    assert [q.run for q in queued] == [run]


async def test_a_rolled_back_transaction_publishes_nothing(store: Store) -> None:
    seen: list[CommitEvent] = []
    store.events.subscribe(MessageAdded, seen.append)
    store.events.subscribe(RunQueued, seen.append)

    with pytest.raises(RuntimeError):
        async with store.write() as db:
            thread = await create_thread(db, subject="lost", agent="bot@pizzamail.localhost")
            await create_run(db, thread, await add_message(db, thread, new_message("lost")))
            raise RuntimeError("rolled back")
    assert seen == []
    await add_task(store, "kept")  # the next transaction publishes its own events only
    assert [type(e) for e in seen] == [MessageAdded, RunQueued]
    assert isinstance(seen[0], MessageAdded) and committed_subject(store, seen[0].message) == "kept"


async def test_a_failing_subscriber_neither_fails_the_write_nor_silences_the_others(store: Store) -> None:
    def broken(_: MessageAdded) -> None:
        raise ValueError("a subscriber's bug")

    store.events.subscribe(MessageAdded, broken)
    seen: list[MessageAdded] = []
    store.events.subscribe(MessageAdded, seen.append)
    await add_task(store, "still stored")
    [event] = seen
    assert committed_subject(store, event.message) == "still stored"


async def test_an_unsubscribed_callback_is_not_called(store: Store) -> None:
    seen: list[MessageAdded] = []
    unsubscribe = store.events.subscribe(MessageAdded, seen.append)
    unsubscribe()
    await add_task(store, "unseen")
    assert seen == []


async def test_follow_works_once_a_burst_and_finishes_asked_work_when_left(store: Store) -> None:
    done: list[int] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def work() -> None:
        done.append(len(await store.fetchall("SELECT id FROM messages")))
        started.set()
        await release.wait()

    async with Follow(events=store.events, kinds=(MessageAdded,), work=work, name="test"):
        await add_task(store, "first")
        await started.wait()  # working on the first; three more arrive meanwhile
        for n in range(3):
            await add_task(store, f"more {n}")
        release.set()
    assert done == [1, 4]  # one pass for the burst, done before leaving returned


async def test_a_writer_cancelled_while_it_commits_still_publishes_what_it_committed(store: Store) -> None:
    published = asyncio.Event()
    store.events.subscribe(MessageAdded, lambda _: published.set())
    in_commit = asyncio.Event()

    async def writer() -> None:
        async with store.write() as db:
            thread = await create_thread(db, subject="cut off", agent="bot@pizzamail.localhost")
            await add_message(db, thread, new_message("cut off"))
            in_commit.set()  # nothing yields from here to the commit's await: the test runs there

    task = asyncio.create_task(writer())
    await in_commit.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(published.wait(), 10)
    assert [r["subject"] for r in await store.fetchall("SELECT subject FROM messages")] == ["cut off"]


def test_events_travel_as_payloads_under_the_limit_and_come_back_whole() -> None:
    events: list[CommitEvent] = [
        MessageAdded(message=n, thread=n, folder="INBOX", direction="in", kind="task") for n in range(200)]
    payloads = encode(events, origin="here", limit=1000)
    assert len(payloads) > 1 and all(len(p.encode()) <= 1000 for p in payloads)
    decoded = [decode(p) for p in payloads]
    assert {origin for origin, _ in decoded} == {"here"}
    assert [e for _, batch in decoded for e in batch] == events
    assert encode([], origin="here", limit=1000) == ['{"o":"here","e":[]}']  # a commit without events
    with pytest.raises(ValueError):
        decode('{"o": "x", "e": [["NoSuchEvent", {}]]}')


@pytest.mark.parametrize("store_backend", ["postgresql"])
async def test_another_process_commits_reach_this_store_events_once(store: Store) -> None:
    """With PostgreSQL a commit anywhere is told to every store (LISTEN/NOTIFY); its own store, told at
    commit already, does not hear it twice."""
    here: list[RunQueued] = []
    there: list[RunQueued] = []
    heard = asyncio.Event()
    store.events.subscribe(RunQueued, here.append)
    async with store.twin() as other:
        other.events.subscribe(RunQueued, lambda e: (there.append(e), heard.set()))
        before = await other.data_version()
        run = await add_task(store, "told everywhere")
        await asyncio.wait_for(heard.wait(), 10)
        assert await other.data_version() > before  # counted before the events are published
    assert [e.run for e in here] == [run]
    assert there == [RunQueued(run=run, thread=here[0].thread)]


@pytest.mark.parametrize("store_backend", ["postgresql"])
async def test_a_lost_listen_connection_comes_back_and_says_events_may_have_been_missed(store: Store) -> None:
    resynced = asyncio.Event()
    store.events.subscribe(Resync, lambda _: resynced.set())
    assert store.url is not None
    with psycopg.connect(store.url, autocommit=True) as admin:  # the server drops the LISTEN session
        killed = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE query = 'LISTEN pizzamail' AND datname = current_database()").fetchall()
    assert killed == [(True,)]
    await asyncio.wait_for(resynced.wait(), 10)
    heard = asyncio.Event()
    store.events.subscribe(RunQueued, lambda _: heard.set())
    async with store.twin() as other:
        await add_task(other, "after the reconnect")
    await asyncio.wait_for(heard.wait(), 10)
