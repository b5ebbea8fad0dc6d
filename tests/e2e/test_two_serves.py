"""Two real ``pizzamail serve`` processes on one PostgreSQL database, with the same schedule in both
configs: one leads (its scheduler fires), the other stands by; each occurrence fires exactly once;
when the leader is killed (SIGKILL) the other takes over and fires the next occurrence.

The test sets the schedule's next due time a few seconds ahead through the store (its commit
notifies both serves, as ``pizzamail schedule add`` from another process would), so no occurrence
waits for a cron time.
"""

from __future__ import annotations

import asyncio
import re
import signal
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from pizzamail.home import Home
from pizzamail.store import Store
from pizzamail.store.events import RunChanged
from pizzamail.store.schedules import find_schedule, move_due
from tests import postgres
from tests.e2e.harness import Served, serve_env, write_config
from tests.e2e.test_roundtrip import fetch_all
from tests.fakes.openai_server import FakeOpenAI, text

pytestmark = pytest.mark.slow

LEAD = ("leading: filing, the Action folder's sync, requests to Action, the Activity board, the scheduler,"
        " the approvals sweep, the watches")
SCHEDULE = '\n[schedules.tick]\ncron = "0 3 * * *"\ntz = "UTC"\nprompt = "Count the open issues."\n'
FIRED = re.compile(r"schedule tick: occurrence (\S+) fired")


@pytest.fixture
def two(tmp_path: Path, fake_openai: FakeOpenAI, pg_cluster: postgres.Cluster
        ) -> Iterator[tuple[str, list[Served]]]:
    url = pg_cluster.database()
    serves = []
    for name in ("a", "b"):
        home = tmp_path / name
        write_config(home, base_url=fake_openai.base_url)
        _share(tmp_path / "shared", home)
        with (home / "config.toml").open("a") as config:
            config.write(SCHEDULE)
        postgres.point_home(Home(root=home), url)
        serves.append(Served(home=home, env=serve_env(home)))
    yield url, serves
    for served in serves:
        if served.proc is not None:
            served.stop(signal.SIGKILL)


def _share(shared: Path, home: Path) -> None:
    """The Maildir and the blobs on a filesystem both serves reach (the mail index is in the
    database they share, so they must see the same files)."""
    for folder in ("Maildir", "blobs"):
        (shared / folder).mkdir(mode=0o700, parents=True, exist_ok=True)
        (home / folder).symlink_to(shared / folder)


async def _due_soon(store: Store) -> str:
    """The schedule's next occurrence in two seconds (a time of its own, never fired before)."""
    due = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    schedule = await find_schedule(store, "tick")
    assert schedule is not None
    async with store.write() as db:
        assert await move_due(db, schedule.id, due)
    return due


async def _done(store: Store, finished: dict[int, asyncio.Event], run: int) -> None:
    """Either serve's runner may take the run: its end is heard from the store."""
    await asyncio.wait_for(finished[run].wait(), 60)


def _occurrences(url: str) -> list[tuple[str, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT due_at, run_id FROM occurrences ORDER BY due_at").fetchall()
    return [(str(due), int(run)) for due, run in rows]


def _runs(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, status FROM runs ORDER BY id").fetchall()
    return [(int(run), str(status)) for run, status in rows]


def _errors(served: Served) -> list[str]:
    """What a serve logged as an error (two serves writing one mail index would clash)."""
    return [line for log in (served.home / "logs").glob("*.log") for line in log.read_text().splitlines()
            if '"level": "error"' in line]


def _fired(served: Served) -> list[str]:
    return [found[1] for line in served.output if (found := FIRED.search(line))]


async def test_each_occurrence_fires_once_and_the_standby_takes_over_from_a_killed_leader(
    two: tuple[str, list[Served]], fake_openai: FakeOpenAI,
) -> None:
    url, (first, second) = two
    fake_openai.script([], then=text("Twelve open issues."))
    finished: defaultdict[int, asyncio.Event] = defaultdict(asyncio.Event)
    store = await Store(url=url).open()
    store.events.subscribe(RunChanged, lambda e: finished[e.run].set() if e.status == "done" else None)
    try:
        await _check(url, store, finished, first, second)
    finally:
        await store.close()


async def _check(url: str, store: Store, finished: dict[int, asyncio.Event], first: Served,
                 second: Served) -> None:
    first.start()
    assert LEAD in first.wait_for("leading:")
    second.start()
    assert "the scheduler" in second.wait_for("standby:")

    due = await _due_soon(store)
    first.wait_for(f"schedule tick: occurrence {due} fired")
    await _done(store, finished, 1)
    assert _occurrences(url) == [(due, 1)]
    assert _runs(url) == [(1, "done")]
    assert _fired(second) == []

    first.stop(signal.SIGKILL)  # its session ends with it: the lock is free at once
    second.wait_for(LEAD)
    later = await _due_soon(store)
    assert later != due
    second.wait_for(f"schedule tick: occurrence {later} fired")
    second.wait_for("run 2 done")  # the only serve left: its runner ran it and filed all mail
    inbox = [msg for _, msg in fetch_all(second)]
    assert len({str(msg["Message-ID"]) for msg in inbox}) == len(inbox) == 4  # 2 tasks, 2 replies
    assert sorted(str(msg["X-Pizzamail-Run"]) for msg in inbox if msg["X-Pizzamail-Run"]) == ["1", "2"]
    assert _errors(first) == _errors(second) == []
    assert _occurrences(url) == [(due, 1), (later, 2)]
    assert _runs(url) == [(1, "done"), (2, "done")]
    assert _fired(second) == [later]
