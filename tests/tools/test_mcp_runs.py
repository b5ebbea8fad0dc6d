"""Runs against real MCP servers (stdio and streamable HTTP) with the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

from pizzamail.config import McpServerSettings
from pizzamail.store.actions import arguments_hash, canonical_json, held_actions
from pizzamail.store.runs import steps_of
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import Harness, bot_mails, plain
from tests.tools.conftest import running_hub, stdio_server, with_tools


async def test_a_read_only_tool_over_stdio_runs_and_the_model_sees_its_result(
    harness: Harness, fake_openai: FakeOpenAI, notes_dir: Path, tmp_path: Path
) -> None:
    fake_openai.script([tool_call("notes__add", {"a": 2, "b": 3}), text("It is 5.")])
    run_id = await harness.task("2+3?")
    async with running_hub({"notes": stdio_server(notes_dir)}, log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert hub.connections["notes"].status == "ready"
        assert await harness.finish(runner, run_id) == "done"
    first, second = fake_openai.requests
    offered = {t["function"]["name"] for t in first.tools}
    assert {"notes__add", "notes__delete_note", "post_progress", "write_file"} <= offered
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "It is 5." in plain(mail)


async def test_a_destructive_tool_is_held_and_never_run(
    harness: Harness, fake_openai: FakeOpenAI, notes_dir: Path, tmp_path: Path
) -> None:
    fake_openai.script([tool_call("notes__delete_note", {"name": "groceries"},
                                  content="The list is outdated, so I will delete it.")])
    run_id = await harness.task("Delete my groceries note")
    async with running_hub({"notes": stdio_server(notes_dir)}, log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert await harness.finish(runner, run_id) == "waiting"
    assert not (notes_dir / "deleted-groceries").exists()  # the server never ran it
    assert len(fake_openai.requests) == 1  # the run stopped at the call
    [action] = await held_actions(harness.store, run_id=run_id)
    assert (action.tool, action.server, action.original, action.status) == (
        "notes__delete_note", "notes", "delete_note", "held")
    assert action.arguments == canonical_json({"name": "groceries"})
    assert action.arguments_sha256 == arguments_hash({"name": "groceries"})
    assert len(action.nonce) >= 20 and action.reason == "The list is outdated, so I will delete it."
    thread = await harness.store.fetchone(
        "SELECT t.status FROM threads t JOIN runs r ON r.thread_id = t.id WHERE r.id = ?", (run_id,))
    assert thread is not None and thread["status"] == "waiting"
    assert [s.kind for s in await steps_of(harness.store, run_id)] == ["model", "held"]
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert mail["X-Pizzamail-Kind"] == "waiting"
    body = plain(mail)
    assert "notes: delete_note" in body and "waiting for your approval" in body
    assert '"name": "groceries"' in body


async def test_a_resumed_run_stops_at_its_held_call_again_without_a_second_action(
    harness: Harness, fake_openai: FakeOpenAI, notes_dir: Path, tmp_path: Path
) -> None:
    fake_openai.script([tool_call("notes__delete_note", {"name": "a"})])
    run_id = await harness.task("Delete note a")
    async with running_hub({"notes": stdio_server(notes_dir)}, log_dir=tmp_path) as hub:
        options = with_tools(harness, hub=hub)
        async with harness.running(**options) as runner:
            assert await harness.finish(runner, run_id) == "waiting"
        # as after a crash between the held step and the run's end: the run is queued again
        async with harness.store.write() as db:
            await db.execute("UPDATE runs SET status = 'queued' WHERE id = ?", (run_id,))
        async with harness.running(**options) as runner:
            assert await harness.finish(runner, run_id) == "waiting"
    assert len(fake_openai.requests) == 1  # the replay did not ask the model again
    assert len(await held_actions(harness.store, run_id=run_id)) == 1
    assert not (notes_dir / "deleted-a").exists()


async def test_a_denied_tool_is_refused_with_a_message_the_model_reads(
    harness: Harness, fake_openai: FakeOpenAI, notes_dir: Path, tmp_path: Path
) -> None:
    server = stdio_server(notes_dir, policy={"delete_*": "deny"})
    fake_openai.script([tool_call("notes__delete_note", {"name": "x"}), text("I may not delete notes.")])
    run_id = await harness.task("Delete note x")
    async with running_hub({"notes": server}, log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert not (notes_dir / "deleted-x").exists()
    offered = {t["function"]["name"] for t in fake_openai.requests[0].tools}
    assert "notes__delete_note" not in offered and "notes__add" in offered
    result = fake_openai.requests[1].messages[-1]
    assert result["role"] == "tool" and "the user's policy does not allow" in result["content"]
    assert await held_actions(harness.store, run_id=run_id) == []


async def test_a_tool_that_reports_an_error_goes_back_to_the_model(
    harness: Harness, fake_openai: FakeOpenAI, notes_dir: Path, tmp_path: Path
) -> None:
    fake_openai.script([tool_call("notes__lookup", {"title": "Solaris"}), text("Not found.")])
    run_id = await harness.task("Find Solaris")
    async with running_hub({"notes": stdio_server(notes_dir)}, log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    result = fake_openai.requests[1].messages[-1]["content"]
    assert result.startswith("ERROR:") and "no note titled 'Solaris'" in result


async def test_a_call_that_takes_too_long_is_an_error_result(
    harness: Harness, fake_openai: FakeOpenAI, notes_dir: Path, tmp_path: Path
) -> None:
    # the limit also bounds starting the server and listing its tools: 0.5 s was too short for a
    # loaded 2-core machine
    server = stdio_server(notes_dir, timeout=3)
    fake_openai.script([tool_call("notes__slow", {"seconds": 30}), text("It was too slow.")])
    run_id = await harness.task("Be slow")
    async with running_hub({"notes": server}, log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert await harness.finish(runner, run_id) == "done"
        assert hub.connections["notes"].status == "ready"  # a timeout does not end the server
    result = fake_openai.requests[1].messages[-1]["content"]
    assert "did not answer within 3 s" in result


async def test_a_server_that_dies_mid_call_gives_an_error_and_the_run_goes_on(
    harness: Harness, fake_openai: FakeOpenAI, notes_dir: Path, tmp_path: Path
) -> None:
    fake_openai.script([tool_call("notes__crash", {}), text("The notes server crashed.")])
    run_id = await harness.task("Crash it")
    async with running_hub({"notes": stdio_server(notes_dir)}, log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert await harness.finish(runner, run_id) == "done"
        connection = hub.connections["notes"]
        assert connection.status == "failed"
        assert "stopped during a call to 'crash'" in (connection.error or "")
    result = fake_openai.requests[1].messages[-1]["content"]
    assert "stopped while running 'crash'" in result and "unknown" in result
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "The notes server crashed." in plain(mail)


async def test_a_read_only_tool_over_streamable_http(
    harness: Harness, fake_openai: FakeOpenAI, http_notes: str, tmp_path: Path
) -> None:
    fake_openai.script([tool_call("web__add", {"a": 20, "b": 22}), text("42")])
    run_id = await harness.task("20+22?")
    server = McpServerSettings(enabled=True, url=http_notes, headers={"X-Test": "1"}, timeout=10.0)
    async with running_hub({"web": server}, log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert hub.connections["web"].status == "ready", hub.connections["web"].error
        assert await harness.finish(runner, run_id) == "done"
    assert fake_openai.requests[1].messages[-1]["content"] == "42"


async def test_a_server_that_fails_to_start_is_reported_in_the_thread(
    harness: Harness, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    broken = McpServerSettings(enabled=True, command=str(tmp_path / "no-such-program"))
    fake_openai.script([tool_call("broken__anything", {}), text("Done without it.")])
    run_id = await harness.task("Use the broken server")
    async with running_hub({"broken": broken}, log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        connection = hub.connections["broken"]
        assert connection.status == "failed" and "failed to start" in (connection.error or "")
        assert await harness.finish(runner, run_id) == "done"
    system = fake_openai.requests[0].messages[0]["content"]
    assert "not available right now" in system and "broken" in system
    result = fake_openai.requests[1].messages[-1]["content"]
    assert "the MCP server 'broken' is not available" in result
    [(_, mail)] = await bot_mails(harness.mailbox)
    body = plain(mail)
    assert "Done without it." in body and "the MCP server 'broken' was not available" in body


async def test_an_mcp_tool_result_is_recorded_as_a_checkpoint(
    harness: Harness, fake_openai: FakeOpenAI, notes_dir: Path, tmp_path: Path
) -> None:
    fake_openai.script([tool_call("notes__add", {"a": 1, "b": 1}), text("2")])
    run_id = await harness.task("1+1")
    async with running_hub({"notes": stdio_server(notes_dir)}, log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    steps = await steps_of(harness.store, run_id)
    assert [s.kind for s in steps] == ["model", "tool", "model"]
    assert json.loads(json.dumps(steps[1].data))["text"] == "2"
