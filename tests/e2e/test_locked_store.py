"""The database held by another process for longer than the store waits (``busy_timeout``, 10 s):
every protocol says "try again later" (SMTP 451, IMAP NO [UNAVAILABLE], HTTP 503 with Retry-After),
never a permanent refusal or internal text, and the same request succeeds once the lock is gone."""

from __future__ import annotations

import imaplib
import json
import smtplib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from pizzamail.triggers.signatures import sign
from tests.e2e.harness import SECRET, Served, task_mail
from tests.e2e.test_roundtrip import fetch_all
from tests.e2e.test_startup import failure, serve
from tests.fakes.openai_server import FakeOpenAI, text

#: each test waits out the store's 10 s busy timeout once
pytestmark = pytest.mark.slow

_HOLD = ("import sqlite3, sys\n"
         "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "db.execute('BEGIN EXCLUSIVE')\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n"
         "db.execute('ROLLBACK')\n")


@contextmanager
def held(database: Path) -> Iterator[None]:
    """``database`` locked by another process (BEGIN EXCLUSIVE) until the block ends."""
    with subprocess.Popen([sys.executable, "-c", _HOLD, str(database)], text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        try:
            assert holder.stdout.readline() == "held\n"
            yield
        finally:
            holder.stdin.close()
            assert holder.wait(timeout=30) == 0


def _send(served: Served, msg: object) -> None:
    # longer than the store's 10 s wait for the lock: the answer, not the client, ends the wait
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=60) as client:
        client.login("me", served.password)
        client.send_message(msg)  # type: ignore[arg-type]


def _post(served: Served, body: bytes, delivery: str) -> httpx.Response:
    stamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "X-Pizzamail-Timestamp": stamp,
               "X-Pizzamail-Delivery": delivery, "X-Pizzamail-Signature": sign(SECRET, stamp, body)}
    return httpx.post(f"http://127.0.0.1:{served.http}/hooks/deploys", content=body, headers=headers,
                      timeout=60)


def test_smtp_says_try_again_later_and_takes_the_same_mail_after(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Planned.")])
    served.start()
    mail = task_mail("Plan it")
    with held(served.home / "state.db"), pytest.raises(smtplib.SMTPDataError) as refused:
        _send(served, mail)
    answer = refused.value.smtp_error.decode()
    assert refused.value.smtp_code == 451, answer
    assert "try again later" in answer and "locked" not in answer and "Error" not in answer
    _send(served, mail)
    served.wait_for("run 1 done")
    subjects = [m["Subject"] for _, m in fetch_all(served)]
    assert subjects == ["Plan the team offsite", "Re: Plan the team offsite"]


def test_imap_says_unavailable_and_stores_the_flag_after(served: Served, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([text("Planned.")])
    served.start()
    served.send(task_mail("Plan it"))
    served.wait_for("run 1 done")
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        imap.login("me", served.password)
        imap.select("INBOX")
        with held(served.home / "state.db"):
            status, data = imap.uid("STORE", "1", "+FLAGS", r"(\Flagged)")
        assert status == "NO"
        assert data[0] == b"[UNAVAILABLE] pizzamail cannot take this just now; try again later"
        status, data = imap.uid("STORE", "1", "+FLAGS", r"(\Flagged)")
        assert status == "OK" and b"\\Flagged" in data[0]


def test_a_webhook_gets_503_with_retry_after_and_the_retry_runs(
    served_hook: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Checked.")])
    served_hook.start()
    body, delivery = json.dumps({"version": "1.2"}).encode(), str(uuid.uuid4())
    with held(served_hook.home / "state.db"):
        busy = _post(served_hook, body, delivery)
    assert busy.status_code == 503 and busy.headers["Retry-After"].isdigit()
    assert busy.json() == {"ok": False, "error": "pizzamail cannot take this just now; try again later"}
    again = _post(served_hook, body, delivery)
    assert again.status_code == 202, again.text
    served_hook.wait_for("run 1 done")


def test_a_start_with_the_database_held_is_one_line(served: Served) -> None:
    served.start()
    served.stop()
    with held(served.home / "state.db"):
        code, lines = serve(served.env)
    assert code != 0
    assert failure(lines) == [f"error: {served.home / 'state.db'} is held by another program; stop it,"
                              " or try again in a moment"]
