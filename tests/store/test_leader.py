"""Leader election: two stores on one database (two serves) compete for the leadership; exactly one
leads, and the other takes over when the leader's store closes or its connection is killed."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import pytest

from pizzamail.store import Store
from pizzamail.store.leader import LEADER_LOCK, Leadership, hold_for, leader_of
from tests import postgres

RETRY = 0.05
WAIT = 30.0


@dataclass
class Part:
    """A led part that records when it runs."""

    entered: int = 0
    left: int = 0
    running: asyncio.Event = field(default_factory=asyncio.Event)

    @asynccontextmanager
    async def make(self) -> AsyncIterator[None]:
        self.entered += 1
        self.running.set()
        try:
            yield
        finally:
            self.left += 1
            self.running.clear()


async def _elect(stack: AsyncExitStack, store: Store, part: Part) -> Leadership:
    leadership = await stack.enter_async_context(Leadership(hold=hold_for(store), retry=RETRY))
    await stack.enter_async_context(leadership.led("scheduler", part.make))
    return leadership


async def test_a_lone_serve_leads_from_its_start(store: Store) -> None:
    part = Part()
    async with AsyncExitStack() as stack:
        leadership = await _elect(stack, store, part)
        assert leadership.leading and part.entered == 1
    assert part.left == 1


@pytest.fixture
async def twins(pg_cluster: postgres.Cluster) -> AsyncIterator[tuple[Store, Store]]:
    url = pg_cluster.database()
    async with Store(url=url) as first, Store(url=url) as second:
        yield first, second


async def test_exactly_one_of_two_leads_and_the_other_takes_over_when_it_stops(
    twins: tuple[Store, Store],
) -> None:
    parts = Part(), Part()
    async with AsyncExitStack() as standby_stack:
        leader_stack = AsyncExitStack()
        leader = await _elect(leader_stack, twins[0], parts[0])
        standby = await _elect(standby_stack, twins[1], parts[1])
        assert leader.leading and parts[0].entered == 1
        await asyncio.sleep(RETRY * 10)  # several tries of the standby, each refused
        assert not standby.leading and parts[1].entered == 0
        await leader_stack.aclose()  # serve stops: its session ends, the lock is free
        assert parts[0].left == 1
        await asyncio.wait_for(parts[1].running.wait(), WAIT)
        assert standby.leading and parts[1].entered == 1


async def test_a_killed_connection_loses_the_leadership_at_once(
    twins: tuple[Store, Store], pg_cluster: postgres.Cluster,
) -> None:
    parts = Part(), Part()
    async with AsyncExitStack() as stack:
        first = await _elect(stack, twins[0], parts[0])
        second = await _elect(stack, twins[1], parts[1])
        assert first.leading and not second.leading
        assert await leader_of(twins[1]) == f"{socket.gethostname()[:30]} pid {os.getpid()}"
        with pg_cluster.admin() as admin:
            killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_locks"
                                   " WHERE locktype = 'advisory' AND granted AND objid::bigint = %s",
                                   (LEADER_LOCK & 0xFFFFFFFF,))
            assert killed.fetchall() == [(True,)]
        await asyncio.wait_for(first.until(False), WAIT)
        assert parts[0].left == 1 and not parts[0].running.is_set()
        await asyncio.wait_for(parts[1].running.wait(), WAIT)
        # the old leader stands by now, and takes over again when the new one stops
        assert second.leading and not first.leading
        await asyncio.sleep(RETRY * 10)
        assert parts[0].entered == 1


@asynccontextmanager
async def _broken() -> AsyncIterator[None]:
    raise RuntimeError("the remote server refused the login")
    yield  # pragma: no cover


async def test_a_part_that_cannot_start_on_taking_over_does_not_keep_the_others_out(
    twins: tuple[Store, Store],
) -> None:
    first, second = Part(), Part()
    async with AsyncExitStack() as stack:
        leader_stack = AsyncExitStack()
        await _elect(leader_stack, twins[0], first)
        standby = await stack.enter_async_context(Leadership(hold=hold_for(twins[1]), retry=RETRY))
        await stack.enter_async_context(standby.led("the watches", _broken))
        await stack.enter_async_context(standby.led("the scheduler", second.make))
        await leader_stack.aclose()
        await asyncio.wait_for(second.running.wait(), WAIT)
        assert standby.leading and standby.names() == ["the watches", "the scheduler"]
