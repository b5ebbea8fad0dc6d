"""``pizzamail serve`` with automation senders: SMTP lets them in, IMAP does not, and a sender
without a password is named once at start with the command that sets it."""

from __future__ import annotations

import imaplib
import json
import smtplib

import pytest
from click.testing import CliRunner

from pizzamail.cli import cli
from tests.e2e.harness import BOT, Served, task_mail
from tests.fakes.openai_server import FakeOpenAI, text

CRON = "cron@localhost"


def pizzamail(served: Served, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--home", str(served.home), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_serve_takes_a_senders_task_refuses_its_imap_login_and_warns_once(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    config = served.home / "config.toml"
    config.write_text(config.read_text() + f'[senders.cron]\naddress = "{CRON}"\n'
                                           '[senders.ci]\naddress = "ci@localhost"\n')
    password = pizzamail(served, "account", "password", "--sender", "cron").strip()
    fake_openai.script([text("Digest written.")])
    served.start()
    warnings = [line for line in served.output if "has no password" in line]
    assert len(warnings) == 1 and "sender ci" in warnings[0]
    assert "run `pizzamail account password --sender ci`" in warnings[0]

    msg = task_mail("Write the nightly digest", subject="Nightly digest")
    msg.replace_header("From", CRON)
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=10) as client:
        client.login("cron", password)
        assert client.send_message(msg, to_addrs=[BOT]) == {}
    threads = json.loads(pizzamail(served, "threads", "--json"))
    assert [t["subject"] for t in threads] == ["Nightly digest"]

    with imaplib.IMAP4("127.0.0.1", served.imap) as imap, pytest.raises(imaplib.IMAP4.error,
                                                                        match="AUTHENTICATIONFAILED"):
        imap.login("cron", password)
