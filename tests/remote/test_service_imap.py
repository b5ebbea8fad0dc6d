"""``serve`` with ``[mailbox] mode = "imap"``: the user's own account (Dovecot) is the mailbox; no
SMTP or IMAP port of pizzamail's is open, and the agent's answer appears in that account's INBOX,
threaded, for every client of it. The task enters the store the way the account's reader hands it
over (intake's ``store_task``), its mail already in INBOX as the provider delivered it."""

from __future__ import annotations

import asyncio
import contextlib
import imaplib
import re
import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from pizzamail.config import Config, parse_config
from pizzamail.home import Home
from pizzamail.intake.tasks import store_task
from pizzamail.mail.build import build_mail
from pizzamail.mail.parse import parse_mail
from pizzamail.secrets import secret_store
from pizzamail.service import Listening, Service
from pizzamail.store import Store
from pizzamail.store.blobs import FileBlobs
from tests.dovecot import PASSWORD, Dovecot, free_port, running, unavailable
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.programs import needs
from tests.triggers.watchtools import eventually

pytestmark = needs(unavailable())

OWNER, BOT = "me@example.com", "me+bot@example.com"


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with running(special_use=True, drafts="Brouillons") as server:
        yield server


def imap_config(dovecot: Dovecot, fake_openai: FakeOpenAI, ports: dict[str, int]) -> Config:
    return parse_config({
        "server": {**ports, "http_port": 0},
        "mailbox": {"mode": "imap", "imap": {"host": "127.0.0.1", "port": dovecot.port, "security": "none",
                                             "user": OWNER}},
        "agent": {"model": "openai:fake-model"},
        "tools": {"policy": {"draft_email": "ask"}},
        "providers": {"openai": {"base_url": fake_openai.base_url, "max_retries": 0}},
    })


@contextlib.asynccontextmanager
async def serving(service: Service) -> AsyncIterator[Listening]:
    stop, started = asyncio.Event(), asyncio.get_running_loop().create_future()
    task = asyncio.create_task(service.run(stop, started.set_result))
    try:
        done, _ = await asyncio.wait([task, started], return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()  # the start failed: its error
        yield started.result()
    finally:
        stop.set()
        await task


def headers_in(server: Dovecot, folder: str) -> list[dict[str, str]]:
    """Subject, Message-ID and In-Reply-To of each mail in ``folder``, as another client sees them."""
    with imaplib.IMAP4("127.0.0.1", server.port, timeout=10) as imap:
        imap.login(OWNER, PASSWORD)
        imap.select(f'"{folder}"', readonly=True)
        _, found = imap.uid("FETCH", "1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT MESSAGE-ID IN-REPLY-TO)])")
        return [dict(re.findall(r"^([\w-]+): (.*?)\r?$", bytes(part[1]).decode(), re.MULTILINE))
                for part in found if isinstance(part, tuple)]


def listening_on(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def task_in_inbox(dovecot: Dovecot, home: Home, text: str) -> None:
    """The owner's task mail, delivered by the provider; the account's reader hands it over."""
    task = build_mail(sender=OWNER, to=BOT, subject="Plan the offsite", text=text,
                      message_id="<task.1@example.com>").as_bytes()
    dovecot.deliver(task, "1.task")
    async with Store(path=home.database) as store:
        await store_task(store, FileBlobs(root=home.blobs), task, parse_mail(task), agent=BOT,
                         domain="example.com")


def imap_service(dovecot: Dovecot, fake_openai: FakeOpenAI, home: Home, ports: dict[str, int]) -> Service:
    secrets = secret_store(home)
    secrets.set("mailbox", PASSWORD)
    return Service(home=home, config=imap_config(dovecot, fake_openai, ports), secrets=secrets)


async def test_a_task_is_answered_in_the_accounts_inbox_with_no_local_mail_port(
    dovecot: Dovecot, fake_openai: FakeOpenAI, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    fake_openai.script([text("The offsite is on the 14th.")])
    ports = {"smtp_port": free_port(), "imap_port": free_port(), "imaps_port": free_port()}
    await task_in_inbox(dovecot, home, "When is the offsite?")
    service = imap_service(dovecot, fake_openai, home, ports)
    async with serving(service) as listening:
        assert (listening.smtp, listening.imap, listening.imaps) == (0, 0, 0)
        assert not any(listening_on(port) for port in ports.values())

        async def answered() -> list[dict[str, str]] | None:
            inbox = await asyncio.to_thread(headers_in, dovecot, "INBOX")
            return inbox if len(inbox) > 1 else None

        async def board_done() -> list[dict[str, str]] | None:
            # the board delivers a run's new status mail, then expunges the old one: wait for the end
            shown = await asyncio.to_thread(headers_in, dovecot, "pizzamail/Activity")
            return shown if shown and all(m["Subject"].startswith("[done]") for m in shown) else None

        inbox = await eventually(answered)
        activity = await eventually(board_done)
    assert inbox[0]["Message-ID"] == "<task.1@example.com>"  # filed, not APPENDed again
    assert len(inbox) == 2 and inbox[1]["In-Reply-To"] == "<task.1@example.com>"
    assert inbox[1]["Subject"] == "Re: Plan the offsite"
    assert len(activity) == 1


async def test_a_held_draft_is_in_the_accounts_drafts_and_its_request_in_action(
    dovecot: Dovecot, fake_openai: FakeOpenAI, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    fake_openai.script([tool_call("draft_email", {"to": "alice@example.org", "subject": "Lunch",
                                                  "body": "Shall we meet at noon?"})])
    await task_in_inbox(dovecot, home, "Ask Alice about lunch")
    async with serving(imap_service(dovecot, fake_openai, home, {"smtp_port": 0, "imap_port": 0})):
        action = await eventually(lambda: asyncio.to_thread(headers_in, dovecot, "pizzamail/Action"))
        drafts = await eventually(lambda: asyncio.to_thread(headers_in, dovecot, "Brouillons"))
        inbox = await asyncio.to_thread(headers_in, dovecot, "INBOX")
    request = [m for m in inbox if m["Message-ID"] == action[0]["Message-ID"]]
    assert len(action) == 1 and len(request) == 1  # the request in INBOX, threaded, its copy in Action
    assert request[0]["In-Reply-To"] == "<task.1@example.com>"
    assert [d["Subject"] for d in drafts] == ["Lunch"]
