"""SMTP intake's own reading of the protocol where aiosmtpd's costs a mail most: the same answers
as aiosmtpd's, for the plain commands and mails nearly every client sends."""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import AsyncIterator
from typing import Any

import aiosmtpd.smtp
import pytest
from aiosmtpd.smtp import SMTP

from pizzamail.auth import Accounts
from pizzamail.intake.smtp import IntakeHandler, Submission, start_smtp_server
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore

OWNER, BOT = "me@pizzamail.localhost", "bot@pizzamail.localhost"
ACCOUNTS = Accounts(user="me", password="secret-pw", addresses=frozenset({OWNER}))
TASK = f"From: {OWNER}\r\nTo: {BOT}\r\nSubject: report\r\nMessage-ID: <t@client>\r\n\r\nsummarise it\r\n"


@pytest.fixture
async def smtp_port(store: Store, blobs: BlobStore) -> AsyncIterator[int]:
    handler = IntakeHandler(store=store, blobs=blobs, accounts=ACCOUNTS, agents=frozenset({BOT}),
                            domain="pizzamail.localhost")
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=100_000)
    yield int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()


PATHS = [
    "<a@b>", "<a@b> SIZE=10", "<a@b>SIZE=10", "<a.b+c@Ex-ample.COM>  BODY=8BITMIME SMTPUTF8",
    "<a@b>\tX", "<a@b>(comment)", "<a@b> (c) SIZE=1", "<a@b.>", "<a..b@c>", "<.a@b>", "<a@-b>",
    "<a@[1.2.3.4]>", '<"q q"@b>', "<a@b", "<@x:a@b>", "<a@b.c>  ", "<a@b>>", "<>", "a@b",
    "<a@b> SIZE=1 ", "<é@b>", "<a@b> x(y)", "<a@b>\n", "",
]


@pytest.mark.parametrize("path", PATHS)
def test_an_address_reads_as_aiosmtpd_reads_it(path: str) -> None:
    server = Submission.__new__(Submission)
    server.local_part_limit = 0
    ours, theirs = server._getaddr(path), SMTP._getaddr(server, path)
    assert ours[0] == theirs[0]
    # the parameters are split on white space and tested for being there, by MAIL and RCPT alike
    assert ((ours[1] or "").split(), bool(ours[1])) == ((theirs[1] or "").split(), bool(theirs[1]))


async def test_a_plain_address_is_read_without_the_stdlib_grammar(
    smtp_port: int, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stdlib's address grammar costs 0.1 ms an address; only an address it is needed for
    (here one with a comment) goes through it."""
    grammar, used = aiosmtpd.smtp.get_angle_addr, []

    def counted(value: str) -> Any:
        used.append(value)
        return grammar(value)

    monkeypatch.setattr(aiosmtpd.smtp, "get_angle_addr", counted)

    def submit() -> tuple[int, bytes]:
        with smtplib.SMTP("127.0.0.1", smtp_port, timeout=10) as client:
            client.login("me", "secret-pw")
            client.sendmail(OWNER, [BOT], TASK)
            client.docmd("MAIL", f"FROM:<{OWNER}> (the owner)")
            return client.docmd("RCPT", f"TO:<{BOT}>")

    assert await asyncio.to_thread(submit) == (250, b"2.1.5 OK")
    assert used == [f"<{OWNER}> (the owner)"]
    rows = await store.fetchall("SELECT sender, message_id FROM messages")
    assert [tuple(r) for r in rows] == [(OWNER, "t@client")]
