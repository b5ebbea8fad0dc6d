"""The log of a running ``serve`` as a person reads it: failed logins, once each, never the password."""

from __future__ import annotations

import imaplib
import json
import re
import smtplib

import pytest

from tests.e2e.harness import Served, task_mail
from tests.fakes.openai_server import FakeOpenAI, text

WRONG = "wrong-password-7c1d9e"


def entries(served: Served) -> list[dict[str, str]]:
    log = served.home / "logs" / "pizzamail.log"
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_each_failed_login_is_logged_once_with_user_and_peer_and_no_password(served: Served) -> None:
    served.start()
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=10) as smtp:
        smtp_peer = f"127.0.0.1:{smtp.sock.getsockname()[1]}"
        smtp.ehlo()
        smtp.user, smtp.password = "mallory", WRONG
        with pytest.raises(smtplib.SMTPAuthenticationError):  # one AUTH (login() tries each mechanism)
            smtp.auth("PLAIN", smtp.auth_plain)
    with imaplib.IMAP4("127.0.0.1", served.imap, timeout=10) as imap:
        imap_peer = f"127.0.0.1:{imap.sock.getsockname()[1]}"
        with pytest.raises(imaplib.IMAP4.error):
            imap.login("me", WRONG)
    failed = [e for e in entries(served) if "login failed" in e["message"]]
    assert [(e["level"], e["message"]) for e in failed] == [
        ("warning", f"SMTP login failed for user 'mallory' from {smtp_peer}"),
        ("warning", f"IMAP login failed for user 'me' from {imap_peer}"),
    ]
    assert WRONG not in (served.home / "logs" / "pizzamail.log").read_text()
    assert not any(WRONG in line for line in served.output)


def test_logs_run_shows_the_lines_of_one_run_marked_with_it(served: Served, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([text("Done: the list is sorted.")])
    served.start()
    served.send(task_mail("Sort my reading list."))
    served.wait_for(re.compile(r"run 1 \w+ \(reply mail\)"))
    shown = served.cli("logs", "--run", "1", "-n", "0").splitlines()
    started = "runner: run 1 started (thread 1, attempt 1)  [run 1, thread 1]"
    assert any(line.endswith(started) for line in shown), shown
    assert any("run 1 done (reply mail)  [run 1, thread 1]" in line for line in shown), shown
    assert not [line for line in shown if "[run 1, thread 1]" not in line and "run 1" not in line]
    assert served.cli("logs", "--run", "2").strip() == ""
