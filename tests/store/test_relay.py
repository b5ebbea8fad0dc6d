"""The relay of commit events between serve and its runner process (two stores on one SQLite file)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pizzamail.store import Store
from pizzamail.store.events import CommitEvent, RunQueued, StopRequested, record
from pizzamail.store.relay import Relay
from pizzamail.store.threads import create_thread


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[Store, Store]]:
    async with Store(path=tmp_path / "state.db") as serve, Store(path=tmp_path / "state.db") as runner:
        yield serve, runner


def heard(store: Store, kind: type[CommitEvent]) -> asyncio.Queue[CommitEvent]:
    queue: asyncio.Queue[CommitEvent] = asyncio.Queue()
    store.events.subscribe(kind, queue.put_nowait)
    return queue


async def commit(store: Store, event: CommitEvent) -> int:
    """A transaction that writes a thread and records ``event``; the thread's id."""
    async with store.write() as db:
        thread = await create_thread(db, subject="relayed", agent="bot@x")
        record(db, event)
    return thread


async def test_a_commit_s_events_reach_the_other_process_after_the_commit_and_are_not_sent_back(
    pair: tuple[Store, Store]
) -> None:
    serve, runner = pair
    ours, theirs = socket.socketpair()
    at_runner, at_serve = heard(runner, RunQueued), heard(serve, RunQueued)
    async with Relay(events=serve.events, sock=ours), Relay(events=runner.events, sock=theirs):
        thread = await commit(serve, RunQueued(run=7, thread=1))
        assert await asyncio.wait_for(at_runner.get(), 10) == RunQueued(run=7, thread=1)
        # the row the event follows is there to read on the other side
        assert await runner.fetchone("SELECT id FROM threads WHERE id = ?", (thread,)) is not None
        assert at_serve.get_nowait() == RunQueued(run=7, thread=1)  # published here too, once
        await commit(runner, RunQueued(run=8, thread=2))  # and the other way
        assert await asyncio.wait_for(at_serve.get(), 10) == RunQueued(run=8, thread=2)
        await asyncio.sleep(0.2)  # time enough for an echo to come back, if one were sent
    assert at_serve.empty() and at_runner.get_nowait() == RunQueued(run=8, thread=2) and at_runner.empty()


async def test_many_events_of_one_commit_travel_in_several_lines(pair: tuple[Store, Store]) -> None:
    serve, runner = pair
    ours, theirs = socket.socketpair()
    at_runner = heard(runner, StopRequested)
    async with Relay(events=serve.events, sock=ours), Relay(events=runner.events, sock=theirs):
        async with serve.write() as db:
            for run in range(3000):  # ~100 KB of events: over the reader's 64 KiB line limit
                record(db, StopRequested(run=run, thread=run))
        got = [await asyncio.wait_for(at_runner.get(), 10) for _ in range(3000)]
    assert [event.run for event in got if isinstance(event, StopRequested)] == list(range(3000))


async def test_the_other_side_closing_is_told_and_a_garbled_line_is_skipped(
    pair: tuple[Store, Store]
) -> None:
    serve, _ = pair
    ours, theirs = socket.socketpair()
    gone = asyncio.Event()
    at_serve = heard(serve, RunQueued)
    async with Relay(events=serve.events, sock=ours, closed=gone.set):
        theirs.sendall(b"not json\n" + b'{"o":"relay","e":[["RunQueued",{"run":1,"thread":2}]]}\n')
        assert await asyncio.wait_for(at_serve.get(), 10) == RunQueued(run=1, thread=2)
        assert not gone.is_set()
        theirs.close()
        await asyncio.wait_for(gone.wait(), 10)
