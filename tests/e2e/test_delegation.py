"""Delegation against the served process: kill -9 while the delegating run waits (nothing lost,
nothing repeated), a delegate's held call (request in its thread and in Action, a line in the
parent's thread), and ``stop`` by reply cascading to the delegate."""

from __future__ import annotations

import signal
import sqlite3
import threading
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest

from tests.e2e.crash import CRASHED
from tests.e2e.harness import Served, task_mail
from tests.e2e.test_approvals import _lines, _reply
from tests.e2e.test_roundtrip import fetch_all
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.scripted import Recorded, Scripted

#: restarts of serve: 10-20 s a test
pytestmark = pytest.mark.slow

TEAM = """
[agents.research]
name = "Research"
description = "Looks things up and pays bills"
instructions = "You are Research."
tools = ["ledger__*"]
"""


@pytest.fixture
def team(served_ledger: Served) -> Served:
    with (served_ledger.home / "config.toml").open("a") as config:
        config.write(TEAM)
    return served_ledger


def _folder(served: Served, name: str) -> list[EmailMessage]:
    return [msg for _, msg in fetch_all(served, name)]


def _plain(msg: EmailMessage) -> str:
    body = msg.get_body(("plain",))
    assert body is not None
    return str(body.get_content())


def _tool_texts(request: Recorded) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "tool"]


def _research(request: Recorded) -> bool:
    return "You are Research." in str(request.messages[0]["content"])


def _runs(served: Served) -> list[tuple[int, int | None, str]]:
    with sqlite3.connect(served.home / "state.db") as db:
        return [(int(r[0]), r[1], str(r[2])) for r in
                db.execute("SELECT id, parent_run, status FROM runs ORDER BY id")]


def test_kill_9_while_the_parent_waits_for_a_delegate_loses_nothing_and_repeats_nothing(
    team: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    def answer(request: Recorded) -> Scripted:
        if _research(request):
            if _tool_texts(request):
                return text("Paid Bob 5.")
            return tool_call("ledger__pay", {"payee": "bob", "amount": 5})
        if _tool_texts(request):
            return text("All done. " + _tool_texts(request)[0])
        return tool_call("delegate", {"agent": "research", "task": "Pay Bob 5", "subject": "Pay Bob"})

    fake_openai.script([], then=answer)
    # dies the moment the parent has committed that it waits for its delegate
    served = team.start(crash_after="pizzamail.runner.delegation:Delegation.wait")
    served.send(task_mail("Have research pay Bob 5", subject="Bob"))
    assert served.stop(None) == CRASHED
    parent, child = _runs(served)
    assert parent == (1, None, "delegating") and child[:2] == (2, 1)  # the child queued or working

    served.start()
    served.wait_for("run 2 waiting")
    [request] = _folder(served, "Action")
    note = [m for m in _folder(served, "INBOX") if m["X-Pizzamail-Kind"] == "progress"]
    assert len(note) == 1 and "waits for your approval of `ledger: pay`" in _plain(note[0])
    activity = _folder(served, "Activity")
    [delegation] = [m for m in activity if m["X-Pizzamail-Delegated-By"]]
    assert (str(delegation["To"]), str(delegation["Subject"])) == (
        "Research <research@pizzamail.localhost>", "Pay Bob")
    assert _plain(delegation).strip() == "Pay Bob 5"
    threaded = [m for m in activity if m["X-Pizzamail-Approval"]]
    assert len(threaded) == 1  # the request is in the delegate's own thread, in Activity
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL  # both wait: the parent and its delegate

    served.start()
    served.send(_reply(request, "approve"))
    served.wait_for("run 1 done")
    assert _lines(ledger) == ["bob 5"]
    assert _runs(served) == [(1, None, "done"), (2, 1, "done")]
    replies = [m for m in _folder(served, "INBOX") if m["X-Pizzamail-Kind"] == "reply"]
    assert len(replies) == 1
    assert "All done. Research (research) answered:" in _plain(replies[0])
    assert "Paid Bob 5." in _plain(replies[0])
    research_calls = [r for r in fake_openai.requests if _research(r)]
    assert [len(_tool_texts(r)) for r in research_calls] == [0, 1]  # asked once, resumed once


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    held = threading.Event()
    yield held
    held.set()


def test_stop_by_reply_ends_the_delegating_run_and_its_delegate(
    team: Served, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    def answer(request: Recorded) -> Scripted:
        if _research(request):  # a delegate that would work until the test ends
            return Scripted(payload=text("Too late.").payload, gate=gate)
        return tool_call("delegate", {"agent": "research", "task": "Look into it for a long time"})

    fake_openai.script([], then=answer)
    served = team.start()
    task = task_mail("Have research look into it", subject="Long")
    served.send(task)
    served.wait_for("run 1 waits for its delegates")
    fake_openai.wait_requests(2)  # the delegate is waiting on the model
    served.send(_reply(task, "stop"))
    served.wait_for("run 2 stopped")
    served.wait_for("run 1 stopped")
    kinds = [str(m["X-Pizzamail-Kind"]) for m in _folder(served, "INBOX") if m["X-Pizzamail-Kind"]]
    assert kinds == ["stopped"]
    assert any(m["X-Pizzamail-Kind"] == "stopped" for m in _folder(served, "Activity"))
    assert all("stop" not in str(m.get("content")) for r in fake_openai.requests for m in r.messages
               if m["role"] == "user" and not _research(r))
