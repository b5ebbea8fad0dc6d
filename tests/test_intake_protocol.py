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


def unstuffed(wire: bytes) -> bytes:
    """What RFC 5321 (and aiosmtpd) make of DATA as sent: its lines up to the lone dot, each line's
    leading dot taken off."""
    lines = []
    for line in wire.split(b"\r\n")[:-1]:
        if line == b".":
            break
        lines.append(line[1:] if line.startswith(b".") else line)
    return b"".join(line + b"\r\n" for line in lines)


def submit_data(port: int, wire: bytes, *, then: str = "NOOP") -> tuple[tuple[int, bytes], tuple[int, bytes]]:
    """DATA sent as ``wire`` (already dot-stuffed and ended), with the command ``then`` in the same
    packet; the answers to both."""
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        client.login("me", "secret-pw")
        client.docmd("MAIL", f"FROM:<{OWNER}>")
        client.docmd("RCPT", f"TO:<{BOT}>")
        assert client.docmd("DATA")[0] == 354
        client.send(wire + f"{then}\r\n".encode())
        return client.getreply(), client.getreply()


def task(n: int, body: bytes) -> bytes:
    head = f"From: {OWNER}\r\nTo: {BOT}\r\nSubject: dots {n}\r\nMessage-ID: <dots-{n}@client>\r\n\r\n"
    return head.encode() + body


@pytest.mark.parametrize("body", [
    b"..starts with a dot\r\n", b"line\r\n..\r\n...\r\nend.\r\n", b"last line is a dot\r\n..\r\n",
    b"a bare\nLF text\nfile\r\n", b"", b"..\r\n",
])
async def test_a_mail_is_read_whole_as_aiosmtpd_reads_it_line_by_line(
    smtp_port: int, store: Store, blobs: BlobStore, body: bytes
) -> None:
    wire = task(len(body), body) + b".\r\n"
    answers = await asyncio.to_thread(submit_data, smtp_port, wire)
    assert answers[0][0] == 250 and answers[1] == (250, b"OK")  # the command after the dot is its own
    [row] = await store.fetchall("SELECT blob FROM messages")
    assert await blobs.load(row[0]) == unstuffed(wire)


async def test_a_lone_dot_at_once_is_an_empty_mail_and_a_one_line_mail_is_a_mail(
    smtp_port: int, store: Store
) -> None:
    empty = await asyncio.to_thread(submit_data, smtp_port, b".\r\n")
    assert empty[0][0] == 554 and b"empty mail" in empty[0][1] and empty[1] == (250, b"OK")
    one_line = await asyncio.to_thread(submit_data, smtp_port, b"Subject: only this\r\n.\r\n")
    assert one_line[0][0] == 250
    assert [tuple(r) for r in await store.fetchall("SELECT subject FROM messages")] == [("only this",)]


async def test_the_size_limit_counts_the_mail_as_sent(smtp_port: int, store: Store) -> None:
    """aiosmtpd counts the bytes as sent (dots and all) against the limit (100,000 here)."""
    head = task(0, b"")
    dotted = head + b"..x\r\n" * ((100_000 - len(head)) // 5)
    fits = dotted + b"y" * (100_000 - len(dotted) - 2) + b"\r\n"
    over = fits.replace(b"y\r\n", b"yy\r\n")
    assert len(fits) == 100_000 and len(unstuffed(over + b".\r\n")) < 100_000
    answers = [await asyncio.to_thread(submit_data, smtp_port, data + b".\r\n") for data in (over, fits)]
    assert [a[0][0] for a in answers] == [552, 250] and all(a[1] == (250, b"OK") for a in answers)
    assert (await store.fetchall("SELECT count(*) FROM messages"))[0][0] == 1


async def test_a_mail_is_read_in_a_few_reads_not_one_a_line(
    smtp_port: int, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    readuntil, reads = asyncio.StreamReader.readuntil, []

    async def counted(reader: asyncio.StreamReader, separator: bytes = b"\n") -> bytes:
        reads.append(separator)
        return await readuntil(reader, separator)

    monkeypatch.setattr(asyncio.StreamReader, "readuntil", counted)
    body = b"".join(b"line %d of the report\r\n" % n for n in range(300))
    assert (await asyncio.to_thread(submit_data, smtp_port, task(1, body) + b".\r\n"))[0][0] == 250
    assert len(reads) < 20  # the commands' lines and one read of the mail (aiosmtpd: 300 and more)


async def test_past_the_limit_a_mail_is_read_line_by_line_as_aiosmtpd_reads_it(
    smtp_port: int, store: Store
) -> None:
    """No end within the limit: the rest is aiosmtpd's own reading, which tells a line longer than
    any mail may be (500) from too many lines (552)."""
    one_line = task(1, b"x" * 150_000 + b"\r\n") + b".\r\n"
    many_lines = task(2, b"words words words\r\n" * 8_000) + b".\r\n"
    answers = [await asyncio.to_thread(submit_data, smtp_port, wire) for wire in (one_line, many_lines)]
    assert [a[0][0] for a in answers] == [500, 552] and all(a[1] == (250, b"OK") for a in answers)
    assert (await store.fetchall("SELECT count(*) FROM messages"))[0][0] == 0
