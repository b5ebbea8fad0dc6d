"""``serve`` (its runner off) and ``pizzamail worker``s on one PostgreSQL store: tasks mailed to the
front are worked on by the workers, whose mail the front files. One of three workers is killed with
SIGKILL in the middle of its runs: the others take them over, every task gets exactly one reply, and
an action approved by reply runs exactly once. An approved call cut off with its worker is not made
again by the next one. A worker stopped with SIGTERM puts its run back."""

from __future__ import annotations

import signal
import smtplib
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest

from pizzamail.home import Home
from tests.e2e.conftest import LEDGER_SERVER
from tests.e2e.harness import Served, serve_env, task_mail, write_config
from tests.e2e.test_approvals import _lines, _reply
from tests.e2e.test_roundtrip import fetch_all
from tests.e2e.workers import FINISHED, STARTED, Working
from tests.fakes.openai_server import FakeOpenAI, Recorded, Scripted, gated, slow, text, tool_call
from tests.postgres import Cluster, point_home

#: a serve, three workers, 200 tasks and a lease to expire: about a minute on a loaded 2-core machine
pytestmark = pytest.mark.slow

TASKS = 200
WORKERS = 3
CONCURRENCY = 4
#: how long the fake model takes for each answer: long enough for a kill to land in a run
THINKING = 1.0
#: seconds until a dead worker's claim on a run lapses (the default, 30, would only make this slower)
LEASE = 3.0


def answer(request: Recorded) -> Scripted:
    """Each task is answered after a pause; "Pay Bob 5" first calls the ledger's ``pay``."""
    said = " ".join(str(m.get("content") or "") for m in request.messages)
    if "Pay Bob 5" not in said:
        return slow(text("Done."), THINKING)
    if request.messages[-1]["role"] == "tool":
        return text("Paid Bob 5.")
    return slow(tool_call("ledger__pay", {"payee": "bob", "amount": 5}), THINKING)


@dataclass(frozen=True, kw_only=True)
class Deployment:
    front: Served
    workers: list[Working]
    database: str
    """its url"""


@pytest.fixture
def workers() -> int:
    return WORKERS


@pytest.fixture
def deployment(tmp_path: Path, fake_openai: FakeOpenAI, pg_cluster: Cluster, ledger: Path, workers: int,
               ) -> Iterator[Deployment]:
    """A serve with no runner of its own, and ``workers`` workers, sharing one home and one database."""
    home = tmp_path / "home"
    write_config(home, base_url=fake_openai.base_url)
    with (home / "config.toml").open("a") as config:
        config.write(f'\n[runner]\nconcurrency = 0\n'
                     f'[mcp.servers.ledger]\nenabled = true\ncommand = "{sys.executable}"\n'
                     f'args = ["{LEDGER_SERVER}"]\nenv = {{ LEDGER_FILE = "{ledger}" }}\n')
    database = pg_cluster.database()
    point_home(Home(root=home), database)
    with (home / "config.toml").open("a") as config:
        config.write(f"lease_seconds = {LEASE}\n")  # in [store], the last section point_home wrote
    fake_openai.script([], then=answer)
    env = serve_env(home)
    working = [Working(home=home, env=env) for _ in range(workers)]
    front = Served(home=home, env=env)
    try:
        front.start()
        for worker in working:
            worker.launch("--concurrency", str(CONCURRENCY))
        yield Deployment(front=front, workers=[worker.ready() for worker in working], database=database)
    finally:
        running = [p for p in (*working, front) if p.proc is not None]
        for process in running:  # all told at once: they stop side by side
            assert process.proc is not None
            process.proc.terminate()
        for process in running:
            process.stop()


def test_workers_answer_every_task_once_and_take_over_a_killed_workers_runs(
    deployment: Deployment, ledger: Path
) -> None:
    front, workers = deployment.front, deployment.workers
    assert "Runs are left to `pizzamail worker`s" in "\n".join(front.output)
    tasks = [task_mail(f"task {n}", subject=f"Task {n}") for n in range(TASKS)]
    send_all(front, [task_mail("Pay Bob 5", subject="Pay Bob"), *tasks[:TASKS // 4]])

    victim = _until(lambda: [w for w in workers if w.runs(STARTED) - w.runs(FINISHED)])[0]
    assert victim.stop(signal.SIGKILL) == -signal.SIGKILL
    cut_off = victim.runs(STARTED) - victim.runs(FINISHED)
    assert cut_off, "the kill landed between runs, not in one"
    send_all(front, tasks[TASKS // 4:])

    request = _until(lambda: _approval_requests(front), timeout=120)[-1]
    front.send(_reply(request, "approve"))
    _until(lambda: _count(deployment.database, "runs WHERE status <> 'done'") == 0, timeout=300)
    # filed by the front as the workers' commits are announced to it
    _until(lambda: _count(deployment.database, "messages WHERE filed = 0") == 0, timeout=120)

    replies = _bot_mails(front, kind="reply")
    assert len(replies) == TASKS + 1
    per_thread = Counter(str(m["X-Pizzamail-Thread"]) for m in replies)
    assert set(per_thread.values()) == {1}, "a task answered twice"
    assert not _bot_mails(front, kind="error")
    assert _lines(ledger) == ["bob 5"]
    survivors = set().union(*(w.runs(FINISHED) for w in workers if w is not victim))
    assert cut_off <= survivors, "the killed worker's runs were not finished by the others"


@pytest.mark.parametrize("workers", [2])
def test_a_call_cut_off_with_its_worker_is_not_made_again_by_the_next(
    deployment: Deployment, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    """The approved ``pay`` hangs in the tool until its worker is killed: the worker that takes the
    run over cannot know whether it happened, so it asks instead of paying again."""
    fake_openai.script([tool_call("ledger__pay", {"payee": "block", "amount": 9}), text("Skipped it.")])
    front = deployment.front
    front.send(task_mail("Pay block 9"))
    front.send(_reply(_until(lambda: _approval_requests(front))[-1], "yes"))
    paying = _until(lambda: [w for w in deployment.workers if any("approved: running it" in line
                                                                  for line in w.drain())])[0]
    _until(lambda: _lines(ledger) == ["block 9"])  # the call reached the tool
    assert paying.stop(signal.SIGKILL) == -signal.SIGKILL

    asked = _until(lambda: [m for m in _approval_requests(front) if "whether it happened is unknown"
                            in str(m.get_body(("plain",)).get_content())])[-1]  # type: ignore[union-attr]
    front.send(_reply(asked, "skip"))
    _until(lambda: _count(deployment.database, "runs WHERE status = 'done'") == 1)
    assert _lines(ledger) == ["block 9"]
    assert "chose not to retry" in fake_openai.requests[-1].messages[-1]["content"]


@pytest.mark.parametrize("workers", [1])
def test_a_stopped_worker_puts_its_run_back_for_the_next_one(
    deployment: Deployment, fake_openai: FakeOpenAI
) -> None:
    hold = threading.Event()
    fake_openai.script([gated(text("An answer the stopped worker never reads."), hold)], then=answer)
    [worker] = deployment.workers
    database = deployment.database.rpartition("@")[2]
    assert f"pizzamail worker: store pm@{database}, {CONCURRENCY} run(s) at a time" in worker.output
    deployment.front.send(task_mail("task 1"))
    worker.wait_for("run 1 started")
    fake_openai.wait_requests(1)
    assert worker.stop(signal.SIGTERM) == 0
    assert "pizzamail worker stopped." in worker.output
    assert _count(deployment.database, "runs WHERE status = 'queued' AND lease_owner IS NULL") == 1
    log = (deployment.front.home / "logs" / "worker.log").read_text()
    assert '"message": "run 1 started' in log

    hold.set()
    worker.start("--concurrency", "1")
    worker.wait_for("run 1 done (reply mail)")
    _until(lambda: _count(deployment.database, "messages WHERE filed = 0") == 0)
    [reply] = _bot_mails(deployment.front, kind="reply")
    assert "Done." in str(reply.get_body(("plain",)).get_content())  # type: ignore[union-attr]
    assert len(fake_openai.requests) == 2  # asked again: the stopped worker never finished it


def send_all(front: Served, mails: list[EmailMessage]) -> None:
    """Every mail over one SMTP session (a login each would be most of the test's time)."""
    with smtplib.SMTP("127.0.0.1", front.smtp, timeout=30) as client:
        client.login("me", front.password)
        for mail in mails:
            client.send_message(mail)


def _count(database: str, rows: str) -> int:
    """``SELECT count(*) FROM rows`` (``TABLE WHERE …``) in the deployment's database."""
    with psycopg.connect(database) as conn:
        row = conn.execute(f"SELECT count(*) FROM {rows}").fetchone()
    assert row is not None
    return int(row[0])


def _bot_mails(front: Served, *, kind: str) -> list[EmailMessage]:
    return [m for _, m in fetch_all(front) if m["X-Pizzamail-Kind"] == kind]


def _approval_requests(front: Served) -> list[EmailMessage]:
    """The requests in INBOX, once the front filed one there and copied it into Action."""
    if not fetch_all(front, "Action"):
        return []
    return [m for _, m in fetch_all(front) if m["X-Pizzamail-Approval"]]


T = TypeVar("T")


def _until(look: Callable[[], T], *, timeout: float = 60) -> T:
    """What ``look`` finds once it finds something: another process's state announces nothing here."""
    deadline = time.monotonic() + timeout
    while not (found := look()):
        assert time.monotonic() < deadline, f"not found within {timeout} s"
        time.sleep(0.1)
    return found

