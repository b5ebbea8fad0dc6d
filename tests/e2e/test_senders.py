"""``pizzamail serve`` with automation senders: SMTP lets them in, IMAP does not, and a sender
without a password is named once at start with the command that sets it."""

from __future__ import annotations

import imaplib
import json
import smtplib
import subprocess
from pathlib import Path

import pytest

from tests.e2e.harness import BOT, Served, task_mail
from tests.fakes.openai_server import FakeOpenAI, text
from tests.programs import missing, needs

CRON = "cron@localhost"


def test_serve_takes_a_senders_task_refuses_its_imap_login_and_warns_once(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    config = served.home / "config.toml"
    config.write_text(config.read_text() + f'[senders.cron]\naddress = "{CRON}"\n'
                                           '[senders.ci]\naddress = "ci@localhost"\n')
    password = served.cli("account", "password", "--sender", "cron").strip()
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
    threads = json.loads(served.cli("threads", "--json"))
    assert [t["subject"] for t in threads] == ["Nightly digest"]

    with imaplib.IMAP4("127.0.0.1", served.imap) as imap, pytest.raises(imaplib.IMAP4.error,
                                                                        match="AUTHENTICATIONFAILED"):
        imap.login("cron", password)


@needs(missing("curl", install="apt-get install curl"))
def test_a_program_submits_with_curl_as_the_readme_shows(served: Served, fake_openai: FakeOpenAI) -> None:
    config = served.home / "config.toml"
    config.write_text(config.read_text() + f'[senders.cron]\naddress = "{CRON}"\n')
    password = served.cli("account", "password", "--sender", "cron").strip()
    fake_openai.script([text("The disk is 93% full; the largest folder is /var/log.")])
    served.start()
    report = served.home / "report.eml"
    report.write_bytes(b"From: cron@localhost\r\nTo: bot@pizzamail.localhost\r\nSubject: disk report\r\n\r\n"
                       b"Disk usage: 93% full. What should I clean up?\r\n")
    sent = curl_submit(served, f"cron:{password}", report)
    assert sent.returncode == 0, sent.stderr
    served.wait_for("run 1 done")
    [thread] = json.loads(served.cli("threads", "--json"))
    assert (thread["subject"], thread["status"]) == ("disk report", "done")

    wrong = curl_submit(served, "cron:wrong", report)
    assert wrong.returncode == 67, wrong.stderr  # curl: "login denied"


@needs(missing("curl", install="apt-get install curl"))
def test_the_curl_recipe_sends_an_ordinary_lf_text_file(served: Served, fake_openai: FakeOpenAI) -> None:
    """A file written by a script on Linux ends its lines in LF, and curl sends it as it is: one
    run of bytes without CRLF, which SMTP's 1,000-byte line limit used to refuse."""
    config = served.home / "config.toml"
    config.write_text(config.read_text() + f'[senders.cron]\naddress = "{CRON}"\n')
    password = served.cli("account", "password", "--sender", "cron").strip()
    fake_openai.script([text("Nothing alarming in the log.")])
    served.start()
    report = served.home / "report.txt"
    lines = [f"step {n:02d}: backup finished, {n * 3} files copied, no errors" for n in range(40)]
    report.write_text("From: cron@localhost\nTo: bot@pizzamail.localhost\nSubject: nightly log\n\n"
                      + "\n".join(lines) + "\nAnything unusual?\n")
    assert report.stat().st_size > 2000 and b"\r" not in report.read_bytes()
    sent = curl_submit(served, f"cron:{password}", report)
    assert sent.returncode == 0, sent.stderr
    served.wait_for("run 1 done")
    [thread] = json.loads(served.cli("threads", "--json"))
    assert (thread["subject"], thread["status"]) == ("nightly log", "done")
    task = fake_openai.requests[0].messages[-1]["content"]
    assert "step 39: backup finished, 117 files copied" in task
    assert task.rstrip().endswith("Anything unusual?")


def curl_submit(served: Served, user: str, mail: Path) -> subprocess.CompletedProcess[str]:
    """The README's recipe: curl uploads ``mail`` as a sender program would."""
    return subprocess.run(
        ["curl", "-sS", f"smtp://127.0.0.1:{served.smtp}", "--user", user,
         "--mail-from", CRON, "--mail-rcpt", BOT, "-T", str(mail)],
        capture_output=True, text=True, timeout=30, check=False)
