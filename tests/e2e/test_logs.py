"""The log of a running ``serve`` as a person reads it: failed logins, once each, never the password."""

from __future__ import annotations

import imaplib
import json
import smtplib

import pytest

from tests.e2e.harness import Served

WRONG = "wrong-password-7c1d9e"


def entries(served: Served) -> list[dict[str, str]]:
    log = served.home / "logs" / "pizzamail.log"
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_each_failed_login_is_logged_once_with_user_and_peer_and_no_password(served: Served) -> None:
    served.start()
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=10) as smtp:
        smtp_peer = "127.0.0.1:%d" % smtp.sock.getsockname()[1]
        smtp.ehlo()
        smtp.user, smtp.password = "mallory", WRONG
        with pytest.raises(smtplib.SMTPAuthenticationError):  # one AUTH (login() tries each mechanism)
            smtp.auth("PLAIN", smtp.auth_plain)
    with imaplib.IMAP4("127.0.0.1", served.imap, timeout=10) as imap:
        imap_peer = "127.0.0.1:%d" % imap.sock.getsockname()[1]
        with pytest.raises(imaplib.IMAP4.error):
            imap.login("me", WRONG)
    failed = [e for e in entries(served) if "login failed" in e["message"]]
    assert [(e["level"], e["message"]) for e in failed] == [
        ("warning", f"SMTP login failed for user 'mallory' from {smtp_peer}"),
        ("warning", f"IMAP login failed for user 'me' from {imap_peer}"),
    ]
    assert WRONG not in (served.home / "logs" / "pizzamail.log").read_text()
    assert not any(WRONG in line for line in served.output)
