"""The store's reads: a caller cancelled in the middle of one never leaves later reads in the past;
reads that gather in one query what the Activity board shows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pizzamail.store import Row, Store, now
from pizzamail.store.activity import board_runs
from pizzamail.store.runs import create_run
from pizzamail.store.threads import (
    NewMessage,
    add_message,
    create_thread,
    list_threads,
    thread_for_references,
)
from tests.test_threads_listing import fill


async def test_a_read_cancelled_midway_does_not_leave_later_reads_in_the_past(store: Store) -> None:
    async with store.write() as db:
        await db.execute("CREATE TABLE t(n INTEGER)")
        await db.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(3)])
    """Found under load: claim_next committed a run, then get_run did not see it (issue 11)."""
    read = asyncio.create_task(store.fetchall("SELECT n FROM t"))
    await asyncio.sleep(0)  # PostgreSQL: the query is sent (SQLite: it is answered already)
    read.cancel()
    async with store.write() as db:
        await db.execute("INSERT INTO t VALUES (3)")
    row = await store.fetchone("SELECT count(*) FROM t")
    assert row is not None and row[0] == 4


@pytest.mark.parametrize("store_backend", ["sqlite"])  # PostgreSQL's reads go over the network
async def test_a_sqlite_read_is_answered_without_waiting_for_a_thread(store: Store) -> None:
    """SQLite's reads run on the caller's thread: a trip to a thread and back cost more than most
    reads (see pizzamail/store/sqlite.py). Fails on a read that suspends its caller."""
    async with store.write() as db:
        await db.execute("CREATE TABLE t(n INTEGER)")
        await db.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(3)])
    read = store.fetchall("SELECT n FROM t ORDER BY n")
    with pytest.raises(StopIteration) as answered:
        read.send(None)
    assert [row[0] for row in answered.value.value] == [0, 1, 2]


async def test_a_page_of_threads_is_the_newest(store: Store) -> None:
    await fill(store, 5)
    assert [t.id for t in await list_threads(store, limit=2)] == [5, 4]
    assert [t.id for t in await list_threads(store)] == [5, 4, 3, 2, 1]


async def test_the_thread_of_a_replys_references_is_found_in_one_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply names every mail before it in its thread; the newest one stored names the thread."""
    threads = []
    for subject in ("first", "second"):
        async with store.write() as db:
            thread = await create_thread(db, subject=subject, agent="bot@x")
            await add_message(db, thread, NewMessage(
                message_id=f"{subject}@x", in_reply_to=None, refs=[], direction="in", kind="task",
                sender="me@x", subject=subject, body="", blob="", size=0))
        threads.append(thread)
    fetchall, reads = store.fetchall, []

    async def counted(sql: str, params: Iterable[Any] = ()) -> list[Row]:
        reads.append(sql)
        return await fetchall(sql, params)

    monkeypatch.setattr(store, "fetchall", counted)
    refs = ["gone-1@x", "first@x", "gone-2@x", "second@x", "gone-3@x"]
    assert await thread_for_references(store, refs) == threads[1]
    assert await thread_for_references(store, refs[:3]) == threads[0]
    assert await thread_for_references(store, ["gone@x"]) is None
    assert len(reads) == 3


async def test_the_boards_runs_come_with_their_last_tool_in_one_read(store: Store) -> None:
    """``board_runs`` on both engines: each run not over names the tool it called last (a held call
    after a tool call names the held one), a run without a tool call none, a finished run none."""
    async with store.write() as db:
        thread = await create_thread(db, subject="s", agent="bot@pizzamail.localhost")
        runs = [await create_run(db, thread, None) for _ in range(3)]
        first, second, third = runs
        steps = [(first, 1, "tool", "web_fetch"), (first, 2, "model", None), (first, 3, "held", "send_email"),
                 (first, 4, "model", None), (third, 1, "tool", "web_fetch")]
        for run, seq, kind, name in steps:
            await db.execute("INSERT INTO steps(run_id, seq, kind, data, created_at) VALUES (?, ?, ?, ?, ?)",
                             (run, seq, kind, json.dumps({"name": name} if name else {}), now()))
        await db.execute("UPDATE runs SET status = 'running' WHERE id = ?", (first,))
        await db.execute("UPDATE runs SET status = 'done', finished_at = ? WHERE id = ?", (now(), third))
    shown = await board_runs(store, finished_since=datetime.now(UTC) - timedelta(minutes=1))
    assert [(r.run, r.status, r.steps, r.last_tool) for r in shown] == [
        (first, "running", 2, "send_email"), (second, "queued", 0, None), (third, "done", 0, None)]


async def test_tuples_read_what_rows_read_and_see_the_latest_commit(store: Store) -> None:
    """``fetch_tuples``, the mail index's read of thousands of rows, on both engines: plain tuples
    of the same values (integers, text, bytes, NULL) as ``fetchall``'s rows, after each commit."""
    async with store.write() as db:
        await db.executemany("INSERT INTO blobs(digest, data) VALUES (?, ?)", [("a", b"\0x"), ("bc", b"")])
    select = "SELECT length(digest), digest, data, NULL FROM blobs WHERE digest >= ? ORDER BY digest"
    tuples = await store.fetch_tuples(select, ("a",))
    assert tuples == [tuple(row) for row in await store.fetchall(select, ("a",))]
    assert tuples == [(1, "a", b"\0x", None), (2, "bc", b"", None)] and all(type(t) is tuple for t in tuples)
    async with store.write() as db:
        await db.execute("INSERT INTO blobs(digest, data) VALUES ('d', ?)", (b"\1",))
    assert [t[1] for t in await store.fetch_tuples(select, ("b",))] == ["bc", "d"]
