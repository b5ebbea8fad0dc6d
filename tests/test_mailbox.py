"""The Maildir++ mailbox and its index: delivery, flags, expunge, reconciliation, filing."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pizzamail.home import Home
from pizzamail.mailbox import STANDARD_FOLDERS, Mailbox, maildir, message_base
from pizzamail.mailbox.filing import created_stamp, file_pending
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.threads import NewMessage, add_message, create_thread

MAIL = b"From: a@example.org\nSubject: hi\n\nbody\n"
T = TypeVar("T")


async def test_standard_folders_exist_on_disk(mailbox: Mailbox, home: Home) -> None:
    names = [f.name for f in await mailbox.folders()]
    assert names == list(STANDARD_FOLDERS)
    assert (home.maildir / "new").is_dir()
    assert (home.maildir / ".Sent" / "maildirfolder").exists()
    sent = await mailbox.folder("Sent")
    assert sent is not None and sent.special_use == "\\Sent"


async def test_deliver_is_atomic_crlf_and_assigns_increasing_uids(mailbox: Mailbox) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    uids = [await mailbox.deliver(inbox, MAIL) for _ in range(3)]
    assert uids == [1, 2, 3]
    rows = await mailbox.messages(inbox)
    assert await mailbox.read(inbox, rows[0]) == MAIL.replace(b"\n", b"\r\n")
    assert rows[0].size == len(MAIL.replace(b"\n", b"\r\n"))
    assert os.listdir(mailbox.path(inbox) / "tmp") == []


@pytest.mark.parametrize(("sent", "filed"), [
    (b"Subject: lf\n\nbody\n", b"Subject: lf\r\n\r\nbody\r\n"),
    (b"Subject: cr\r\rbody\r", b"Subject: cr\r\n\r\nbody\r\n"),  # old Mac line ends
    (b"Subject: crcrlf\r\r\nbody\r\n", b"Subject: crcrlf\r\n\r\nbody\r\n"),  # as the parser reads it
    (b"Subject: crlf\r\n\r\nbody\r\n", b"Subject: crlf\r\n\r\nbody\r\n"),
    (b"Subject: mixed\r\n\nbody\n\r", b"Subject: mixed\r\n\r\nbody\r\n\r\n"),
])
async def test_every_line_end_is_filed_as_crlf(mailbox: Mailbox, sent: bytes, filed: bytes) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    await mailbox.deliver(inbox, sent)
    [row] = await mailbox.messages(inbox)
    assert await mailbox.read(inbox, row) == filed


def test_every_short_mix_of_line_ends_is_made_wire_form_as_the_parser_reads_it() -> None:
    """The shortcuts for mail already in wire form and for mail without a CR against the one rule
    (a lone CR or LF ends a line), over every text of up to 7 characters of a, CR and LF."""
    texts = [b""]
    for length in range(7):  # the texts one character longer than the 3 ** length last made
        texts += [text + c for text in texts[-3 ** length:] for c in (b"a", b"\r", b"\n")]
    assert len(texts) == sum(3 ** n for n in range(8))
    for text in texts:
        lines = text.replace(b"\r\n", b"\0").replace(b"\r", b"\0").replace(b"\n", b"\0")
        assert maildir.to_crlf(text) == lines.replace(b"\0", b"\r\n"), text


async def test_flags_rename_file_and_keywords_persist(mailbox: Mailbox) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    uid = await mailbox.deliver(inbox, MAIL)
    await mailbox.set_flags(inbox, {uid: {"\\Seen", "\\Flagged", "$Label1"}})
    [row] = await mailbox.messages(inbox)
    assert row.flags == {"\\Seen", "\\Flagged", "$Label1"}
    assert mailbox.file_path(inbox, row).name.endswith(":2,FS")
    assert mailbox.file_path(inbox, row).parent.name == "cur"


async def test_change_event_fires_on_delivery(mailbox: Mailbox) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    event = mailbox.change_event(inbox)
    assert not event.is_set()
    await mailbox.deliver(inbox, MAIL)
    assert event.is_set()


async def test_reconcile_picks_up_external_changes(mailbox: Mailbox) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    keep = await mailbox.deliver(inbox, MAIL)
    gone = await mailbox.deliver(inbox, MAIL)
    rows = {r.uid: r for r in await mailbox.messages(inbox)}
    mailbox.file_path(inbox, rows[gone]).unlink()
    src = mailbox.file_path(inbox, rows[keep])
    os.rename(src, mailbox.path(inbox) / "cur" / (rows[keep].name + ":2,S"))
    (mailbox.path(inbox) / "new" / "1700000000.external.host").write_bytes(MAIL)
    assert await mailbox.reconcile(inbox) == (1, 1)
    after = {r.uid: r for r in await mailbox.messages(inbox)}
    assert set(after) == {keep, 3}
    assert after[keep].flags == {"\\Seen"}


async def test_filing_is_idempotent(mailbox: Mailbox, blobs: BlobStore) -> None:
    digest = (await blobs.save(MAIL)).digest
    async with mailbox.store.write() as db:
        thread = await create_thread(db, subject="hi", agent="bot@x")
        await add_message(db, thread, NewMessage(
            message_id="m1@x", in_reply_to=None, refs=[], direction="in", kind="task",
            sender="a@example.org", subject="hi", body="body", blob=digest, size=len(MAIL),
            flags="\\Seen",
        ))
    assert await file_pending(mailbox, blobs) == 1
    assert await file_pending(mailbox, blobs) == 0
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    [row] = await mailbox.messages(inbox)
    assert row.flags == {"\\Seen"}


async def test_a_cancelled_write_leaves_the_store_usable(mailbox: Mailbox) -> None:
    store = mailbox.store
    started = asyncio.Event()

    async def slow_write() -> None:
        async with store.write() as db:
            await db.execute("INSERT INTO events(at, kind) VALUES ('now', 'x')")
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(slow_write())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with store.write() as db:
        await db.execute("INSERT INTO events(at, kind) VALUES ('now', 'y')")
    rows = await store.fetchall("SELECT kind FROM events")
    assert [r["kind"] for r in rows] == ["y"]


async def test_read_header_stops_after_the_header_even_when_it_is_long(mailbox: Mailbox) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    header = b"".join(b"X-Trace-%d: %s\r\n" % (n, b"v" * 70) for n in range(300))  # ~25 KB
    body = b"attachment-bytes " * 20_000
    uid = await mailbox.deliver(inbox, header + b"\r\n" + body)
    [row] = [r for r in await mailbox.messages(inbox) if r.uid == uid]
    [head] = await mailbox.read_many(inbox, [row], header_only=True)
    assert head is not None
    assert head.startswith(header + b"\r\n")
    assert len(head) < len(header) + 2 + 8192


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 200_000])
@pytest.mark.parametrize("indexed", ["exact", "smaller", "larger"])
def test_a_file_is_read_whole_whatever_size_its_index_expects(
    tmp_path: Path, size: int, indexed: str
) -> None:
    """Read in one call of the expected size: a file that grew since (a larger one in its place)
    is still read to its end, a shorter one as it is (the caller sees it is short), a gone one is
    None."""
    data = os.urandom(size)
    path = tmp_path / "m"
    path.write_bytes(data)
    expected = {"exact": size, "smaller": max(size // 3, 0), "larger": size * 2 + 5}[indexed]
    assert maildir.read_files([str(path), str(tmp_path / "gone")], [expected, expected]) == [data, None]


async def test_a_file_written_before_a_crash_is_indexed_not_written_again(mailbox: Mailbox) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    # the crash came between the rename into cur/ and the index commit
    maildir.write_all(mailbox.path(inbox), [("1700000000.P0Q7.pizzamail", MAIL, 1700000000, {"\\Seen"})])
    uid = await mailbox.deliver(inbox, MAIL, flags={"\\Seen"}, base="1700000000.P0Q7.pizzamail")
    [row] = await mailbox.messages(inbox)
    assert (row.uid, row.subdir, row.flags) == (uid, "cur", {"\\Seen"})
    assert len(os.listdir(mailbox.path(inbox) / "cur")) == 1


async def test_a_named_delivery_looks_for_a_crash_s_file_in_the_trip_that_writes(
    mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filing (every task and reply on its way to IDLE) delivers under a name: the look for a file
    a crash left and the write are one hop to a worker thread, not two."""
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    real, trips = asyncio.to_thread, []

    async def counted(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        trips.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    await mailbox.deliver(inbox, MAIL, base="1700000001.P0Q8.pizzamail")
    assert len(trips) == 1
    assert len(os.listdir(mailbox.path(inbox) / "new")) == 1


async def test_a_folder_made_again_never_gets_an_old_uidvalidity(mailbox: Mailbox) -> None:
    given = set()
    for _ in range(3):  # within one second: the clock alone would repeat the newest value
        folder = await mailbox.create_folder("Work")
        assert folder.uidvalidity not in given
        given.add(folder.uidvalidity)
        await mailbox.delete_folder(folder)


async def test_a_message_whose_file_was_renamed_before_a_crash_is_filed_once_at_the_next_start(
    mailbox: Mailbox, home: Home, store: Store, blobs: BlobStore
) -> None:
    digest = (await blobs.save(MAIL)).digest
    async with store.write() as db:
        thread = await create_thread(db, subject="hi", agent="bot@x")
        row = await add_message(db, thread, NewMessage(
            message_id="m1@x", in_reply_to=None, refs=[], direction="in", kind="task",
            sender="a@example.org", subject="hi", body="body", blob=digest, size=len(MAIL)))
    created = await store.fetchone("SELECT created_at FROM messages WHERE id = ?", (row,))
    assert created is not None
    base = message_base(row, created_stamp(created["created_at"]))
    # the crash came after the rename into new/ and before the index commit
    maildir.write_all(home.maildir, [(base, maildir.to_crlf(MAIL), 1700000000, set())])

    for started in range(3):  # the next start, and the starts after it
        mailbox = await Mailbox(root=home.maildir, store=store).open()  # open() reconciles
        assert await file_pending(mailbox, blobs) == (1 if started == 0 else 0)
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    assert os.listdir(home.maildir / "new") == [base]
    indexed = await store.fetchall("SELECT name, message_ref FROM mail WHERE folder_id = ?", (inbox.id,))
    assert [tuple(r) for r in indexed] == [(base, row)]


def _held(real: Callable[..., T], entered: threading.Event, release: threading.Event) -> Callable[..., T]:
    """``real``, made to wait until the test releases it: on the event loop's thread it would
    stop the loop, so the release never came and the wait ran out."""
    def held(*args: Any) -> T:
        entered.set()
        if not release.wait(timeout=5):
            raise TimeoutError("the event loop stopped while the file work ran")
        return real(*args)
    return held


async def test_the_atomic_write_runs_off_the_event_loop(
    mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    entered, release = threading.Event(), threading.Event()
    monkeypatch.setattr(maildir, "write_all", _held(maildir.write_all, entered, release))
    delivery = asyncio.create_task(mailbox.deliver(inbox, MAIL))
    assert await asyncio.to_thread(entered.wait, 5)  # the loop runs on while the file is written
    release.set()
    assert await delivery == 1
    assert [r.subdir for r in await mailbox.messages(inbox)] == ["new"]


async def test_a_move_cancelled_during_its_renames_still_commits_them(
    mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, archive = await mailbox.folder("INBOX"), await mailbox.folder("Archive")
    assert inbox is not None and archive is not None
    uids = [await mailbox.deliver(inbox, MAIL) for _ in range(2)]
    entered, release = threading.Event(), threading.Event()
    monkeypatch.setattr(Mailbox, "_rename_all", _held(Mailbox._rename_all, entered, release))
    moving = asyncio.create_task(mailbox.move(inbox, uids, archive))
    assert await asyncio.to_thread(entered.wait, 5)
    moving.cancel()  # e.g. serve stopping: the files are being renamed in the worker thread
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await moving
    assert await mailbox.messages(inbox) == []
    moved = await mailbox.messages(archive)
    assert [await mailbox.read(archive, r) for r in moved] == [maildir.to_crlf(MAIL)] * 2
    assert await mailbox.reconcile(inbox) == (0, 0) and await mailbox.reconcile(archive) == (0, 0)


async def test_a_standby_serve_opens_the_mailbox_without_touching_the_index(
    mailbox: Mailbox, home: Home, store: Store, tmp_path: Path
) -> None:
    """Another serve on the same database keeps the index: a standby whose Maildir lacks the
    leader's files must not drop the leader's mail (nor index files of its own)."""
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    await mailbox.deliver(inbox, MAIL)
    elsewhere = tmp_path / "standby-maildir"
    standby = await Mailbox(root=elsewhere, store=store).open(reconcile=False)
    assert [r.uid for r in await standby.messages(inbox)] == [1]
    assert (elsewhere / "new").is_dir()  # its folders exist, for its IMAP server to serve
    await Mailbox(root=elsewhere, store=store).open()  # a leader reconciles: the files it lacks go
    assert await mailbox.messages(inbox) == []
