"""IMAP test fixtures: the sample Maildir delivered into a fresh mailbox, and a live server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from imaptools import ACCOUNTS, Client, close_leftovers, connect, seed

from pizzamail.home import Home
from pizzamail.imap import ImapServer, Limits, cache
from pizzamail.mailbox import Mailbox
from pizzamail.store import Store


@pytest.fixture(autouse=True)
async def _no_client_left_open() -> AsyncIterator[None]:
    yield
    await close_leftovers()


@pytest.fixture
async def mailbox(home: Home, store: Store) -> Mailbox:
    """As ``serve`` makes it: what clients list is cached at delivery (the transcript and fidelity
    tests then check the cached answers; tests/imap/test_header_cache.py the files' own)."""
    return await Mailbox(root=home.maildir, store=store, describe=cache.describe).open()


@pytest.fixture
async def sample(mailbox: Mailbox) -> list[bytes]:
    return await seed(mailbox)


@pytest.fixture
async def server(mailbox: Mailbox) -> AsyncIterator[ImapServer]:
    srv = await ImapServer.start(
        host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS,
        limits=Limits(login_delay=0.01, max_literal=1 << 20),
    )
    yield srv
    await srv.close()


@pytest.fixture
async def client(server: ImapServer) -> AsyncIterator[Client]:
    c = await connect(server)
    yield c
    await c.close()
