"""A task becomes exactly one threaded reply in INBOX; follow-ups carry the thread's history."""

from __future__ import annotations

from typing import TypeVar

import pytest

from pizzamail.approvals.service import Approvals
from pizzamail.store import Store, Work
from pizzamail.store.runs import steps_of
from pizzamail.store.threads import thread_messages
from tests.fakes.openai_server import FakeOpenAI, text
from tests.runner.conftest import Harness, bot_mails, html, plain

T = TypeVar("T")


async def test_a_run_files_exactly_one_threaded_reply(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([text("**Done.** Three new issues:\n\n- one\n- two\n- three")])
    run_id = await harness.task("Summarise new issues in repo X")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"

    [(flags, mail)] = await bot_mails(harness.mailbox)
    task = (await thread_messages(harness.store, 1))[0]
    assert "\\Seen" not in flags  # a new reply is unread
    assert mail["From"] == "Pizza Bot <bot@pizzamail.localhost>"
    assert mail["To"] == "me@pizzamail.localhost"
    assert mail["Subject"] == "Re: Summarise issues"
    assert mail["Message-ID"].endswith("@pizzamail.localhost>")
    assert mail["In-Reply-To"] == f"<{task.message_id}>"
    assert mail["References"] == f"<{task.message_id}>"
    assert mail["X-Pizzamail-Thread"] == "1"
    assert mail["X-Pizzamail-Run"] == str(run_id)
    assert mail["Date"]
    assert mail.get_content_type() == "multipart/alternative"
    assert "**Done.**" in plain(mail)
    assert f"pizzamail · thread 1 · run {run_id}" in plain(mail)
    assert "<strong>Done.</strong>" in html(mail) and "<li>two</li>" in html(mail)


async def test_the_reply_is_stored_with_the_run_finished(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([text("All good.")])
    run_id = await harness.task("Check things")
    async with harness.running() as runner:
        await harness.finish(runner, run_id)
    reply = (await thread_messages(harness.store, 1))[-1]
    assert (reply.direction, reply.kind, reply.run_id, reply.folder) == ("out", "reply", run_id, "INBOX")
    assert reply.body == "All good."
    run = await harness.store.fetchone("SELECT status, error FROM runs WHERE id = ?", (run_id,))
    thread = await harness.store.fetchone("SELECT status FROM threads WHERE id = 1")
    assert run is not None and thread is not None
    assert (run["status"], run["error"], thread["status"]) == ("done", None, "done")
    raw = await harness.blobs.load(reply.blob)
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")  # CRLF throughout


async def test_the_model_sees_the_task_and_a_system_prompt(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([text("ok")])
    run_id = await harness.task("What is 2+3?")
    async with harness.running() as runner:
        await harness.finish(runner, run_id)
    [request] = fake_openai.requests
    assert request.headers["authorization"] == "Bearer sk-test-123"
    assert request.body["model"] == "gpt-4.1-mini"
    assert "tools" not in request.body  # no tools registered: none offered
    system, user = request.messages
    assert system["role"] == "system"
    assert "Pizza Bot" in system["content"] and "Today is" in system["content"]
    assert "Summarise issues" in system["content"]
    assert user == {"role": "user", "content": "What is 2+3?"}


async def test_a_follow_up_sees_the_thread_history(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([text("First answer."), text("Second answer.")])
    first = await harness.task("First question")
    async with harness.running() as runner:
        await harness.finish(runner, first)
        task, reply = await thread_messages(harness.store, 1)
        second = await harness.task("And a follow-up?", subject="Re: Summarise issues",
                                    reply_to=reply.message_id, refs=[task.message_id])
        assert await harness.finish(runner, second) == "done"

    messages = fake_openai.requests[1].messages
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "First question"), ("assistant", "First answer."), ("user", "And a follow-up?"),
    ]
    mails = [m for _, m in await bot_mails(harness.mailbox)]
    assert [m["Subject"] for m in mails] == ["Re: Summarise issues", "Re: Summarise issues"]
    follow_up = (await thread_messages(harness.store, 1))[2]
    assert mails[1]["In-Reply-To"] == f"<{follow_up.message_id}>"
    assert mails[1]["References"].split() == [
        f"<{task.message_id}>", f"<{reply.message_id}>", f"<{follow_up.message_id}>"]


async def test_html_from_the_model_is_sanitised(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([text('Hi <script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=y>')])
    run_id = await harness.task("Say hi")
    async with harness.running() as runner:
        await harness.finish(runner, run_id)
    [(_, mail)] = await bot_mails(harness.mailbox)
    body = html(mail)
    assert "<script" not in body and 'href="javascript' not in body and "<img" not in body
    assert "&lt;script&gt;" in body  # shown as text, not run


async def test_the_reply_bytes_are_committed_with_its_row(harness: Harness, fake_openai: FakeOpenAI) -> None:
    """A SQLite home keeps a reply's bytes in the blobs table, in the transaction that finishes the
    run (no file of its own to fsync with its folder first); PostgreSQL's are in its table anyway."""
    fake_openai.script([text("All good.")])
    run_id = await harness.task("Check things")
    async with harness.running() as runner:
        await harness.finish(runner, run_id)
    reply = (await thread_messages(harness.store, 1))[-1]
    assert not [p for p in harness.home.blobs.rglob(reply.blob) if p.is_file()]
    row = await harness.store.fetchone("SELECT data FROM blobs WHERE digest = ?", (reply.blob,))
    assert row is not None and bytes(row[0]) == await harness.blobs.load(reply.blob)


async def test_a_reply_without_tool_calls_does_not_look_for_decisions(
    harness: Harness, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decisions are on a run's calls: a run whose model called none has none to put in its reply."""
    looked: list[int] = []

    async def decision_headers(_: Approvals, run_id: int) -> list[str]:
        looked.append(run_id)
        return []

    monkeypatch.setattr(Approvals, "decision_headers", decision_headers)
    fake_openai.script([text("All good.")])
    run_id = await harness.task("Check things")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert looked == []
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert mail["X-Pizzamail-Decision"] is None


async def test_a_run_s_end_is_committed_at_once_with_the_model_s_last_answer(
    harness: Harness, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply with the run's end and its log are statements only: one step of SQLite's writer
    thread (``write_at_once``), not a hop to it and back for each; the model's answer that ends the
    run is written in that same commit, not in one of its own before it."""
    at_once: list[str] = []
    real = Store.write_at_once

    async def recorded(store: Store, work: Work[T], **options: bool) -> T:
        at_once.append(work.__qualname__)
        return await real(store, work, **options)

    monkeypatch.setattr(Store, "write_at_once", recorded)
    fake_openai.script([text("All good.")])
    run_id = await harness.task("Check things")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert "conclude.<locals>.record" in at_once
    assert "Runner._checkpoint.<locals>.<lambda>" not in at_once
    assert [(step.kind, step.data["text"]) for step in await steps_of(harness.store, run_id)] == [
        ("model", "All good.")]
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "All good." in plain(mail)
