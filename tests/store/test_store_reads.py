"""The store's reads: a caller cancelled in the middle of one never leaves later reads in the past."""

from __future__ import annotations

import asyncio

from pizzamail.store import Store
from pizzamail.store.threads import list_threads
from tests.test_threads_listing import fill


async def test_a_read_cancelled_midway_does_not_leave_later_reads_in_the_past(store: Store) -> None:
    async with store.write() as db:
        await db.execute("CREATE TABLE t(n INTEGER)")
        await db.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(3)])
    """Found under load: claim_next committed a run, then get_run did not see it (issue 11)."""
    read = asyncio.create_task(store.fetchall("SELECT n FROM t"))
    await asyncio.sleep(0)  # the query is handed to the connection's thread
    read.cancel()
    async with store.write() as db:
        await db.execute("INSERT INTO t VALUES (3)")
    row = await store.fetchone("SELECT count(*) FROM t")
    assert row is not None and row[0] == 4


async def test_a_page_of_threads_is_the_newest(store: Store) -> None:
    await fill(store, 5)
    assert [t.id for t in await list_threads(store, limit=2)] == [5, 4]
    assert [t.id for t in await list_threads(store)] == [5, 4, 3, 2, 1]
