"""\\Recent (RFC 3501 §2.3.2): a message is recent for exactly one session, the first to open its
folder after it arrived, whenever that is: before or after a restart, in a folder made again after
a DELETE. Found by IMAPClient's live tests; the state used to live in memory under a reused id."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest
from imaptools import ACCOUNTS, Client, connect

from pizzamail.imap import ImapServer, Limits
from pizzamail.mailbox import Mailbox
from pizzamail.store import migrations
from pizzamail.store.migrations import MIGRATIONS
from pizzamail.store.sqlite import migrate

MAIL = b"From: bot@pizzamail.localhost\r\nSubject: hello\r\n\r\nbody\r\n"


async def start(mailbox: Mailbox) -> ImapServer:
    return await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS,
                                  limits=Limits(login_delay=0.01))


@pytest.fixture
async def two(server: ImapServer) -> AsyncIterator[Client]:
    c = await connect(server)
    yield c
    await c.close()


def recent_count(lines: list[bytes]) -> int:
    [line] = [x for x in lines if x.endswith(b" RECENT\r\n")]
    return int(line.split()[1])


async def deliver(mailbox: Mailbox, name: str, count: int = 1) -> None:
    folder = await mailbox.folder(name)
    assert folder is not None
    for _ in range(count):
        await mailbox.deliver(folder, MAIL)


async def test_mail_that_arrived_before_anyone_looked_is_recent_once(
    client: Client, two: Client, mailbox: Mailbox
) -> None:
    await deliver(mailbox, "INBOX", 2)
    assert await client.command(b'x STATUS INBOX (RECENT)') == [
        b"* STATUS INBOX (RECENT 2)\r\n", b"x OK STATUS completed\r\n"]
    assert recent_count(await client.command(b"e EXAMINE INBOX")) == 2  # EXAMINE leaves it recent
    assert recent_count(await client.command(b"s SELECT INBOX")) == 2
    assert await client.command(b"f FETCH 1:2 FLAGS") == [
        b"* 1 FETCH (FLAGS (\\Recent))\r\n", b"* 2 FETCH (FLAGS (\\Recent))\r\n", b"f OK FETCH completed\r\n"]
    assert recent_count(await two.command(b"s SELECT INBOX")) == 0
    await deliver(mailbox, "INBOX")
    assert await two.command(b"n NOOP") == [b"* 3 EXISTS\r\n", b"* 1 RECENT\r\n", b"n OK NOOP completed\r\n"]
    assert await client.command(b"o NOOP") == [
        b"* 3 EXISTS\r\n", b"* 2 RECENT\r\n", b"o OK NOOP completed\r\n"]


async def test_recent_survives_a_restart(mailbox: Mailbox) -> None:
    first = await start(mailbox)
    c = await connect(first)
    await deliver(mailbox, "INBOX")
    assert recent_count(await c.command(b"s SELECT INBOX")) == 1
    await c.close()
    await deliver(mailbox, "INBOX")  # nobody looks before the restart
    await first.close()
    second = await start(mailbox)
    try:
        c = await connect(second)
        assert recent_count(await c.command(b"s SELECT INBOX")) == 1
        assert await c.command(b"f FETCH 1:2 FLAGS") == [
            b"* 1 FETCH (FLAGS ())\r\n", b"* 2 FETCH (FLAGS (\\Recent))\r\n", b"f OK FETCH completed\r\n"]
        await c.close()
    finally:
        await second.close()


async def test_folder_made_again_after_delete_starts_afresh(client: Client, two: Client) -> None:
    await client.command(b"c CREATE Box")
    assert recent_count(await client.command(b"s SELECT Box")) == 0
    for n in range(3):
        await client.command(b"a%d APPEND Box {%d+}\r\n" % (n, len(MAIL)) + MAIL)
    flags = await client.command(b"f FETCH 1:* FLAGS")
    assert sum(b"\\Recent" in line for line in flags) == 3
    await client.command(b"u UNSELECT")
    assert await client.command(b"d DELETE Box") == [b"d OK DELETE completed\r\n"]
    await client.command(b"c CREATE Box")
    await client.command(b"a APPEND Box {%d+}\r\n" % len(MAIL) + MAIL)
    assert await client.command(b"t STATUS Box (MESSAGES RECENT)") == [
        b"* STATUS Box (MESSAGES 1 RECENT 1)\r\n", b"t OK STATUS completed\r\n"]
    assert recent_count(await two.command(b"s SELECT Box")) == 1


async def test_a_deleted_folder_stays_gone_for_a_session_that_had_it_open(
    client: Client, two: Client
) -> None:
    """Folder ids are never given out twice: a session on a deleted folder must not start seeing
    the mail of whichever folder is made next."""
    await client.command(b"c CREATE Old")
    await two.command(b"s SELECT Old")
    await client.command(b"d DELETE Old")
    await client.command(b"c CREATE New")
    await client.command(b"a APPEND New {%d+}\r\n" % len(MAIL) + MAIL)
    assert await two.command(b"n NOOP") == [b"n OK NOOP completed\r\n"]


async def test_migration_counts_mail_already_there_as_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [at] = [i for i, (name, _) in enumerate(MIGRATIONS) if name.endswith("_imap_recent")]
    async with aiosqlite.connect(tmp_path / "old.db", isolation_level=None) as db:
        with monkeypatch.context() as older:
            older.setattr(migrations, "MIGRATIONS", MIGRATIONS[:at])
            await migrate(db)
        await db.execute("INSERT INTO folders(id, name, uidvalidity, uidnext) VALUES (4, 'INBOX', 1, 7)")
        assert (await migrate(db))[0] == MIGRATIONS[at][0]
        async with db.execute("SELECT first_recent FROM folders") as cursor:
            assert await cursor.fetchall() == [(7,)]
        async with db.execute("SELECT latest FROM folder_ids") as cursor:
            assert await cursor.fetchall() == [(4,)]
