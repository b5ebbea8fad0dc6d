"""The header cache of the mail index: a header listing answered without opening message files,
byte for byte what the files give; SELECT without reading a row per message."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from imaptools import Client, connect

from pizzamail.imap import ImapServer, cache, fetch, mime, search
from pizzamail.imap.fetchparse import Section
from pizzamail.mailbox import Folder, Mailbox, MailRow, Structures
from pizzamail.store import Store, migrations
from pizzamail.store import mailindex as index
from pizzamail.store.sqlite import migrate

LISTED = b"FROM TO CC SUBJECT DATE MESSAGE-ID REFERENCES IN-REPLY-TO CONTENT-TYPE"
#: what common clients name when they list a folder, as they send it
CLIENTS = {
    "Thunderbird": b"From To Cc Bcc Subject Date Message-ID Priority X-Priority References Newsgroups"
                   b" In-Reply-To Content-Type Reply-To",
    "NeoMutt": b"DATE FROM SENDER SUBJECT TO CC MESSAGE-ID REFERENCES CONTENT-TYPE CONTENT-DESCRIPTION"
               b" IN-REPLY-TO REPLY-TO LINES LIST-POST X-LABEL X-ORIGINAL-TO",
    "K-9 Mail": b"date subject from content-type to cc reply-to message-id references in-reply-to"
                b" X-K9mail-Identity Chat-Version",
    "iOS Mail": b"date subject from to cc bcc message-id in-reply-to content-type references",
}

MAILS = {
    "folded": b"From: Alice\r\n <alice@example.org>\r\nSubject: a long\r\n\tsubject\r\n"
              b"To: b@example.org\r\n\r\nbody\r\n",
    "repeated": b"Received: x\r\nTo: one@example.org\r\nSubject: s\r\nTo: two@example.org\r\n"
                b"Cc: c@example.org\r\nCC: d@example.org\r\n\r\nbody\r\n",
    "8-bit": "From: Jürgen <j@example.org>\r\nSubject: Größe prüfen\r\n\r\nbody\r\n".encode()
             + b"Subject: \xff\xfe raw\r\n",
    "missing": b"X-Only: this\r\n\r\nbody\r\n",
    "case": b"fROM: a@example.org\r\nsubject : spaced\r\nMESSAGE-id: <m@x>\r\n\r\nbody\r\n",
    "no body": b"From: a@example.org\r\nSubject: no body",
    "orphan line": b"From: a@example.org\r\nnot a field\r\n continued\r\nSubject: s\r\n\r\nbody\r\n",
    "continuation first": b" Subject: starts blank\r\nFrom: a@example.org\r\n\r\nbody\r\n",
    "NUL": b"From: a@example.org\r\nSubject: a\x00b\r\n\r\nbody\r\n",
    "empty header": b"\r\nbody only\r\n",
    "references": b"From: a@example.org\r\nDate: Wed, 01 Jan 2025 09:00:00 +0000\r\n"
                  b"References: <a@x>\r\n <b@x>\r\nIn-Reply-To: <b@x>\r\n"
                  b"Content-Type: text/plain;\r\n charset=utf-8\r\n\r\nbody\r\n",
    "list mail": b"Return-Path: <l@example.org>\r\nReceived: by mx\r\nSender: l@example.org\r\n"
                 b"From: a@example.org\r\nReply-To: list@example.org\r\nBcc: b@example.org\r\n"
                 b"X-Priority: 1 (Highest)\r\nList-Post: <mailto:list@example.org>\r\n"
                 b"List-Id: <list.example.org>\r\nContent-Transfer-Encoding: 8bit\r\n\r\nbody\r\n",
}


@pytest.fixture(params=["sqlite", "postgresql"])
def store_backend(request: pytest.FixtureRequest) -> str:
    """The cache and the outline are SQL: on both engines."""
    return str(request.param)


REQUESTS = [(b"FROM",), (b"SUBJECT", b"from"), (b"To", b"Cc"), tuple(LISTED.split()), (b"x-none",),
            (b"DATE", b"MESSAGE-ID", b"IN-REPLY-TO", b"REFERENCES", b"CONTENT-TYPE"),
            *(tuple(fields.split()) for fields in CLIENTS.values())]


@pytest.mark.parametrize("name", list(MAILS))
@pytest.mark.parametrize("fields", REQUESTS)
def test_the_cached_lines_give_what_the_whole_header_gives(name: str, fields: tuple[bytes, ...]) -> None:
    header = mime.split_header(MAILS[name])[0]
    lines = cache.header_lines(header)
    section = Section(text="HEADER.FIELDS", fields=fields)
    if lines is None:  # a NUL in the header: answered from the file
        assert name == "NUL"
        return
    if not cache.answers(section):
        assert fields == (b"x-none",)
        return
    wanted = frozenset(f.lower() for f in fields)
    assert cache.header_fields(lines, wanted) == mime.filter_header(header, fields, keep=True)


def test_only_cached_fields_of_the_whole_message_are_answered_from_the_cache() -> None:
    assert cache.answers(Section(text="HEADER.FIELDS", fields=(b"Subject", b"FROM")))
    assert not cache.answers(Section(text="HEADER.FIELDS", fields=(b"SUBJECT", b"X-Mailer")))
    assert not cache.answers(Section(text="HEADER.FIELDS.NOT", fields=(b"SUBJECT",)))
    assert not cache.answers(Section(part=(1,), text="HEADER.FIELDS", fields=(b"SUBJECT",)))
    assert not cache.answers(Section(text="HEADER"))


def _literals(lines: list[bytes]) -> list[bytes]:
    """The literal of each FETCH response, in order."""
    data = b"".join(lines)
    found = []
    for m in re.finditer(rb"\{(\d+)\}\r\n", data):
        found.append(data[m.end():m.end() + int(m.group(1))])
    return found


def _expected(data: bytes, fields: tuple[bytes, ...]) -> bytes:
    return mime.filter_header(mime.split_header(data)[0], fields, keep=True)


def _count_reads(mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    read_many = mailbox.read_many

    async def counted(
        folder: Folder, rows: Sequence[MailRow], *, header_only: bool = False
    ) -> list[bytes | None]:
        reads.append(len(rows))
        return await read_many(folder, rows, header_only=header_only)

    monkeypatch.setattr(mailbox, "read_many", counted)
    return reads


async def _deliver_all(mailbox: Mailbox) -> list[bytes]:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    for data in MAILS.values():
        await mailbox.deliver(inbox, data)
    return [data for data in MAILS.values()]


async def test_a_header_listing_opens_no_message_file(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails without the cache: every message's file was read for its header."""
    sent = await _deliver_all(mailbox)
    reads = _count_reads(mailbox, monkeypatch)
    await client.command(b"s SELECT INBOX")
    fields = tuple(LISTED.split())
    lines = await client.command(
        b"f UID FETCH 1:* (UID FLAGS RFC822.SIZE INTERNALDATE BODY.PEEK[HEADER.FIELDS (" + LISTED + b")])")
    assert lines[-1].startswith(b"f OK")
    assert sum(reads) == 1  # the one whose header has a NUL byte
    assert _literals(lines) == [_expected(data, fields) for data in sent]
    lines = await client.command(b"e UID FETCH 1:* (ENVELOPE BODYSTRUCTURE)")
    assert lines[-1].startswith(b"e OK") and sum(reads) == 1


@pytest.mark.parametrize("client_name", list(CLIENTS))
async def test_each_common_clients_listing_opens_no_message_file(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch, client_name: str
) -> None:
    """The fields each client lists are all cached: fails with the nine fields cached before 030
    (each of these listings read every file)."""
    sent = await _deliver_all(mailbox)
    reads = _count_reads(mailbox, monkeypatch)
    await client.command(b"s SELECT INBOX")
    fields = CLIENTS[client_name]
    lines = await client.command(
        b"f UID FETCH 1:* (UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS (" + fields + b")])")
    assert lines[-1].startswith(b"f OK")
    assert sum(reads) == 1  # the one whose header has a NUL byte
    assert _literals(lines) == [_expected(data, tuple(fields.split())) for data in sent]


@pytest.mark.parametrize("migration", ["030_header_cache_fields", "031_header_cache_framing"])
async def test_the_header_cache_migrations_forget_the_lines_cached_before_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migration: str
) -> None:
    """Lines cached before 030 lack the fields it added, which they would answer with nothing;
    lines cached before 031 are framed as ``name NUL raw NUL``, which the listing's pattern no
    longer reads. Forgotten, each message's next listing reads its file (as for a mail found on
    disk)."""
    [at] = [i for i, (name, _) in enumerate(migrations.MIGRATIONS) if name == migration]
    async with aiosqlite.connect(tmp_path / "old.db", isolation_level=None) as db:
        with monkeypatch.context() as older:
            older.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:at])
            await migrate(db)
        await db.execute("INSERT INTO folders(id, name, uidvalidity) VALUES (1, 'INBOX', 1)")
        await db.executemany(
            "INSERT INTO mail(folder_id, uid, name, subdir, size, internaldate, modseq, headers)"
            " VALUES (1, ?, ?, 'cur', 1, 0, 1, ?)", [(1, "a", b"subject\0Subject: s\r\n\0"), (2, "b", None)])
        assert (await migrate(db))[0] == migration
        async with db.execute("SELECT uid, headers FROM mail ORDER BY uid") as cursor:
            assert list(map(tuple, await cursor.fetchall())) == [(1, None), (2, None)]


@pytest.mark.parametrize("name", list(MAILS))
def test_the_cached_lines_give_each_fields_values_as_the_whole_header_does(name: str) -> None:
    header = mime.split_header(MAILS[name])[0]
    lines = cache.header_lines(header)
    if lines is None:
        assert name == "NUL"
        return
    whole = mime.header_fields(header)
    for field in cache.FIELDS:
        assert cache.values(lines, field) == [v for n, v in whole if n == field], field


#: searches of cached fields only (the UTF-8 one's literal follows it)
SEARCHES = [b"FROM alice", b"TO two", b"CC D@EXAMPLE", b"HEADER Message-ID m@x", b"SENTBEFORE 1-Jan-2030",
            b"OR SUBJECT spaced NOT FROM a@example.org", b"HEADER References b@x", b"HEADER Reply-To list",
            b"SUBJECT s FROM example", b"CHARSET UTF-8 SUBJECT {6+}\r\nGr\xc3\xb6\xc3\x9f"]


async def test_a_search_of_cached_fields_opens_no_message_file(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search finds what the files say, reading only the one file whose header has a NUL
    byte (never cached); fails when header keys read every file, as they did."""
    sent = await _deliver_all(mailbox)
    reads = _count_reads(mailbox, monkeypatch)
    await client.command(b"s SELECT INBOX")
    cached = [await client.command(b"c UID SEARCH " + criteria) for criteria in SEARCHES]
    assert sum(reads) == len(SEARCHES)
    monkeypatch.setattr(search, "_cached_only", lambda fields: False)
    from_files = [await client.command(b"f UID SEARCH " + criteria) for criteria in SEARCHES]
    assert sum(reads) == len(SEARCHES) * (1 + len(sent))
    assert [lines[0] for lines in cached] == [lines[0] for lines in from_files]
    assert sum(lines[0] != b"* SEARCH\r\n" for lines in cached) >= 8  # most of them find something


@pytest.mark.parametrize("criteria", [b"HEADER X-Only this", b"FROM a BODY body", b"OR TO two TEXT body"])
async def test_a_search_of_other_fields_or_of_the_text_reads_the_files(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch, criteria: bytes
) -> None:
    sent = await _deliver_all(mailbox)
    reads = _count_reads(mailbox, monkeypatch)
    await client.command(b"s SELECT INBOX")
    lines = await client.command(b"f UID SEARCH " + criteria)
    assert lines[-1].startswith(b"f OK") and lines[0] != b"* SEARCH\r\n"
    assert sum(reads) == len(sent)


async def test_fields_outside_the_cache_are_read_from_the_file(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = await _deliver_all(mailbox)
    reads = _count_reads(mailbox, monkeypatch)
    await client.command(b"s SELECT INBOX")
    fields = (b"SUBJECT", b"RECEIVED", b"X-ONLY", b"RETURN-PATH")  # the last as Roundcube lists
    lines = await client.command(b"f FETCH 1:* (BODY.PEEK[HEADER.FIELDS (" + b" ".join(fields) + b")])")
    assert sum(reads) == len(sent)
    assert _literals(lines) == [_expected(data, fields) for data in sent]


async def test_a_mail_found_on_disk_is_cached_by_its_first_listing(
    store: Store, mailbox: Mailbox, server: ImapServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files another program put there (or a home from before the cache) have no cache: the first
    listing reads them, and fills it; the next reads nothing. Old code read them every time."""
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    for n, data in enumerate(MAILS.values()):
        path = mailbox.path(inbox) / "new" / f"17640000{n:02d}.M{n}P1Q{n}.elsewhere"
        path.write_bytes(data.replace(b"\r\n", b"\n"))
    await mailbox.reconcile(inbox)
    reads = _count_reads(mailbox, monkeypatch)
    client = await connect(server)
    await client.command(b"s SELECT INBOX")
    listing = b"f FETCH 1:* (BODY.PEEK[HEADER.FIELDS (" + LISTED + b")])"
    first = _literals(await client.command(listing))
    assert sum(reads) == len(MAILS)
    again = _literals(await client.command(listing))
    assert sum(reads) == len(MAILS) + 1  # only the one with a NUL byte, never cached
    lf = [data.replace(b"\r\n", b"\n") for data in MAILS.values()]
    assert first == again == [_expected(data, tuple(LISTED.split())) for data in lf]
    await client.close()


async def test_select_reads_no_row_per_message_and_an_unchanged_folder_not_even_its_uids(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails on the old code, which read every index entry at each SELECT."""
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    for n in range(5):
        await mailbox.deliver(inbox, b"Subject: %d\r\n\r\nbody\r\n" % n, flags={"\\Seen"} if n < 2 else set())

    async def forbidden(*args: object) -> None:
        raise AssertionError("SELECT read the index entries")

    outlines: list[int] = []
    outline = index.outline

    async def counted(store: Store, folder_id: int) -> index.Outline | None:
        outlines.append(folder_id)
        return await outline(store, folder_id)

    monkeypatch.setattr(index, "mail_in", forbidden)
    monkeypatch.setattr(index, "mail_of", forbidden)
    monkeypatch.setattr(index, "outline", counted)
    first = await client.command(b"a SELECT INBOX")
    assert b"* 5 EXISTS\r\n" in first and b"* OK [UNSEEN 3] First unseen.\r\n" in first
    second = await client.command(b"b SELECT INBOX")
    assert len(outlines) == 1
    assert [line for line in second if b"RECENT" not in line and not line.startswith(b"b ")] == \
        [line for line in first if b"RECENT" not in line and not line.startswith(b"a ")]
    await mailbox.deliver(inbox, b"Subject: new\r\n\r\nbody\r\n", flags={"$Work"})
    third = await client.command(b"c SELECT INBOX")
    assert len(outlines) == 2
    assert b"* 6 EXISTS\r\n" in third and b"* 1 RECENT\r\n" in third
    assert third[0] == b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Work)\r\n"


async def test_fetching_message_after_message_reads_the_index_once_until_the_folder_changes(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mbsync fetches one message per command: without reading ahead, a query each."""
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    for n in range(20):
        await mailbox.deliver(inbox, b"Subject: %d\r\n\r\nbody\r\n" % n)
    await client.command(b"s SELECT INBOX")
    queries: list[int] = []
    rows = mailbox.rows

    async def counted(folder: Folder, uids: Sequence[int]) -> dict[int, MailRow]:
        queries.append(len(uids))
        return await rows(folder, uids)

    monkeypatch.setattr(mailbox, "rows", counted)
    for n in range(1, 21):
        lines = await client.command(b"f%d UID FETCH %d (FLAGS BODY.PEEK[])" % (n, n))
        assert lines[0].startswith(b"* %d FETCH (UID %d FLAGS (\\Recent)" % (n, n))
    assert queries == [20]
    await mailbox.set_flags(inbox, {5: {"\\Flagged"}})  # another session's change
    lines = await client.command(b"g UID FETCH 5 (FLAGS BODY.PEEK[])")
    assert any(line.startswith(b"* 5 FETCH (UID 5 FLAGS (\\Flagged \\Recent)") for line in lines)
    assert len(queries) == 2


async def test_a_moved_message_keeps_its_cache(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = await _deliver_all(mailbox)
    await client.command(b"s SELECT INBOX")
    assert (await client.command(b"m UID MOVE 1:* Archive"))[-1].startswith(b"m OK")
    reads = _count_reads(mailbox, monkeypatch)
    await client.command(b"a SELECT Archive")
    assert (await client.command(b"e FETCH 1:* (ENVELOPE BODYSTRUCTURE)"))[-1].startswith(b"e OK")
    lines = await client.command(b"f FETCH 1:* (BODY.PEEK[HEADER.FIELDS (" + LISTED + b")])")
    assert sum(reads) == 1  # the one with a NUL byte, as before the move
    assert _literals(lines) == [_expected(data, tuple(LISTED.split())) for data in sent]


async def test_a_long_first_listing_writes_the_cache_as_it_goes(
    mailbox: Mailbox, server: ImapServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory stays bounded: what the first listing of files found on disk computes is written a
    part at a time, not held until the end of the FETCH."""
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    for n in range(7):
        (mailbox.path(inbox) / "new" / f"17640000{n:02d}.M{n}P1Q{n}.elsewhere").write_bytes(
            b"Subject: %d\r\n\r\nbody\r\n" % n)
    await mailbox.reconcile(inbox)
    monkeypatch.setattr(fetch, "_BATCH", 2)
    monkeypatch.setattr(fetch, "_SAVE_EVERY", 2)
    saved: list[int] = []
    save = mailbox.save_structures

    async def counted(folder: Folder, computed: dict[int, Structures]) -> None:
        saved.append(len(computed))
        await save(folder, computed)

    monkeypatch.setattr(mailbox, "save_structures", counted)
    client = await connect(server)
    await client.command(b"s SELECT INBOX")
    await client.command(b"f FETCH 1:* (BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    assert saved == [2, 2, 2, 1]
    reads = _count_reads(mailbox, monkeypatch)
    lines = await client.command(b"g FETCH 1:* (BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    assert reads == [] and _literals(lines) == [b"Subject: %d\r\n\r\n" % n for n in range(7)]
    await client.close()



async def test_a_listing_answered_from_the_index_alone_makes_no_trip_for_files(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose every message is answered from the cache is rendered at once, without the
    (per-message) sorting into messages to read and not: fails when that step is taken."""
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    sent = [data for name, data in MAILS.items() if name != "NUL"]
    for data in sent:
        await mailbox.deliver(inbox, data)

    async def forbidden(*args: object) -> object:
        raise AssertionError("a batch answered from the index went through _load")

    monkeypatch.setattr(fetch.Fetcher, "_load", forbidden)
    monkeypatch.setattr(fetch, "_BATCH", 3)
    await client.command(b"s SELECT INBOX")
    lines = await client.command(b"f UID FETCH 1:* (UID FLAGS BODY.PEEK[HEADER.FIELDS (" + LISTED + b")])")
    assert lines[-1].startswith(b"f OK")
    assert _literals(lines) == [_expected(data, tuple(LISTED.split())) for data in sent]


def test_a_long_fetch_starts_with_a_short_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its answer goes out while the next batches are read: fails with batches all alike."""
    monkeypatch.setattr(fetch, "_FIRST", 3)
    monkeypatch.setattr(fetch, "_BATCH", 5)
    assert fetch._batches(list(range(1, 15))) == [[1, 2, 3], [4, 5, 6, 7, 8], [9, 10, 11, 12, 13], [14]]
    assert fetch._batches([]) == []


async def test_a_fetch_of_one_batch_starts_no_task(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mbsync sends a FETCH per message: its entries are awaited as they are, not in a task of
    their own (a task costs as much as the rest of such a FETCH). Fails with a task per batch."""
    await _deliver_all(mailbox)
    tasks: list[object] = []
    ensure_future = fetch.asyncio.ensure_future

    def counted(work: Any) -> Any:
        tasks.append(work)
        return ensure_future(work)

    await client.command(b"s SELECT INBOX")
    monkeypatch.setattr(fetch.asyncio, "ensure_future", counted)
    lines = await client.command(b"f UID FETCH 2 (BODY.PEEK[])")
    assert lines[-1].startswith(b"f OK") and tasks == []
