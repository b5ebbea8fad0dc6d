"""``[runner] separate``: runs work in a process of their own beside serve, on a SQLite home."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import LEDGER_SERVER
from tests.e2e.harness import Served, serve_env, task_mail, write_config
from tests.e2e.test_roundtrip import connect, fetch_all, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, gated, text, tool_call

STARTED = re.compile(r"runner process (\d+) started")


def apart_home(tmp_path: Path, fake_openai: FakeOpenAI, extra: str = "") -> Served:
    home = tmp_path / "home"
    write_config(home, base_url=fake_openai.base_url)
    with (home / "config.toml").open("a") as config:
        config.write(f"\n[runner]\nseparate = true\n{extra}")
    return Served(home=home, env=serve_env(home))


@pytest.fixture
def apart(tmp_path: Path, fake_openai: FakeOpenAI) -> Iterator[Served]:
    server = apart_home(tmp_path, fake_openai)
    yield server
    if server.proc is not None:
        server.stop()


@pytest.fixture
def apart_ledger(tmp_path: Path, fake_openai: FakeOpenAI, ledger: Path) -> Iterator[Served]:
    server = apart_home(tmp_path, fake_openai,
                        f'[mcp.servers.ledger]\nenabled = true\ncommand = "{sys.executable}"\n'
                        f'args = ["{LEDGER_SERVER}"]\nenv = {{ LEDGER_FILE = "{ledger}" }}\n')
    yield server
    if server.proc is not None:
        server.stop()


def runner_pid(served: Served, *, after: int = 0) -> int:
    """The pid of the first runner process serve started after its first ``after`` lines of output."""
    found = STARTED.search(served.wait_for(STARTED, timeout=60, after=after))
    assert found is not None
    return int(found[1])


def waiting_on_the_model(served: Served, fake_openai: FakeOpenAI, *, then: str) -> int:
    """serve started and a task sent, its run waiting on the model in the runner process (held for
    good; ``then`` answers the next request); returns that process's pid."""
    fake_openai.script([gated(text("lost answer"), threading.Event()), text(then)])
    served.start()
    pid = runner_pid(served)
    served.send(task_mail("Count the open issues."))
    fake_openai.wait_requests(1)
    return pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too: its parent (gone) has not reaped it yet
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"


def paid(ledger: Path) -> list[str]:
    """The payments the ledger MCP server made, one a line."""
    return ledger.read_text().splitlines()


def replies(served: Served) -> list[str]:
    found = []
    for _, message in fetch_all(served):
        if message["X-Pizzamail-Run"]:
            body = message.get_body(("plain",))
            assert body is not None
            found.append(body.get_content())
    return found


async def test_a_task_is_answered_by_the_runner_process_and_the_reply_is_pushed_to_idle(
    apart: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Answered next door.")])
    apart.start()
    pid = runner_pid(apart)
    assert apart.proc is not None and pid != apart.proc.pid
    client = await connect(apart)
    apart.send(task_mail("Count the open issues."))
    await idle_until_exists(client, 2)  # the task, then its reply, filed by serve from the relayed events
    await client.logout()
    assert [r for r in replies(apart) if "Answered next door." in r]
    assert "run 1 done" in (apart.home / "logs" / "worker.log").read_text()
    assert "run 1 done" not in (apart.home / "logs" / "pizzamail.log").read_text()
    assert apart.stop() == 0
    assert not alive(pid)  # stopped with serve


async def test_a_runner_process_killed_mid_run_is_started_again_and_replies_once(
    apart: Served, fake_openai: FakeOpenAI
) -> None:
    first = waiting_on_the_model(apart, fake_openai, then="The answer, after the kill.")
    mark = len(apart.output)
    os.kill(first, signal.SIGKILL)
    apart.wait_for("the runner process ended", after=mark)
    assert runner_pid(apart, after=mark) != first
    client = await connect(apart)
    await idle_until_exists(client, 2)  # the task and its one reply
    await client.logout()
    fake_openai.wait_requests(2)
    assert apart.proc is not None and apart.proc.poll() is None  # serve itself never stopped
    answers = replies(apart)
    assert len(answers) == 1 and "after the kill" in answers[0]
    with sqlite3.connect(apart.home / "state.db") as db:
        assert db.execute("SELECT status, attempts FROM runs").fetchall() == [("done", 1)]
        assert db.execute("SELECT count(*) FROM messages WHERE direction = 'out'").fetchone() == (1,)


async def test_serve_killed_takes_its_runner_process_with_it_and_the_next_start_replies_once(
    apart: Served, fake_openai: FakeOpenAI
) -> None:
    pid = waiting_on_the_model(apart, fake_openai, then="The answer, after the crash.")
    assert apart.stop(signal.SIGKILL) == -signal.SIGKILL  # returns once nobody holds serve's output
    assert not alive(pid)

    apart.start()
    client = await connect(apart)
    await idle_until_exists(client, 2)
    await client.logout()
    fake_openai.wait_requests(2)
    answers = replies(apart)
    assert len(answers) == 1 and "after the crash" in answers[0]


async def test_an_approval_by_mail_releases_the_held_call_once_in_the_runner_process(
    apart_ledger: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    fake_openai.script([tool_call("ledger__pay", {"payee": "bob", "amount": 5}), text("Paid Bob 5.")])
    served = apart_ledger.start()
    first = runner_pid(served)
    client = await connect(served)
    served.send(task_mail("Pay Bob 5"))
    await idle_until_exists(client, 2)  # the task, then the request serve filed from the relayed events
    [request] = [m for _, m in fetch_all(served) if m["X-Pizzamail-Approval"]]
    reply = task_mail("approve", subject="Re: " + str(request["Subject"]), reply_to=request)
    served.send(reply)
    await idle_until_exists(client, 4)  # the decision's answer and the run's reply
    await client.logout()
    assert paid(ledger) == ["bob 5"]
    # the runner process killed and started again, then another "approve": nothing runs twice
    mark = len(served.output)
    os.kill(first, signal.SIGKILL)
    runner_pid(served, after=mark)
    client = await connect(served)
    served.send(task_mail("approve", subject="Re: " + str(request["Subject"]), reply_to=request))
    await idle_until_exists(client, 5)  # the answer to a decision already taken
    await client.logout()
    assert paid(ledger) == ["bob 5"]
    with sqlite3.connect(served.home / "state.db") as db:
        assert db.execute("SELECT status FROM held_actions").fetchall() == [("done",)]
