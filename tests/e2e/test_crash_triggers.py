"""Triggers crashed at exact moments (:mod:`tests.e2e.crash`): a webhook delivery committed before
its answer went out, and a schedule firing. Every occurrence and every delivery makes one task."""

from __future__ import annotations

import json
import sqlite3
import time

import httpx
import pytest

from pizzamail.triggers.signatures import sign_standard
from tests.e2e.crash import CRASHED
from tests.e2e.harness import WHSEC, Served
from tests.e2e.test_triggers import _post_standard
from tests.fakes.openai_server import FakeOpenAI, text


def _standard(body: bytes, delivery: str) -> dict[str, str]:
    """One attempt at ``delivery``: a retry has the same id, a new timestamp and a new signature."""
    stamp = str(int(time.time()))
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
        _post_standard(served, body, _standard(body, "msg_7"))
    assert served.stop(None) == CRASHED

    served.start()
    retried = _post_standard(served, body, _standard(body, "msg_7"))  # the sender's retry
    assert retried.status_code == 200, retried.text  # a 2xx: the sender stops retrying
    assert retried.json() == {"ok": True, "already_received": True, "run": 1, "thread": 1}
    served.wait_for("run 1 done")
    assert _tasks(served) == 1
