"""Memory that works: notes reach a new thread's prompt, secrets are refused, notes are forgotten
and changed by the model and by `pizzamail memory`, and memory.md never loses a hand edit."""

from __future__ import annotations

import asyncio
import json
import stat
import sys
from pathlib import Path

import aiosqlite
import pytest
from click.testing import CliRunner, Result

from pizzamail.cli import cli
from pizzamail.store import Store, migrations
from pizzamail.store.memory import add_note, notes, relevant_notes
from pizzamail.store.migrations import MIGRATIONS
from pizzamail.store.sqlite import migrate
from pizzamail.tools.memory import write_memory_file
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import Harness
from tests.tools.conftest import with_tools


def memory_md(harness: Harness) -> Path:
    return harness.home.root / "memory.md"


async def keep(store: Store, *texts: str, thread_id: int = 1) -> None:
    async with store.write() as db:
        for n, note in enumerate(texts):
            await add_note(db, note, thread_id=thread_id, run_id=1, call_id=f"c{n}-{note[:20]}")


async def test_a_remembered_note_is_in_a_new_threads_system_prompt(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([tool_call("remember", {"text": "The user prefers metric units."}), text("Noted."),
                        text("200 g of flour.")])
    first = await harness.task("Remember: I like metric units", subject="Prefs")
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, first) == "done"
        second = await harness.task("How much flour for the pizza dough?", subject="Dough")
        assert await harness.finish(runner, second) == "done"
    assert "<memory>" not in fake_openai.requests[0].messages[0]["content"]  # nothing kept yet
    system = fake_openai.requests[2].messages[0]["content"]
    assert '<note id="1">The user prefers metric units.</note>' in system
    assert "`forget` deletes one by its id" in system


async def test_the_prompt_shows_the_latest_notes_and_older_ones_that_match_the_task(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    await keep(harness.store, "Invoices go to accounting@example.com, always as PDF.",
               *(f"Unrelated fact number {n}." for n in range(8)))
    fake_openai.script([text("Sent."), text("Hi.")])
    matching = await harness.task("Please forward this invoice", subject="Invoice March")
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, matching) == "done"
        other = await harness.task("Say hi", subject="Hi")
        assert await harness.finish(runner, other) == "done"
    with_invoice, without = (r.messages[0]["content"] for r in fake_openai.requests)
    assert "Invoices go to accounting@example.com" in with_invoice
    assert "Unrelated fact number 7." in with_invoice and "Unrelated fact number 2." not in with_invoice
    assert "Invoices go to" not in without and "Unrelated fact number 3." in without


async def test_the_notes_in_a_prompt_are_bounded_in_number_and_size(harness: Harness) -> None:
    await keep(harness.store, *(f"Pizza note {n}: " + "x" * 480 for n in range(20)))
    shown = await relevant_notes(harness.store, "pizza", recent=5, matching=5, max_chars=2000)
    assert len(shown) == 4 and sum(len(n.text) for n in shown) <= 2000
    many = await relevant_notes(harness.store, "pizza", recent=5, matching=5, max_chars=100_000)
    assert len(many) == 10


async def test_notes_that_look_like_secrets_are_refused_with_a_reason(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    fake_openai.script([
        tool_call("remember", {"text": f"The user's GitHub token is {token}"}),
        tool_call("remember", {"text": "Pay with card 4111 1111 1111 1111, exp 12/29"}, call_id="call_2"),
        tool_call("remember", {"text": "Order number 4111 1111 1111 1112 is late"}, call_id="call_3"),
        text("I did not keep the secrets.")])
    run_id = await harness.task("Remember my token and card")
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    github, card, order = (fake_openai.requests[n].messages[-1]["content"] for n in (1, 2, 3))
    assert "not kept: the note looks like it holds a secret (GitHub Token)" in github
    assert "(Payment card number)" in card
    assert order == "noted"  # not a valid card number (Luhn): an ordinary note
    assert [n.text for n in await notes(harness.store)] == ["Order number 4111 1111 1111 1112 is late"]
    assert token not in memory_md(harness).read_text()


async def test_forget_deletes_a_note_by_its_id(harness: Harness, fake_openai: FakeOpenAI) -> None:
    await keep(harness.store, "The user's dog is called Rex.", "The user lives in Turin.")
    fake_openai.script([tool_call("forget", {"id": 1}), tool_call("forget", {"id": 1}, call_id="call_2"),
                        tool_call("recall", {}, call_id="call_3"), text("Forgotten.")])
    run_id = await harness.task("Forget my dog's name")
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    system = fake_openai.requests[0].messages[0]["content"]
    assert '<note id="1">The user\'s dog is called Rex.</note>' in system
    done, again, recalled = (fake_openai.requests[n].messages[-1]["content"] for n in (1, 2, 3))
    assert done == "note 1 forgotten"
    assert again.startswith("there is no note 1")
    assert recalled.startswith("- [2] ") and recalled.endswith(": The user lives in Turin.")
    assert "Rex" not in memory_md(harness).read_text()


async def test_memory_md_is_read_only_and_a_hand_edit_is_kept_aside(harness: Harness) -> None:
    path = memory_md(harness)
    await keep(harness.store, "The user likes anchovies.")
    assert await write_memory_file(harness.store, path) is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert "pizzamail memory edit ID" in path.read_text() and "- [1] " in path.read_text()
    assert await write_memory_file(harness.store, path) is None  # unchanged: nothing set aside
    path.chmod(0o644)
    edited = path.read_text().replace("anchovies", "olives")
    path.write_text(edited)
    aside = await write_memory_file(harness.store, path)
    assert aside is not None and aside.read_text() == edited
    assert "anchovies" in path.read_text()
    path.unlink()
    path.write_text("# My own notes\n")  # no stamp at all: written by hand
    aside = await write_memory_file(harness.store, path)
    assert aside is not None and aside.read_text() == "# My own notes\n"
    assert len(list(path.parent.glob("memory.md.edited-*"))) == 2  # the first copy is still there


def pizzamail(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), "memory", *args], catch_exceptions=False)


def test_cli_lists_edits_and_removes_notes(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert CliRunner().invoke(cli, ["--home", str(home), "init"]).exit_code == 0
    assert pizzamail(home).output.startswith("no notes")

    async def seed() -> None:
        async with Store(path=home / "state.db") as store:
            await keep(store, "The user prefers tea.", "The user's office is in Milan.")
    asyncio.run(seed())

    listed = pizzamail(home, "list").output.splitlines()
    assert listed[0].startswith("[1] ") and listed[0].endswith("(thread 1): The user prefers tea.")
    assert pizzamail(home, "edit", "1", "The user prefers  coffee.").output == "note 1 changed\n"
    assert pizzamail(home, "rm", "2").output == "note 2 deleted\n"
    assert [n["text"] for n in json.loads(pizzamail(home, "list", "--json").output)] == [
        "The user prefers coffee."]
    missing = pizzamail(home, "rm", "2")
    assert missing.exit_code == 1 and "there is no note 2" in missing.output
    memory = (home / "memory.md").read_text()
    assert "The user prefers coffee." in memory and "Milan" not in memory


def test_cli_edit_without_text_opens_the_editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "h"
    assert CliRunner().invoke(cli, ["--home", str(home), "init"]).exit_code == 0

    async def seed() -> None:
        async with Store(path=home / "state.db") as store:
            await keep(store, "The user prefers tea.")
    asyncio.run(seed())
    editor = tmp_path / "editor.py"
    editor.write_text("import sys, pathlib\np = pathlib.Path(sys.argv[1])\n"
                      "p.write_text(p.read_text().replace('tea', 'green tea'))\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    assert pizzamail(home, "edit", "1").output == "note 1 changed\n"

    async def search() -> list[str]:  # the search index follows the edit
        async with Store(path=home / "state.db") as store:
            return [n.text for n in await relevant_notes(store, "green", recent=0)]
    assert asyncio.run(search()) == ["The user prefers green tea."]


async def test_the_search_migration_indexes_the_notes_kept_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [at] = [i for i, (name, _) in enumerate(MIGRATIONS) if name.endswith("_memory_search")]
    async with aiosqlite.connect(tmp_path / "old.db", isolation_level=None) as db:
        with monkeypatch.context() as older:
            older.setattr(migrations, "MIGRATIONS", MIGRATIONS[:at])
            await migrate(db)
        await db.execute("INSERT INTO memory(text, created_at) VALUES ('Invoices go to Ada.', 'x')")
        assert await migrate(db) == [name for name, _ in MIGRATIONS[at:]]  # it, then any later one
    async with Store(path=tmp_path / "old.db") as store:
        [found] = await relevant_notes(store, "an invoice", recent=0)
    assert found.text == "Invoices go to Ada."
