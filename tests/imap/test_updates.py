"""Changes made elsewhere reach a session: a second session's STORE/EXPUNGE, new deliveries,
IDLE push, and the EXPUNGE rule for commands that use sequence numbers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from imaptools import READ_TIMEOUT, connect

from pizzamail.imap import ImapServer
from pizzamail.imap.fetch import Fetcher
from pizzamail.mailbox import Folder, Mailbox

NEW_MAIL = b"From: bot@pizzamail.localhost\r\nSubject: new\r\n\r\nfresh\r\n"


async def inbox(mailbox: Mailbox) -> Folder:
    folder = await mailbox.folder("INBOX")
    assert folder is not None
    return folder


async def test_second_session_sees_flags_expunges_and_arrivals(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes]
) -> None:
    one, two = await connect(server), await connect(server)
    try:
        await one.command(b"s SELECT INBOX")
        await two.command(b"s SELECT INBOX")
        await one.command(b"a STORE 1 +FLAGS.SILENT (\\Flagged $Todo)")
        assert await two.command(b"n NOOP") == [
            b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Todo)\r\n",
            b"* 1 FETCH (FLAGS (\\Flagged \\Seen $Todo))\r\n",
            b"n OK NOOP completed\r\n",
        ]
        await one.command(b"b STORE 2:3 +FLAGS.SILENT (\\Deleted)")
        await one.command(b"c EXPUNGE")
        await mailbox.deliver(await inbox(mailbox), NEW_MAIL)
        assert await two.command(b"o NOOP") == [
            b"* 3 EXPUNGE\r\n",
            b"* 2 EXPUNGE\r\n",
            b"* 8 EXISTS\r\n",
            b"* 1 RECENT\r\n",
            b"o OK NOOP completed\r\n",
        ]
        assert await two.command(b"f FETCH 8 (UID FLAGS)") == [
            b"* 8 FETCH (UID 10 FLAGS (\\Recent))\r\n", b"f OK FETCH completed\r\n"]
        # The first session sees the arrival too, but it is not recent for it any more.
        assert await one.command(b"p NOOP") == [
            b"* 8 EXISTS\r\n", b"* 0 RECENT\r\n", b"p OK NOOP completed\r\n"]
    finally:
        await one.close()
        await two.close()


async def test_no_expunge_during_fetch_by_number(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes]
) -> None:
    one, two = await connect(server), await connect(server)
    try:
        await one.command(b"s SELECT INBOX")
        await two.command(b"s SELECT INBOX")
        await one.command(b"a STORE 1 +FLAGS.SILENT (\\Deleted)")
        await one.command(b"b EXPUNGE")
        # Message 2 is still message 2 for this FETCH: the expunge waits for a later command.
        assert await two.command(b"f FETCH 2 UID") == [
            b"* 2 FETCH (UID 2)\r\n",
            b"f OK FETCH completed\r\n",
        ]
        assert await two.command(b"g SEARCH 1:2") == [b"* SEARCH 2\r\n", b"g OK SEARCH completed\r\n"]
        assert await two.command(b"h UID FETCH 2 UID") == [
            b"* 1 EXPUNGE\r\n", b"* 1 FETCH (UID 2)\r\n", b"h OK UID FETCH completed\r\n"]
    finally:
        await one.close()
        await two.close()


async def test_idle_pushes_arrivals_flags_and_expunges(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes]
) -> None:
    c = await connect(server)
    try:
        await c.command(b"s SELECT INBOX")
        await c.send(b"i IDLE\r\n")
        assert await c.line() == b"+ idling\r\n"
        folder = await inbox(mailbox)
        await mailbox.deliver(folder, NEW_MAIL)
        assert await c.line() == b"* 10 EXISTS\r\n"
        assert await c.line() == b"* 1 RECENT\r\n"
        await mailbox.set_flags(folder, {10: {"\\Seen"}})
        assert await c.line() == b"* 10 FETCH (FLAGS (\\Seen \\Recent))\r\n"
        await mailbox.expunge(folder, [1])
        assert await c.line() == b"* 1 EXPUNGE\r\n"
        await c.send(b"DONE\r\n")
        assert await c.line() == b"i OK IDLE terminated\r\n"
    finally:
        await c.close()


async def test_mail_arriving_between_idles_is_announced(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes]
) -> None:
    c = await connect(server)
    try:
        await c.command(b"s SELECT INBOX")
        await mailbox.deliver(await inbox(mailbox), NEW_MAIL)  # while the client is not idling
        await c.send(b"i IDLE\r\n")
        # After "+ idling", not before: Thunderbird acts only on what comes while it idles.
        assert [await c.line() for _ in range(3)] == [b"+ idling\r\n", b"* 10 EXISTS\r\n", b"* 1 RECENT\r\n"]
        await c.send(b"DONE\r\n")
        assert await c.line() == b"i OK IDLE terminated\r\n"
    finally:
        await c.close()


async def test_close_ends_idle_sessions(server: ImapServer, mailbox: Mailbox) -> None:
    c = await connect(server)
    try:
        await c.command(b"s SELECT INBOX")
        await c.send(b"i IDLE\r\n")
        assert await c.line() == b"+ idling\r\n"
        await asyncio.wait_for(server.close(), READ_TIMEOUT)
        assert await c.line() == b"* BYE pizzamail is shutting down\r\n"
        assert await c.reader.read() == b""
    finally:
        await c.close()


async def test_autologout_after_idle_timeout(mailbox: Mailbox) -> None:
    from imaptools import ACCOUNTS

    from pizzamail.imap import Limits

    server = await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS,
                                    limits=Limits(idle_timeout=2))  # time to log in and select
    try:
        quiet = await connect(server)
        idling = await connect(server)
        await idling.command(b"s SELECT INBOX")
        await idling.send(b"i IDLE\r\n")
        assert await idling.line() == b"+ idling\r\n"
        for c in (quiet, idling):
            assert await c.line() == b"* BYE Autologout; idle for too long\r\n"
            assert await c.reader.read() == b""
            await c.close()
    finally:
        await server.close()


# Thunderbird's header FETCH after an IDLE wake-up (nsImapProtocol's IMAP_ENV_AND_DB_HEADERS).
TB_HEADERS = (b"From To Cc Bcc Subject Date Message-ID Priority X-Priority References Newsgroups"
              b" In-Reply-To Content-Type Reply-To")
REPLY = b"From: bot@pizzamail.localhost\r\nSubject: Re: new\r\nIn-Reply-To: <t@x>\r\n\r\ndone\r\n"


@pytest.mark.parametrize("filed", ["before its header FETCH", "while its header FETCH is answered"])
async def test_thunderbird_is_told_of_a_reply_filed_during_its_sync(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes], monkeypatch: pytest.MonkeyPatch,
    filed: str,
) -> None:
    """Issue 11 item 10. Thunderbird leaves IDLE on the task's EXISTS and syncs; the reply's
    EXISTS then arrives inside the answer to its header FETCH, where Thunderbird only notes the
    number and goes back to IDLE. It acts on anything untagged after ``+ idling`` (it then syncs
    again), so that is where the news must reach it."""
    folder = await inbox(mailbox)
    c = await connect(server)
    try:
        await c.command(b"s SELECT INBOX")
        await c.send(b"i IDLE\r\n")
        assert await c.line() == b"+ idling\r\n"
        await mailbox.deliver(folder, NEW_MAIL)  # the task, uid 10
        assert [await c.line(), await c.line()] == [b"* 10 EXISTS\r\n", b"* 1 RECENT\r\n"]
        await c.send(b"DONE\r\n")
        assert await c.line() == b"i OK IDLE terminated\r\n"
        assert await c.command(b"a UID FETCH 10:* (FLAGS)") == [
            b"* 10 FETCH (UID 10 FLAGS (\\Recent))\r\n", b"a OK UID FETCH completed\r\n"]
        await _file_reply(mailbox, folder, monkeypatch, during_fetch=filed.startswith("while"))
        header_fetch = await c.command(
            b"b UID FETCH 10 (UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS (" + TB_HEADERS + b")])")
        assert b"* 11 EXISTS\r\n" in header_fetch and not any(b"UID 11" in x for x in header_fetch)
        # Back to IDLE: the news comes again after "+ idling", and Thunderbird syncs once more.
        await c.send(b"j IDLE\r\n")
        assert [await c.line(), await c.line()] == [b"+ idling\r\n", b"* 11 EXISTS\r\n"]
        await c.send(b"DONE\r\n")
        assert await c.line() == b"j OK IDLE terminated\r\n"
        assert await c.command(b"d UID FETCH 11:* (FLAGS)") == [
            b"* 11 FETCH (UID 11 FLAGS (\\Recent))\r\n", b"d OK UID FETCH completed\r\n"]
        # Told once is enough: the next IDLE has nothing to repeat.
        assert await c.command(b"k IDLE\r\nDONE") == [b"+ idling\r\n", b"k OK IDLE terminated\r\n"]
    finally:
        await c.close()


async def _file_reply(
    mailbox: Mailbox, folder: Folder, monkeypatch: pytest.MonkeyPatch, *, during_fetch: bool
) -> None:
    if not during_fetch:
        await mailbox.deliver(folder, REPLY)
        return
    # a batch's answer is made from index entries read already (its header lines cached or not)
    send_batch = Fetcher._send_batch

    async def file_then_send(self: Fetcher, *args: Any) -> None:
        monkeypatch.setattr(Fetcher, "_send_batch", send_batch)  # once
        await mailbox.deliver(folder, REPLY)
        await send_batch(self, *args)

    monkeypatch.setattr(Fetcher, "_send_batch", file_then_send)
