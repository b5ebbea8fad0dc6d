"""The kill -9 loop: tasks keep arriving over SMTP while ``pizzamail serve`` is killed at random
moments, mid-submission, mid-model-call, mid-checkpoint, mid-filing, and started again each time.

Whatever the moments, every task the server acknowledged with a 250 ends with exactly one reply in
its thread (in the store, as one Maildir file, over IMAP), no run gives up, and a start after the
last clean stop finds nothing left to file. The moments come from a seed printed by the test; set
``PIZZAMAIL_KILL_SEED`` to replay one.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import smtplib
import sqlite3
import threading
import time
from collections import Counter
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from pathlib import Path

import pytest

from tests.e2e.harness import Served, task_mail
from tests.e2e.test_roundtrip import fetch_all
from tests.fakes.openai_server import FakeOpenAI, Recorded, Scripted, slow, text, tool_call

pytestmark = pytest.mark.slow

SEED_VARIABLE = "PIZZAMAIL_KILL_SEED"
TASKS = 50
KILLS = 10
#: seconds each model answer takes, so that kills land while runs are in flight
LATENCY = 0.15
#: tool calls in each run before its answer: every run is a few checkpoints long
LOOKUPS = 2
_MARKER = re.compile(r"task-\d{3}")


def answer(request: Recorded) -> Scripted:
    """The model's part in any run, whatever the order of requests: a few lookups (each one a
    checkpointed tool call), then the answer naming the run's task."""
    marker = _MARKER.search(json.dumps(request.messages))
    assert marker is not None, "a model request without its task"
    done = sum(m["role"] == "tool" for m in request.messages)
    if done >= LOOKUPS:
        return slow(text(f"Answer for {marker.group()}."), LATENCY)
    return slow(tool_call("recall", {"query": marker.group()}, call_id=f"call_{done}"), LATENCY)


class Client:
    """A mail client that submits tasks and remembers which ones the server acknowledged."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.password = served.password
        self.acked: set[str] = set()
        self._changed = threading.Condition()

    def submit(self, mails: list[EmailMessage]) -> None:
        """Send in order; stop at the first failure (the server was killed): those are sent again
        after the restart, with the same Message-ID."""
        for mail in mails:
            if not self._send(mail):
                return

    def _send(self, mail: EmailMessage) -> bool:
        try:
            smtp = smtplib.SMTP("127.0.0.1", self.served.smtp, timeout=10)
        except OSError:
            return False
        try:
            smtp.login("me", self.password)
            smtp.send_message(mail)
            with self._changed:  # the 250 came, whatever happens to the QUIT
                self.acked.add(str(mail["Message-ID"]))
                self._changed.notify_all()
            return True
        except (OSError, smtplib.SMTPException):
            return False
        finally:
            smtp.close()

    def wait_acked(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.acked) >= count, 60), "submissions stalled"


def test_tasks_survive_a_kill_loop_with_exactly_one_reply_each(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    seed = int(os.environ.get(SEED_VARIABLE) or random.SystemRandom().randrange(2**32))
    print(f"kill loop seed {seed} (replay: {SEED_VARIABLE}={seed})")
    rng = random.Random(seed)
    fake_openai.script([], then=answer)
    mails = [task_mail(f"Look up task-{n:03d}.", subject=f"task-{n:03d}") for n in range(TASKS)]
    served.start()
    client = Client(served)
    for kill in range(KILLS):
        sent = kill * (TASKS // KILLS)
        new = mails[sent:sent + TASKS // KILLS]
        retried = [m for m in mails[:sent] if str(m["Message-ID"]) not in client.acked]
        # The kill comes after a random number of submissions or model calls (the new tasks alone
        # make LOOKUPS + 1 each), then a pause of random length: the moment is the test's input,
        # not a synchronisation.
        acked, calls = len(client.acked), len(fake_openai.requests)
        submitting = threading.Thread(target=client.submit, args=(retried + new,))
        submitting.start()
        if rng.random() < 0.25:
            client.wait_acked(acked + rng.randrange(len(new)))
            time.sleep(rng.uniform(0, 0.02))
        else:
            fake_openai.wait_requests(calls + rng.randint(1, (LOOKUPS + 1) * len(new)), timeout=60)
            time.sleep(rng.uniform(0, 2 * LATENCY))
        assert served.stop(signal.SIGKILL) == -signal.SIGKILL
        submitting.join()
        print(f"--- kill {kill + 1}: {len(client.acked)} task(s) acknowledged so far")
        served.start()
        print(*[line for line in served.output if "resuming" in line or "left unfiled" in line], sep="\n")

    client.submit([m for m in mails if str(m["Message-ID"]) not in client.acked])
    assert client.acked == {str(m["Message-ID"]) for m in mails}
    with sqlite3.connect(served.home / "state.db") as db:
        unfinished = [r[0] for r in db.execute("SELECT id FROM runs WHERE status IN ('queued', 'running')")]
    for run_id in unfinished:
        line = served.wait_for(re.compile(rf"run {run_id} (done|failed|waiting) "), timeout=60)
        assert f"run {run_id} done" in line, line

    check_store(served.home / "state.db")
    check_maildir(served.home / "Maildir")
    check_imap(served, mails)
    served.stop()
    served.start()  # a quiet start: nothing left to file, nothing to resume
    served.stop()
    assert not [line for line in served.output if "left unfiled" in line or "resuming" in line]


def check_store(database: Path) -> None:
    with sqlite3.connect(database) as db:
        tasks = db.execute("SELECT count(*), count(DISTINCT thread_id) FROM messages WHERE kind = 'task'")
        runs = db.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
        out = db.execute("SELECT thread_id, kind FROM messages WHERE direction = 'out'").fetchall()
        unfiled = db.execute("SELECT count(*) FROM messages WHERE filed = 0").fetchone()
    assert tasks.fetchone() == (TASKS, TASKS)  # a retried submission never made a second task
    assert runs == [("done", TASKS)]  # none gave up
    assert Counter(thread for thread, _ in out) == Counter({t: 1 for t, _ in out}) and len(out) == TASKS
    assert {kind for _, kind in out} == {"reply"}
    assert unfiled == (0,)


def check_maildir(maildir: Path) -> None:
    files = [path for sub in ("new", "cur") for path in (maildir / sub).iterdir()]
    assert len(files) == 2 * TASKS  # each task and its reply, once
    replies = Counter(_reply_of(path.read_bytes()) for path in files)
    del replies[None]
    assert len(replies) == TASKS and set(replies.values()) == {1}


def check_imap(served: Served, mails: list[EmailMessage]) -> None:
    seen = fetch_all(served)
    assert len(seen) == 2 * TASKS
    answered = Counter(str(m["In-Reply-To"]) for _, m in seen if m["X-Pizzamail-Run"])
    assert answered == Counter({str(m["Message-ID"]): 1 for m in mails})
    for _, reply in seen:
        if reply["X-Pizzamail-Run"]:
            body = reply.get_body(("plain",))
            assert body is not None and f"Answer for {reply['Subject'][4:]}." in body.get_content()


def _reply_of(data: bytes) -> str | None:
    msg = message_from_bytes(data, policy=default)
    return str(msg["Message-ID"]) if msg["X-Pizzamail-Run"] else None
