"""A held ``draft_email`` in the account's own Drafts, edited and sent from "another device" (any mail
program, through the user's own provider): pizzamail notices it in the account's Sent folder and
takes it as the user's approval with edits, exactly once, and sends nothing itself.

The other device is imaplib: the edited mail (still carrying the draft's X-Pizzamail-Approval) is
APPENDed into Sent, as a mail program files what it sent; in one variant a copy is also delivered
into INBOX (Fastmail does, Gmail does not). A relay is configured and records what it gets: pizzamail
must give it nothing.
"""

from __future__ import annotations

import asyncio
import imaplib
import sqlite3
import time
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import make_msgid
from pathlib import Path
from typing import Any

import pytest

from pizzamail import service as service_module
from pizzamail.config import Config, load_config
from pizzamail.home import Home
from pizzamail.intake.reader import InboxReader, inbox_reader
from pizzamail.secrets import secret_store
from pizzamail.service import Service
from pizzamail.store import Store
from pizzamail.store.inbox import find_place
from tests.approvals.test_drafts import Relay, relay  # noqa: F401
from tests.dovecot import PASSWORD, Dovecot, unavailable
from tests.e2e.crash import CRASHED
from tests.e2e.harness import Served, serve_env
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.inbox.owners import BOT, OWNER, deliver, file_in_sent, owner_mail
from tests.programs import needs
from tests.remote.test_service_imap import serving
from tests.triggers.watchtools import eventually

pytestmark = needs(unavailable())

ANSWER = "Alice has the invitation"
DRAFT = {"to": "alice@example.org", "subject": "Lunch", "body": "Shall we meet at noon?"}


def draft_home(tmp_path: Path, dovecot: Dovecot, fake_openai: FakeOpenAI, relay: Relay) -> Home:  # noqa: F811
    home = Home(root=tmp_path / "home")
    home.create_dirs()
    home.config.write_text(
        '[server]\nsmtp_port = 0\nimap_port = 0\nimaps_port = 0\nhttp_port = 0\n'
        f'[mailbox]\nmode = "imap"\n[mailbox.imap]\nhost = "127.0.0.1"\nport = {dovecot.port}\n'
        'security = "none"\nuser = "me@example.com"\n'
        f'[relay]\nhost = "127.0.0.1"\nport = {relay.port}\nsecurity = "none"\n'
        '[agent]\nmodel = "openai:fake-model"\n[tools.policy]\ndraft_email = "ask"\n'
        f'[providers.openai]\nbase_url = "{fake_openai.base_url}"\nmax_retries = 0\n')
    secret_store(home).set("mailbox", PASSWORD)
    return home


def quick_looks(config: Config, **parts: Any) -> InboxReader:
    """The service's reader, looking in Sent every second (not every half minute) when INBOX is quiet."""
    reader = inbox_reader(config, **parts)
    reader.sent_seconds = 1.0
    return reader


def mails_in(dovecot: Dovecot, folder: str) -> list[EmailMessage]:
    with imaplib.IMAP4("127.0.0.1", dovecot.port, timeout=10) as imap:
        imap.login(OWNER, PASSWORD)
        imap.select(f'"{folder}"', readonly=True)
        _, found = imap.uid("FETCH", "1:*", "(BODY.PEEK[])")
        return [message_from_bytes(bytes(part[1]), policy=SMTP_POLICY)
                for part in found if isinstance(part, tuple)]


def sent_elsewhere(draft: EmailMessage, *, cc: str = "carol@example.org") -> EmailMessage:
    """The draft as the user's mail program sends it: edited, one more recipient, a Message-ID of its
    own; the routing header kept (a mail program keeps the headers of a draft it sends)."""
    sent = EmailMessage(policy=SMTP_POLICY)
    for name in ("From", "To", "Subject", "X-Pizzamail-Approval"):
        sent[name] = str(draft[name])
    sent["Cc"] = cc
    sent["Message-ID"] = make_msgid(domain="phone.example")
    sent.set_content("Shall we meet at one instead?")
    return sent


def rows(home: Home, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(home.database) as db:
        return db.execute(sql).fetchall()


def answers(dovecot: Dovecot, words: str) -> int:
    return sum(words in str(m.get_body(("plain",)).get_content())  # type: ignore[union-attr]
               for m in mails_in(dovecot, "INBOX") if m.get_body(("plain",)) is not None)


def service(home: Home) -> Service:
    return Service(home=home, config=load_config(home.config), secrets=secret_store(home))


async def reading(home: Home) -> None:
    """Until the reader has decided where it starts in INBOX and in Sent."""
    async with Store(path=home.database) as store:
        await eventually(lambda: find_place(store, "INBOX"))
        await eventually(lambda: find_place(store, "Sent"))


async def held_draft(home: Home, dovecot: Dovecot) -> EmailMessage:
    """The owner's task, answered with a draft in the account's Drafts: that draft."""
    await reading(home)
    task = owner_mail("Ask Alice about lunch")
    await asyncio.to_thread(file_in_sent, dovecot, task)
    deliver(dovecot, task)
    [draft] = await eventually(lambda: asyncio.to_thread(mails_in, dovecot, "Drafts"))
    return draft


async def answered(dovecot: Dovecot) -> None:
    async def found() -> int | None:
        return await asyncio.to_thread(answers, dovecot, ANSWER) or None
    await eventually(found)


def taken_once(home: Home, dovecot: Dovecot, fake_openai: FakeOpenAI, relay: Relay) -> None:  # noqa: F811
    """The sent draft was the user's send, once; the run resumed once; pizzamail sent nothing."""
    [(status, result)] = rows(home, "SELECT status, result FROM held_actions")
    assert status == "done"
    assert "at one instead" in str(result) and "alice@example.org, carol@example.org" in str(result)
    assert rows(home, "SELECT kind, applied FROM decisions") == [("send", 1)]
    assert rows(home, "SELECT outcome FROM account_mail ORDER BY id") == [("task",), ("draft sent",)]
    assert "at one instead" in str(fake_openai.requests[-1].messages[-1]["content"])
    assert len(fake_openai.requests) == 2  # the run resumed once
    assert answers(dovecot, ANSWER) == 1
    assert relay.received == []  # the user's provider sent it; pizzamail sent nothing


@pytest.mark.parametrize(("copy_in_inbox", "cc"), [
    (False, "carol@example.org"), (True, "carol@example.org"),
    (True, f"carol@example.org, {BOT}"),  # the agent in Cc: the copy in INBOX reaches it
], ids=["sent-only", "copy-in-inbox", "copy-to-the-agent"])
async def test_a_draft_sent_from_another_device_is_the_users_send_once(
    dovecot: Dovecot, fake_openai: FakeOpenAI, relay: Relay, tmp_path: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch, copy_in_inbox: bool, cc: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    monkeypatch.setattr(service_module, "inbox_reader", quick_looks)
    fake_openai.script([tool_call("draft_email", DRAFT), text(f"Done: {ANSWER}.")])
    home = draft_home(tmp_path, dovecot, fake_openai, relay)
    async with serving(service(home)):
        sent = sent_elsewhere(await held_draft(home, dovecot), cc=cc)
        await asyncio.to_thread(file_in_sent, dovecot, sent)
        if copy_in_inbox:
            dovecot.deliver(sent.as_bytes(), f"{time.time_ns()}.copy")
        await answered(dovecot)
    await asyncio.to_thread(taken_once, home, dovecot, fake_openai, relay)

    # a restart that sees Sent again from its start (as if the look had not been written down)
    # takes nothing twice: no second decision, no resumed run, nothing relayed
    before = rows(home, "SELECT id, status, result FROM held_actions")
    with sqlite3.connect(home.database) as db:
        db.execute("UPDATE account_folders SET last_uid = 0 WHERE folder = 'Sent'")
    async with serving(service(home)):
        async def looked_again() -> bool:
            return bool(await asyncio.to_thread(
                rows, home, "SELECT 1 FROM account_folders WHERE folder = 'Sent' AND last_uid >= 2"))
        await eventually(looked_again)
    assert rows(home, "SELECT id, status, result FROM held_actions") == before
    await asyncio.to_thread(taken_once, home, dovecot, fake_openai, relay)


async def test_a_draft_sent_while_pizzamail_was_down_is_taken_once_across_a_kill(
    dovecot: Dovecot, fake_openai: FakeOpenAI, relay: Relay, tmp_path: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sent while nothing ran; the next start takes it and dies (kill -9) right after: the start
    after that neither takes it again nor loses it, and the run answers once."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    monkeypatch.setattr(service_module, "inbox_reader", quick_looks)
    fake_openai.script([tool_call("draft_email", DRAFT), text(f"Done: {ANSWER}.")])
    home = draft_home(tmp_path, dovecot, fake_openai, relay)
    async with serving(service(home)):
        draft = await held_draft(home, dovecot)
    await asyncio.to_thread(file_in_sent, dovecot, sent_elsewhere(draft))

    served = Served(home=home.root, env=serve_env(home.root))
    taking = "pizzamail.intake.inbox:InboxIntake.take_sent"
    crashed = await asyncio.to_thread(served.crash, crash_after=taking, timeout=120)
    assert crashed == CRASHED, "\n".join(served.output)
    assert rows(home, "SELECT status FROM held_actions") == [("done",)]  # taken before the kill

    async with serving(service(home)):
        await answered(dovecot)
    await asyncio.to_thread(taken_once, home, dovecot, fake_openai, relay)
