"""Changes made elsewhere reach a session: a second session's STORE/EXPUNGE, new deliveries,
IDLE push, and the EXPUNGE rule for commands that use sequence numbers."""

from __future__ import annotations

import asyncio

from imaptools import connect

from pizzamail.imap import ImapServer
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
        assert [await c.line() for _ in range(3)] == [b"* 10 EXISTS\r\n", b"* 1 RECENT\r\n", b"+ idling\r\n"]
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
        await asyncio.wait_for(server.close(), 5)
        assert await c.line() == b"* BYE pizzamail is shutting down\r\n"
        assert await c.reader.read() == b""
    finally:
        await c.close()


async def test_autologout_after_idle_timeout(mailbox: Mailbox) -> None:
    from imaptools import ACCOUNTS

    from pizzamail.imap import Limits

    server = await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS,
                                    limits=Limits(idle_timeout=0.2))
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
