"""``pizzamail migrate-store``: a SQLite home's state (rows, blobs, run files) copied into an empty
PostgreSQL database, ids kept, and the store that opens there goes on from it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP
from pathlib import Path
from typing import Any

import pytest

from pizzamail.config import ScheduleSettings
from pizzamail.errors import HomeInUse, TransferError
from pizzamail.home import Home, serving
from pizzamail.intake.batch import GroupCommit
from pizzamail.intake.tasks import Received, store_task
from pizzamail.mail.parse import parse_mail
from pizzamail.mailbox import Mailbox
from pizzamail.mailbox.filing import Filer
from pizzamail.store import Store
from pizzamail.store.actions import NewHeldAction, hold_action
from pizzamail.store.blobs import digest_of
from pizzamail.store.location import blobs_for, workspaces_for
from pizzamail.store.memory import add_note, relevant_notes
from pizzamail.store.runs import add_step
from pizzamail.store.schedules import new_schedule, save_schedule
from tests import postgres
from tests.test_cli import run

BOT = "bot@pizzamail.localhost"
#: SQLite's own: what ran on it, and memory's FTS5 index (PostgreSQL's is a generated column)
SQLITE_ONLY = ("migrations", "memory_search", "sqlite_sequence")
#: filled from files as well as from SQLite's rows: compared by loading each message's blob
FILLED_FROM_FILES = ("blobs",)


def task_mail(subject: str) -> bytes:
    msg = EmailMessage(policy=SMTP)
    msg["From"], msg["To"], msg["Subject"] = "me@pizzamail.localhost", BOT, subject
    msg["Message-ID"] = f"<{subject.replace(' ', '.')}@client.example>"
    msg.set_content(f"{subject}, please.")
    return msg.as_bytes()


async def fill(home: Home) -> int:
    """A home that served a while: a task with its run, a step, a held action, a note, a schedule,
    its mail filed in the Maildir (the index rows) and a file the run wrote; a mail taken by SMTP
    too, whose bytes SQLite keeps in its own table. Returns the run."""
    async with Store(path=home.database) as store:
        blobs = blobs_for(home, store)
        smtp = task_mail("Mend the nets")
        await GroupCommit(store=store, blobs=blobs).commit(Received(
            raw=smtp, parsed=parse_mail(smtp), agent=BOT, domain="pizzamail.localhost"))
        assert [tuple(r) for r in await store.fetchall("SELECT digest FROM blobs")] == [(digest_of(smtp),)]
        raw = task_mail("Check the tides")
        stored = await store_task(store, blobs, raw, parse_mail(raw), agent=BOT, domain="pizzamail.localhost")
        assert stored.run_id is not None and stored.thread_id is not None
        async with store.write() as db:
            await add_step(db, stored.run_id, 0, "model", {"text": "looking"})
            await hold_action(db, NewHeldAction(
                run_id=stored.run_id, thread_id=stored.thread_id, call_id="c1", tool="delete_note",
                server="builtin", original="delete_note", arguments={"name": "a"}, reason="tidy"))
            await add_note(db, "the tide tables live at tides.example", thread_id=stored.thread_id,
                           run_id=stored.run_id, call_id="c2")
        await save_schedule(store, new_schedule(
            "daily", ScheduleSettings(cron="0 8 * * *", prompt="Summarise"), source="config",
            at=datetime(2026, 1, 5, tzinfo=UTC), agent_tz="UTC"))
        await Filer(mailbox=await Mailbox(root=home.maildir, store=store).open(), blobs=blobs).run()
    folder = home.root / "workspaces" / str(stored.run_id)
    (folder / ".pictures").mkdir(parents=True)
    (folder / "report.md").write_bytes(b"# Tides\n")
    (folder / ".pictures" / "d1g3st").write_bytes(b"png bytes")
    return stored.run_id


async def tables_of(sqlite: Store, target: Store) -> dict[str, tuple[list[Any], list[Any]]]:
    """Each table of SQLite's with its rows on both sides, in the same order and columns."""
    names = [str(r[0]) for r in await sqlite.fetchall(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'memory_search%'")]
    found = {}
    for table in (t for t in names if t not in SQLITE_ONLY + FILLED_FROM_FILES):
        columns = ", ".join(str(r[1]) for r in await sqlite.fetchall(f"PRAGMA table_info({table})"))
        query = f"SELECT {columns} FROM {table} ORDER BY {columns}"
        found[table] = ([tuple(r) for r in await sqlite.fetchall(query)],
                        [tuple(r) for r in await target.fetchall(query)])
    return found


async def test_a_home_is_copied_with_its_ids_blobs_and_files_and_goes_on_in_postgresql(
    home: Home, pg_cluster: postgres.Cluster, tmp_path: Path
) -> None:
    run_id = await fill(home)
    url = pg_cluster.empty_database()
    result = await asyncio.to_thread(run, home.root, "migrate-store", url)
    assert result.exit_code == 0, result.output
    assert "run file(s)" in result.output and "[store]" in result.output and "keys set store" in result.output
    async with Store(path=home.database) as sqlite, Store(url=url) as target:
        tables = await tables_of(sqlite, target)
        assert {"threads", "runs", "steps", "held_actions", "schedules", "memory", "messages"} <= set(tables)
        for table, (before, after) in tables.items():
            assert after == before, table
        assert all(before for table, (before, _) in tables.items()
                   if table in ("threads", "runs", "steps", "held_actions", "schedules", "memory"))
        for message in await sqlite.fetchall("SELECT blob FROM messages"):
            assert await blobs_for(home, target).load(message[0]) == await blobs_for(
                home, sqlite).load(message[0])
        elsewhere = workspaces_for(Home(root=tmp_path / "worker"), target)  # a machine with no files
        folder = await elsewhere.fetch(run_id)
        assert (folder / "report.md").read_bytes() == b"# Tides\n"
        assert (folder / ".pictures" / "d1g3st").read_bytes() == b"png bytes"
        raw = task_mail("Another task")
        stored = await store_task(target, blobs_for(home, target), raw, parse_mail(raw), agent=BOT,
                                  domain="pizzamail.localhost")
        assert stored.run_id == run_id + 1  # each sequence went on past the ids copied
        [note] = await relevant_notes(target, "where are the tide tables?", recent=0)
        assert note.text == "the tide tables live at tides.example"


async def test_a_database_that_holds_data_is_refused(home: Home, pg_cluster: postgres.Cluster) -> None:
    await fill(home)
    url = pg_cluster.empty_database()
    assert (await asyncio.to_thread(run, home.root, "migrate-store", url)).exit_code == 0
    with pytest.raises(TransferError) as refused:
        await asyncio.to_thread(run, home.root, "migrate-store", url)
    assert "already holds pizzamail's data" in refused.value.cli_message()
    assert "url of an empty database" in refused.value.cli_message()
    async with Store(url=url) as target, Store(path=home.database) as sqlite:
        [(threads,)] = await target.fetchall("SELECT count(*) FROM threads")
        [(there,)] = await sqlite.fetchall("SELECT count(*) FROM threads")
    assert threads == there == 2  # nothing copied twice


async def test_a_home_being_served_is_not_copied(home: Home, pg_cluster: postgres.Cluster) -> None:
    await fill(home)
    url = pg_cluster.empty_database()
    with serving(home), pytest.raises(HomeInUse, match="stop it first"):  # as `serve` holds it
        await asyncio.to_thread(run, home.root, "migrate-store", url)
    async with Store(url=url) as target:
        assert await target.fetchall("SELECT id FROM threads") == []


def test_only_a_postgresql_url_is_taken(home: Home) -> None:
    with pytest.raises(TransferError, match="not a PostgreSQL url"):
        run(home.root, "migrate-store", "sqlite:///tmp/x.db")
