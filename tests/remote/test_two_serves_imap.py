"""Two serves on one PostgreSQL store and one IMAP account (``[mailbox] mode = "imap"``): only the
leader reads the INBOX and writes to the account, so each task is answered once, with one reply and
one Activity mail; when the leader stops, the other takes over and answers the next task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from pizzamail.config import parse_config
from pizzamail.home import Home
from pizzamail.secrets import secret_store
from pizzamail.service import Service
from pizzamail.store import Store
from pizzamail.store.inbox import find_place
from tests import postgres
from tests.dovecot import PASSWORD, Dovecot, free_port, running, unavailable
from tests.fakes.openai_server import FakeOpenAI, text
from tests.inbox.owners import OWNER, owner_mail
from tests.inbox.test_serve_inbox import sent_and_delivered
from tests.programs import needs
from tests.remote.test_service_imap import headers_in, serving
from tests.triggers.watchtools import eventually

pytestmark = needs(unavailable())


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with running(special_use=True) as server:
        yield server


@pytest.fixture
def homes(tmp_path: Path) -> list[Home]:
    """Two homes whose blobs are on one filesystem (the mail rows they share name them)."""
    shared = tmp_path / "blobs"
    shared.mkdir(mode=0o700)
    found = []
    for name in ("a", "b"):
        home = Home(root=tmp_path / name)
        home.root.mkdir(mode=0o700)
        home.blobs.symlink_to(shared)
        home.create_dirs()
        secret_store(home).set("mailbox", PASSWORD)
        found.append(home)
    return found


def _service(home: Home, dovecot: Dovecot, fake_openai: FakeOpenAI, url: str) -> Service:
    config = parse_config({
        "server": {"smtp_port": free_port(), "imap_port": free_port(), "imaps_port": free_port(),
                   "http_port": 0},
        "mailbox": {"mode": "imap", "imap": {"host": "127.0.0.1", "port": dovecot.port, "security": "none",
                                             "user": OWNER}},
        "agent": {"model": "openai:fake-model"},
        "providers": {"openai": {"base_url": fake_openai.base_url, "max_retries": 0}},
        "store": {"url": url},
    })
    return Service(home=home, config=config, secrets=secret_store(home))


def _task(dovecot: Dovecot, number: int) -> str:
    """The owner's task, sent from their mail program (so in Sent too); its Message-ID."""
    msg = owner_mail(f"Task {number}: plan it.")
    sent_and_delivered(dovecot, msg)
    return str(msg["Message-ID"])


async def _answered(dovecot: Dovecot, replies: int) -> list[dict[str, str]]:
    async def inbox() -> list[dict[str, str]] | None:
        found = await asyncio.to_thread(headers_in, dovecot, "INBOX")
        return found if sum(m.get("In-Reply-To", "") != "" for m in found) >= replies else None

    return await eventually(inbox)


@pytest.fixture
async def url(pg_cluster: postgres.Cluster) -> AsyncIterator[str]:
    yield pg_cluster.database()


async def test_only_the_leader_reads_and_writes_the_account_and_the_other_takes_over(
    dovecot: Dovecot, fake_openai: FakeOpenAI, homes: list[Home], url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    fake_openai.script([], then=text("Done."))
    first, second = (_service(home, dovecot, fake_openai, url) for home in homes)
    async with AsyncExitStack() as stack:
        leading = AsyncExitStack()
        await leading.enter_async_context(serving(first))
        await stack.enter_async_context(serving(second))
        async with Store(url=url) as store:  # the leader's reader has decided where it starts
            await eventually(lambda: find_place(store, "INBOX"))
        first_task = await asyncio.to_thread(_task, dovecot, 1)
        inbox = await _answered(dovecot, 1)
        await leading.aclose()  # the other takes over within its retry interval and reads on
        second_task = await asyncio.to_thread(_task, dovecot, 2)
        inbox = await _answered(dovecot, 2)
    replies = [m["In-Reply-To"] for m in inbox if m.get("In-Reply-To")]
    assert replies == [first_task, second_task]  # each task answered once
    assert len(inbox) == 4
    assert len(await asyncio.to_thread(headers_in, dovecot, "pizzamail/Activity")) == 2
