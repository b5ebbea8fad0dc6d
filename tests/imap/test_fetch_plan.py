"""FETCH's own work kept to what a command needs: an item list parsed and set up once while a client
repeats it, a listing that reads only the columns it answers from, and batches rendered column by
column that give what the one-message forms give."""

from __future__ import annotations

import calendar
import itertools
import random
import re
import time
from typing import Any

import pytest
from imaptools import Client, connect

from pizzamail.imap import ImapServer, cache, fetch, parser, selected, wire
from pizzamail.imap import server as server_module
from pizzamail.mailbox import Mailbox
from pizzamail.store import Store


@pytest.fixture(params=["sqlite", "postgresql"])
def store_backend(request: pytest.FixtureRequest) -> str:
    """The listing's query is SQL: on both engines."""
    return str(request.param)


async def test_message_after_message_parses_and_sets_up_the_items_once(
    client: Client, sample: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """mbsync's pull, one ``UID FETCH n (BODY.PEEK[])`` a message. Fails on a FETCH that parsed its
    items and set itself up again for every message."""
    parsed: list[int] = []
    set_up: list[int] = []
    fetch_atts, post_init = parser.fetch_atts, fetch.Fetcher.__post_init__
    monkeypatch.setattr(parser, "fetch_atts", lambda r: parsed.append(1) or fetch_atts(r))
    monkeypatch.setattr(parser, "_FETCH_ITEMS", {})  # what earlier tests' commands left

    def counted(self: fetch.Fetcher) -> None:
        set_up.append(1)
        post_init(self)

    monkeypatch.setattr(fetch.Fetcher, "__post_init__", counted)
    await client.command(b"s SELECT INBOX")
    for uid, data in enumerate(sample, start=1):
        lines = await client.command(b"f%d UID FETCH %d (BODY.PEEK[])" % (uid, uid))
        assert b"".join(lines[:-1]) == b"* %d FETCH (UID %d BODY[] {%d}\r\n%s)\r\n" % (
            uid, uid, len(data), data)
    assert (len(parsed), len(set_up)) == (1, 1)


async def test_pipelined_fetches_over_the_wire_are_answered_together_each_in_its_place(
    client: Client, sample: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """mbsync sends its FETCHes without waiting for the answers: those that arrived together are
    answered with one run of the fetcher (without it, one run a command), and every answer is
    the one a command alone gets, with its tagged line right after its message."""
    runs: list[int] = []
    run = fetch.Fetcher.run

    async def counted(self: fetch.Fetcher, uids: list[int], **kwargs: Any) -> None:
        runs.append(len(uids))
        await run(self, uids, **kwargs)

    monkeypatch.setattr(fetch.Fetcher, "run", counted)
    await client.command(b"s SELECT INBOX")
    await client.send(b"".join(b"f%d UID FETCH %d (BODY.PEEK[])\r\n" % (uid, uid)
                               for uid in range(1, len(sample) + 1)) + b"n NOOP\r\n")
    answers = await client.until(b"n")
    expected = [b"* %d FETCH (UID %d BODY[] {%d}\r\n%s)\r\nf%d OK UID FETCH completed\r\n"
                % (uid, uid, len(data), data, uid) for uid, data in enumerate(sample, start=1)]
    assert b"".join(answers[:-1]) == b"".join(expected)
    assert answers[-1].startswith(b"n OK")
    assert sum(runs) == len(sample) and len(runs) < len(sample)


@pytest.mark.parametrize("seed", range(4))
async def test_pipelined_fetches_answer_as_each_would_alone(
    client: Client, sample: list[bytes], seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a client pipelines (runs that qualify, other items, other commands, unknown,
    repeated and earlier messages, numbers past the end), the answers are those it gets sending one
    command at a time."""
    together_runs: list[int] = []
    answer_together = selected._answer_together

    async def counted(s: Any, fetcher: fetch.Fetcher, run: list[Any]) -> bytes:
        together_runs.append(len(run))
        return await answer_together(s, fetcher, run)

    monkeypatch.setattr(selected, "_answer_together", counted)
    rng = random.Random(seed)
    items = [b"(UID)", b"(BODY.PEEK[])", b"(FLAGS RFC822.SIZE)", b"(BODY.PEEK[HEADER.FIELDS (SUBJECT)])"]
    last = len(sample)
    commands = [b"c%d %s %d %s" % (n, rng.choice([b"UID FETCH", b"UID FETCH", b"FETCH"]),
                                   rng.choice([*range(1, last + 1), last + 3]),
                                   rng.choice(items[:1] if n % 3 else items))
                for n in range(40)]
    await client.command(b"s SELECT INBOX")
    alone = b"".join([b"".join(await client.command(command)) for command in commands])
    await client.send(b"".join(command + b"\r\n" for command in commands) + b"z NOOP\r\n")
    together = await client.until(b"z")
    assert b"".join(together[:-1]) == alone
    assert together_runs  # some commands were answered together


async def test_a_fetch_with_anything_after_its_items_is_refused_every_time(
    client: Client, sample: list[bytes]
) -> None:
    """The parsed item lists kept for the next command hold only commands that parsed whole."""
    await client.command(b"s SELECT INBOX")
    for tag in (b"a", b"b"):
        lines = await client.command(tag + b" UID FETCH 1 (FLAGS) extra")
        assert lines[-1].startswith(tag + b" BAD"), lines


def _spied_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements of the mail index's reads (``fetch_tuples``) from now on."""
    queries: list[str] = []
    fetch_tuples = store.fetch_tuples

    async def spied(sql: str, params: Any = ()) -> Any:
        queries.append(sql)
        return await fetch_tuples(sql, params)

    monkeypatch.setattr(store, "fetch_tuples", spied)
    return queries


def _mail_columns_read(queries: list[str]) -> list[str]:
    """The column lists of the reads of ``mail`` among ``queries``."""
    return [m.group(1) for q in queries if (m := re.match(r"SELECT (.*) FROM mail\b", q))]


async def test_a_listing_reads_only_the_columns_it_answers_from(
    client: Client, sample: list[bytes], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails on a listing that read every message's file name, subdir and modseq (and NULLs for
    the cached parts it did not ask for): each column read costs more than making the row."""
    queries = _spied_reads(store, monkeypatch)
    await client.command(b"s SELECT INBOX")
    queries.clear()
    lines = await client.command(b"f UID FETCH 1:* (UID FLAGS RFC822.SIZE INTERNALDATE "
                                 b"BODY.PEEK[HEADER.FIELDS (FROM SUBJECT)])")
    assert lines[-1].startswith(b"f OK")
    assert sum(1 for line in lines if re.match(rb"\* \d+ FETCH ", line)) == len(sample)
    [columns] = _mail_columns_read(queries)
    assert columns.split(", ") == ["uid", "size", "internaldate", "flags", "headers"]


async def test_a_search_of_flags_reads_no_files_place(
    client: Client, sample: list[bytes], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search the index answers alone (K-9 lists a folder with ``UID SEARCH 1:* NOT DELETED``)
    reads neither the files' names nor their subdirs: fails on one that read whole entries (a
    quarter slower for 2,000 mails)."""
    queries = _spied_reads(store, monkeypatch)
    await client.command(b"s SELECT INBOX")
    await client.command(b"a STORE 1 +FLAGS.SILENT (\\Deleted)")
    queries.clear()
    lines = await client.command(b"f UID SEARCH 1:* NOT DELETED")
    assert lines[-1].startswith(b"f OK")
    assert lines[0] == b"* SEARCH " + b" ".join(b"%d" % uid for uid in range(2, len(sample) + 1)) + b"\r\n"
    [columns] = _mail_columns_read(queries)
    assert columns.split(", ") == ["uid", "size", "internaldate", "flags", "modseq"]


async def test_a_long_fetch_goes_out_batch_by_batch(
    client: Client, sample: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch is written as soon as it is made, so the client reads while the rest is made. Fails
    on a FETCH whose answer waited in the connection's buffer (256 KB) until the command's end."""
    monkeypatch.setattr(fetch, "_FIRST", 1)
    monkeypatch.setattr(fetch, "_BATCH", 2)
    written: list[int] = []
    flush = server_module.Connection.flush

    async def counted(self: server_module.Connection) -> None:
        written.append(len(re.findall(rb"\* \d+ FETCH ", bytes(self._out))))
        await flush(self)

    monkeypatch.setattr(server_module.Connection, "flush", counted)
    await client.command(b"s SELECT INBOX")
    written.clear()
    lines = await client.command(b"f FETCH 1:* (UID FLAGS)")
    assert lines[-1].startswith(b"f OK")
    batches = [1, *[2] * ((len(sample) - 1) // 2), *([1] if (len(sample) - 1) % 2 else [])]
    assert [n for n in written if n] == batches


@pytest.mark.parametrize("items", [b"BODY.PEEK[]", b"UID FLAGS"])
async def test_the_next_batchs_entries_are_read_early_unless_sqlite_reads_files_meanwhile(
    client: Client, sample: list[bytes], mailbox: Mailbox, store_backend: str, items: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On PostgreSQL the next batch's entries are read while this batch's files are read; on
    SQLite, whose reads run on the loop's thread and give up the GIL at every row, not beside
    the thread reading the files (it made a fetch of bodies a sixth slower). A listing reads
    no file."""
    monkeypatch.setattr(fetch, "_FIRST", 1)
    monkeypatch.setattr(fetch, "_BATCH", 2)
    events: list[str] = []
    entries, read_many = fetch.Fetcher._entries, Mailbox.read_many

    async def logged_entries(self: fetch.Fetcher, uids: list[int]) -> Any:
        events.append("entries")
        return await entries(self, uids)

    async def logged_reads(self: Mailbox, *args: Any, **kwargs: Any) -> Any:
        events.append("files")
        try:
            return await read_many(self, *args, **kwargs)
        finally:
            events.append("files read")

    monkeypatch.setattr(fetch.Fetcher, "_entries", logged_entries)
    monkeypatch.setattr(Mailbox, "read_many", logged_reads)
    await client.command(b"s SELECT INBOX")
    events.clear()
    lines = await client.command(b"f UID FETCH 1:* (" + items + b")")
    assert lines[-1].startswith(b"f OK") and events.count("entries") > 2
    early = any(a == "files" and b == "entries" for a, b in itertools.pairwise(events))
    assert early == (items == b"BODY.PEEK[]" and store_backend == "postgresql"), events
    if items != b"BODY.PEEK[]":
        assert "files" not in events and events[0] == "entries"


async def test_sequence_numbers_skip_a_message_expunged_meanwhile_inside_a_batch(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes]
) -> None:
    """A batch that is not a run of the client's numbering is numbered message by message."""
    one, two = await connect(server), await connect(server)
    try:
        await one.command(b"s SELECT INBOX")
        await two.command(b"s SELECT INBOX")
        await one.command(b"a STORE 2 +FLAGS.SILENT (\\Deleted)")
        await one.command(b"b EXPUNGE")
        assert await two.command(b"f FETCH 1:3 (UID)") == [
            b"* 1 FETCH (UID 1)\r\n", b"* 3 FETCH (UID 3)\r\n", b"f OK FETCH completed\r\n"]
    finally:
        await one.close()
        await two.close()


def test_date_times_are_each_date_s_internaldate() -> None:
    rng = random.Random(18)
    epochs = [0, 59, 60, 3599, 86_399, 86_400, 951_782_400, 1_764_979_200,
              *(rng.randrange(0, 4_102_444_800) for _ in range(500))]
    expected = []
    for epoch in epochs:
        t = time.gmtime(epoch)
        expected.append(b'"%2d-%s-%04d %02d:%02d:%02d +0000"' % (
            t.tm_mday, calendar.month_abbr[t.tm_mon].encode(), t.tm_year, t.tm_hour, t.tm_min, t.tm_sec))
    assert wire.date_times(epochs) == expected
    assert [wire.date_time(e) for e in epochs] == expected
    assert wire.date_times([]) == []


def test_picking_a_batch_gives_what_picking_each_gives() -> None:
    headers = [b"From: a@x\r\nTo: b@x\r\nCc: c@x\r\nSubject: s\r\n",
               b"Subject: only\r\n", b"", b"X-Other: o\r\nto: lower@x\r\nTO: again@x\r\n"]
    lines = [cache.header_lines(h) or b"" for h in headers]
    wanted = frozenset({b"to", b"subject"})
    assert cache.pick_each(wanted, lines) == [cache.header_fields(one, wanted) for one in lines]
    assert cache.pick_each(wanted, lines)[3] == b"to: lower@x\r\nTO: again@x\r\n\r\n"
