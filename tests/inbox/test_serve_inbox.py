"""``serve`` with ``[mailbox] mode = "imap"`` over Dovecot, end to end: the owner writes to
``me+bot@`` from a mail program (a copy in Sent, the mail delivered into INBOX) and the answer comes
back into the same INBOX, threaded; an approval found in Sent runs its action exactly once across a
kill -9 right after it was taken."""

from __future__ import annotations

import asyncio
import sqlite3
from email.message import EmailMessage
from pathlib import Path

import pytest

from pizzamail.config import load_config
from pizzamail.home import Home
from pizzamail.secrets import secret_store
from pizzamail.service import Service
from pizzamail.store import Store
from pizzamail.store.inbox import find_place
from tests.dovecot import PASSWORD, Dovecot, unavailable
from tests.e2e.crash import CRASHED
from tests.e2e.harness import Served, serve_env
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.inbox.owners import deliver, file_in_sent, owner_mail
from tests.programs import needs
from tests.remote.test_service_imap import headers_in, serving
from tests.triggers.watchtools import eventually

pytestmark = needs(unavailable())


def imap_home(tmp_path: Path, dovecot: Dovecot, fake_openai: FakeOpenAI) -> Home:
    home = Home(root=tmp_path / "home")
    home.create_dirs()
    home.config.write_text(
        '[server]\nsmtp_port = 0\nimap_port = 0\nimaps_port = 0\nhttp_port = 0\n'
        f'[mailbox]\nmode = "imap"\n[mailbox.imap]\nhost = "127.0.0.1"\nport = {dovecot.port}\n'
        'security = "none"\nuser = "me@example.com"\n[agent]\nmodel = "openai:fake-model"\n'
        f'[providers.openai]\nbase_url = "{fake_openai.base_url}"\nmax_retries = 0\n')
    secret_store(home).set("mailbox", PASSWORD)
    return home


def service(home: Home) -> Service:
    return Service(home=home, config=load_config(home.config), secrets=secret_store(home))


async def reading(home: Home) -> None:
    """Until the reader has decided where it starts in INBOX (mail from then on is taken)."""
    async with Store(path=home.database) as store:
        await eventually(lambda: find_place(store, "INBOX"))


def sent_and_delivered(dovecot: Dovecot, msg: EmailMessage) -> None:
    file_in_sent(dovecot, msg)
    deliver(dovecot, msg)


def rows(home: Home, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(home.database) as db:
        return db.execute(sql).fetchall()


async def test_a_mail_to_the_agent_is_answered_in_the_same_inbox(
    dovecot: Dovecot, fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    fake_openai.script([text("The offsite is on the 14th.")])
    home = imap_home(tmp_path, dovecot, fake_openai)
    async with serving(service(home)):
        await reading(home)
        task = owner_mail("When is the offsite?")
        await asyncio.to_thread(sent_and_delivered, dovecot, task)

        async def answered() -> list[dict[str, str]] | None:
            inbox = await asyncio.to_thread(headers_in, dovecot, "INBOX")
            return inbox if len(inbox) > 1 else None

        inbox = await eventually(answered)
    assert [m["Message-ID"] for m in inbox][:1] == [task["Message-ID"]]
    assert inbox[1]["Subject"] == "Re: When is the offsite?"
    assert inbox[1]["In-Reply-To"] == task["Message-ID"]


async def test_an_approval_from_sent_runs_once_across_a_kill_after_it_was_taken(
    dovecot: Dovecot, fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    fake_openai.script([tool_call("schedule_task", {"name": "standup", "when": "every weekday at 9",
                                                    "prompt": "Summarise yesterday"}),
                        text("Scheduled.")])
    home = imap_home(tmp_path, dovecot, fake_openai)
    async with serving(service(home)):
        await reading(home)
        await asyncio.to_thread(sent_and_delivered, dovecot, owner_mail("Remind me daily"))
        [request] = await eventually(lambda: asyncio.to_thread(headers_in, dovecot, "pizzamail/Action"))

    [(nonce,)] = rows(home, "SELECT nonce FROM held_actions")
    approval = owner_mail("approve", to=f"me+bot+{nonce}@example.com")
    approval["In-Reply-To"] = request["Message-ID"]
    await asyncio.to_thread(sent_and_delivered, dovecot, approval)
    served = Served(home=home.root, env=serve_env(home.root))
    crashed = served.crash(crash_after="pizzamail.intake.inbox:InboxIntake.take", timeout=120)
    assert crashed == CRASHED, "\n".join(served.output)
    assert rows(home, "SELECT outcome FROM account_mail ORDER BY uid") == [("task",), ("decision",)]

    async with serving(service(home)):
        async def done() -> list[tuple[object, ...]] | None:
            return await asyncio.to_thread(rows, home, "SELECT 1 FROM held_actions WHERE status = 'done'")
        await eventually(done)
    assert rows(home, "SELECT name FROM schedules") == [("standup",)]
    assert rows(home, "SELECT outcome FROM account_mail ORDER BY uid") == [("task",), ("decision",)]
