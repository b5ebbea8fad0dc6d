"""`pizzamail threads` on a large home: the newest first, a page of them unless told, and each
thread's figures read by index (tests/test_cli.py covers the command's ordinary use)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from pizzamail.cli import cli
from pizzamail.store import Store, Tx
from pizzamail.store.runs import create_run
from pizzamail.store.threads import create_thread


async def fill(store: Store, threads: int) -> None:
    async def work(db: Tx) -> None:
        for n in range(threads):
            thread = await create_thread(db, subject=f"Task {n}", agent="bot@x")
            await create_run(db, thread, None, agent="bot@x")

    await store.write_at_once(work)


def listing(home: Path, *args: str) -> list[str]:
    result = CliRunner().invoke(cli, ["--home", str(home), "threads", *args], catch_exceptions=False)
    return result.output.splitlines()


def test_threads_lists_the_newest_page_and_says_how_many_more(tmp_path: Path) -> None:
    assert CliRunner().invoke(cli, ["--home", str(tmp_path), "init"]).exit_code == 0

    async def filled() -> None:
        async with Store(path=tmp_path / "state.db") as store:
            await fill(store, 60)

    asyncio.run(filled())
    lines = listing(tmp_path)
    assert len(lines) == 1 + 50 + 1
    assert lines[1].split()[0] == "60" and lines[-1].startswith("(the newest 50 of 60 threads")
    assert [line.split()[0] for line in listing(tmp_path, "--limit", "3")[1:]] == ["60", "59", "58", "(the"]
    assert len(listing(tmp_path, "--all")) == 1 + 60
    # --json has no line to say more were left out: a script gets every thread unless it limits
    assert "\n".join(listing(tmp_path, "--json")).count('"subject"') == 60
    assert "\n".join(listing(tmp_path, "--json", "--limit", "3")).count('"subject"') == 3


async def test_each_listed_thread_is_found_by_index(store: Store) -> None:
    """The latest run of a thread is an index search: a scan of every run for each thread made
    the listing of 10,000 threads take seconds (bench/threads.py)."""
    assert store.path is not None
    with sqlite3.connect(store.path) as db:
        plan = " / ".join(str(row[3]) for row in db.execute(
            "EXPLAIN QUERY PLAN SELECT error FROM runs r WHERE r.thread_id = 1 ORDER BY r.id DESC LIMIT 1"))
    assert "USING INDEX runs_thread" in plan and "SCAN" not in plan
