"""Triggers crashed at exact moments (:mod:`tests.e2e.crash`): a webhook delivery committed before
its answer went out, and a schedule firing. Every occurrence and every delivery makes one task."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import timedelta

import httpx
import pytest

from pizzamail.triggers.signatures import sign_standard
from pizzamail.when.cron import from_text, to_text
from tests.e2e.crash import CRASHED
from tests.e2e.harness import WHSEC, Served
from tests.e2e.test_triggers import _post_standard
from tests.fakes.openai_server import FakeOpenAI, text


def _standard(body: bytes, delivery: str, *, ago: int = 0) -> dict[str, str]:
    """One attempt at ``delivery`` signed ``ago`` seconds back: a retry has the same id, a new
    timestamp and a new signature (signed in the same second, it would be the same request again)."""
    stamp = str(int(time.time()) - ago)
    return {"Content-Type": "application/json", "webhook-id": delivery, "webhook-timestamp": stamp,
            "webhook-signature": sign_standard(WHSEC, delivery, stamp, body)}


def _tasks(served: Served) -> int:
    with sqlite3.connect(served.home / "state.db") as db:
        return int(db.execute("SELECT count(*) FROM messages WHERE kind = 'task'").fetchone()[0])


def test_a_delivery_retried_after_a_crash_before_its_answer_is_already_received(
    served_hook: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Invoice 7 is paid.")])
    served = served_hook.start(crash_after="pizzamail.web:Hooks._record")
    body = json.dumps({"type": "invoice.paid", "data": {"id": 7}}).encode()
    with pytest.raises(httpx.TransportError):  # committed, then the process died: no answer
        _post_standard(served, body, _standard(body, "msg_7", ago=1))
    assert served.stop(None) == CRASHED

    served.start()
    retried = _post_standard(served, body, _standard(body, "msg_7"))  # the sender's retry
    assert retried.status_code == 200, retried.text  # a 2xx: the sender stops retrying
    assert retried.json() == {"ok": True, "already_received": True, "run": 1, "thread": 1}
    served.wait_for("run 1 done")
    assert _tasks(served) == 1


def _due_yesterday(served: Served) -> None:
    """``pizzamail schedule add`` a daily schedule whose next occurrence is already a day late."""
    served.cli("schedule", "add", "news", "--when", "every day at 3am", "--tz", "UTC",
               "--prompt", "Summarise the news")
    with sqlite3.connect(served.home / "state.db") as db:
        [due] = db.execute("SELECT next_due FROM schedules").fetchone()
        db.execute("UPDATE schedules SET next_due = ?", (to_text(from_text(due) - timedelta(days=2)),))


def _fired(served: Served) -> list[tuple[str, int | None]]:
    with sqlite3.connect(served.home / "state.db") as db:
        return db.execute("SELECT status, run_id FROM occurrences").fetchall()


@pytest.mark.slow  # three starts of serve
@pytest.mark.parametrize("moment", [
    "pizzamail.triggers.schedules:post_task",  # the task is written, its transaction not committed
    "pizzamail.triggers.schedules:_fire",  # the occurrence and its task committed, nothing else done
])
def test_a_schedule_crashed_while_firing_fires_once_per_occurrence(
    served: Served, fake_openai: FakeOpenAI, moment: str
) -> None:
    fake_openai.script([text("The news, summarised.")])
    served.start()
    served.stop()
    _due_yesterday(served)
    assert served.crash(crash_after=moment) == CRASHED

    served.start()
    served.wait_for("run 1 done")
    assert _fired(served) == [("fired", 1)]
    assert _tasks(served) == 1
    served.stop()
    served.start()  # a later start fires nothing again
    served.stop()
    assert _fired(served) == [("fired", 1)] and _tasks(served) == 1
    assert len(fake_openai.requests) == 1
