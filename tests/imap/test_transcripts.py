"""Transcripts over the in-memory mail index: command lines in, response lines out, with no socket,
no Maildir and no SQLite (the session talks to :class:`~pizzamail.mailbox.MailIndex` only).

Each transcript also runs over the Maildir mailbox ``serve`` uses: the two answer alike."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass, field

import pytest

from pizzamail.auth import Accounts
from pizzamail.guard import Gate, Visitor
from pizzamail.imap.commands import COMMANDS
from pizzamail.imap.session import Limits, Session, Shared
from pizzamail.mailbox import Folder, Mailbox, MailIndex, MailRow, Structures
from pizzamail.mailbox.memory import MemoryMailbox

ACCOUNTS = Accounts(user="me", password="pw", addresses=frozenset({"me@pizzamail.localhost"}))
DAY = 1_700_000_000  # 2023-11-14 22:13:20 UTC
MAILS = [
    b"From: ann@example.org\r\nSubject: lunch\r\n\r\npizza at noon\r\n",
    b"From: bob@example.org\r\nSubject: report\r\n\r\nthe numbers are in\r\n",
    b"From: ann@example.org\r\nSubject: again\r\n\r\nmore pizza\r\n",
]


@dataclass
class Wire:
    """The session's connection, in memory: what it sends is collected; what the client
    pipelined after the command said (``queued``) is there to be read."""

    visitor: Visitor
    secure: bool = False
    local: bool = True
    sent: bytearray = field(default_factory=bytearray)
    queued: list[bytes] = field(default_factory=list)

    async def send(self, data: bytes) -> None:
        self.sent += data

    async def flush(self) -> None:
        pass

    async def start_tls(self, context: object, handshake_timeout: float) -> None:
        raise AssertionError("no TLS in transcripts")

    async def read_line(self) -> bytes | None:
        return self.queued.pop(0) if self.queued else None

    def waiting_line(self) -> bytes | None:
        return self.queued[0] if self.queued else None


@dataclass
class Transcript:
    session: Session
    wire: Wire
    index: MailIndex

    async def say(self, line: bytes) -> list[bytes]:
        """The response lines to one command line."""
        self.wire.sent.clear()
        await self.session.handle(line + b"\r\n")
        return bytes(self.wire.sent).splitlines(keepends=True)


async def _inbox(index: MailIndex) -> Folder:
    folder = await index.folder("INBOX")
    assert folder is not None
    return folder


@pytest.fixture(params=["memory", "maildir"])
def index(request: pytest.FixtureRequest) -> MailIndex:
    if request.param == "memory":
        return MemoryMailbox.standard()
    mailbox: Mailbox = request.getfixturevalue("mailbox")
    return mailbox


@pytest.fixture
async def t(index: MailIndex) -> AsyncIterator[Transcript]:
    inbox = await _inbox(index)
    uids = [await index.deliver(inbox, mail, internaldate=DAY) for mail in MAILS]
    await index.set_flags(inbox, {uids[1]: {"\\Seen"}})
    await index.claim_recent(inbox, uids)  # an earlier session saw them
    gate = Gate()
    wire = Wire(visitor=gate.admit(lambda why: None))
    shared = Shared(mailbox=index, accounts=ACCOUNTS, limits=Limits(login_delay=0), gate=gate)
    transcript = Transcript(Session(shared, wire, COMMANDS), wire, index)
    assert (await transcript.say(b"a LOGIN me pw"))[-1].startswith(b"a OK")
    yield transcript
    gate.leave(wire.visitor)


async def test_select_reports_the_folder_from_the_index(t: Transcript) -> None:
    inbox = await _inbox(t.index)
    assert await t.say(b"s SELECT INBOX") == [
        b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)\r\n",
        b"* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags permitted.\r\n",
        b"* 3 EXISTS\r\n",
        b"* 0 RECENT\r\n",
        b"* OK [UNSEEN 1] First unseen.\r\n",
        b"* OK [UIDVALIDITY %d] UIDs valid\r\n" % inbox.uidvalidity,
        b"* OK [UIDNEXT 4] Predicted next UID\r\n",
        b"* OK [HIGHESTMODSEQ 5] Highest\r\n",
        b"s OK [READ-WRITE] SELECT completed\r\n",
    ]


async def test_fetch_renders_index_entries_and_bytes(t: Transcript) -> None:
    await t.say(b"s SELECT INBOX")
    assert await t.say(b"f FETCH 1:2 (UID FLAGS RFC822.SIZE INTERNALDATE)") == [
        b'* 1 FETCH (UID 1 FLAGS () RFC822.SIZE %d INTERNALDATE "14-Nov-2023 22:13:20 +0000")\r\n'
        % len(MAILS[0]),
        b'* 2 FETCH (UID 2 FLAGS (\\Seen) RFC822.SIZE %d INTERNALDATE "14-Nov-2023 22:13:20 +0000")\r\n'
        % len(MAILS[1]),
        b"f OK FETCH completed\r\n",
    ]
    assert await t.say(b"g UID FETCH 3 (BODY.PEEK[HEADER.FIELDS (SUBJECT)])") == [
        b"* 3 FETCH (UID 3 BODY[HEADER.FIELDS (SUBJECT)] {18}\r\n",
        b"Subject: again\r\n",
        b"\r\n",
        b")\r\n",
        b"g OK UID FETCH completed\r\n",
    ]


async def test_fetch_of_the_body_sets_seen_in_the_index(t: Transcript) -> None:
    await t.say(b"s SELECT INBOX")
    assert await t.say(b"f FETCH 1 (BODY[TEXT])") == [
        b"* 1 FETCH (BODY[TEXT] {15}\r\n", b"pizza at noon\r\n", b" FLAGS (\\Seen))\r\n",
        b"f OK FETCH completed\r\n",
    ]
    [first, *_] = await t.index.messages(await _inbox(t.index))
    assert first.flags == {"\\Seen"}


async def test_store_changes_flags_and_announces_them(t: Transcript) -> None:
    await t.say(b"s SELECT INBOX")
    assert await t.say(b"w STORE 1,3 +FLAGS (\\Flagged $Todo)") == [
        b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Todo)\r\n",
        b"* 1 FETCH (FLAGS (\\Flagged $Todo))\r\n",
        b"* 3 FETCH (FLAGS (\\Flagged $Todo))\r\n",
        b"w OK STORE completed\r\n",
    ]
    rows = await t.index.messages(await _inbox(t.index))
    assert [r.flags for r in rows] == [{"\\Flagged", "$Todo"}, {"\\Seen"}, {"\\Flagged", "$Todo"}]


async def test_search_by_flags_and_by_text(t: Transcript) -> None:
    await t.say(b"s SELECT INBOX")
    assert await t.say(b"a SEARCH UNSEEN") == [b"* SEARCH 1 3\r\n", b"a OK SEARCH completed\r\n"]
    assert await t.say(b"b UID SEARCH BODY pizza FROM ann") == [
        b"* SEARCH 1 3\r\n", b"b OK UID SEARCH completed\r\n"]
    assert await t.say(b"c SEARCH SEEN TEXT numbers") == [b"* SEARCH 2\r\n", b"c OK SEARCH completed\r\n"]


async def test_expunge_removes_deleted_mail(t: Transcript) -> None:
    await t.say(b"s SELECT INBOX")
    await t.say(b"d STORE 2 +FLAGS.SILENT (\\Deleted)")
    assert await t.say(b"e EXPUNGE") == [b"* 2 EXPUNGE\r\n", b"e OK EXPUNGE completed\r\n"]
    inbox = await _inbox(t.index)
    assert [r.uid for r in await t.index.messages(inbox)] == [1, 3]
    assert await t.index.expunged_since(inbox, 0) == [2]


async def test_move_takes_mail_to_another_folder(t: Transcript) -> None:
    archive = await t.index.folder("Archive")
    assert archive is not None
    await t.say(b"s SELECT INBOX")
    assert await t.say(b"m UID MOVE 1:2 Archive") == [
        b"* OK [COPYUID %d 1:2 1:2] Moved\r\n" % archive.uidvalidity,
        b"* 2 EXPUNGE\r\n",
        b"* 1 EXPUNGE\r\n",
        b"m OK UID MOVE completed\r\n",
    ]
    moved = await t.index.messages(archive)
    assert [await t.index.read(archive, r) for r in moved] == MAILS[:2]
    assert [r.flags for r in moved] == [frozenset(), {"\\Seen"}]
    assert await t.say(b"n FETCH 1 (UID)") == [b"* 1 FETCH (UID 3)\r\n", b"n OK FETCH completed\r\n"]


async def test_mail_delivered_elsewhere_reaches_the_session(t: Transcript) -> None:
    await t.say(b"s SELECT INBOX")
    await t.index.deliver(await _inbox(t.index), MAILS[0], internaldate=DAY)
    assert await t.say(b"n NOOP") == [b"* 4 EXISTS\r\n", b"* 1 RECENT\r\n", b"n OK NOOP completed\r\n"]


async def test_folders_are_made_listed_counted_renamed_and_deleted(t: Transcript) -> None:
    assert await t.say(b"c CREATE Work") == [b"c OK CREATE completed\r\n"]
    assert await t.say(b"c CREATE Work/2024") == [b"c OK CREATE completed\r\n"]
    await t.index.deliver(await _inbox(t.index), MAILS[0], internaldate=DAY)
    assert await t.say(b"s STATUS INBOX (MESSAGES UNSEEN RECENT UIDNEXT)") == [
        b"* STATUS INBOX (MESSAGES 4 UNSEEN 3 RECENT 1 UIDNEXT 5)\r\n", b"s OK STATUS completed\r\n"]
    assert await t.say(b"r RENAME Work Play") == [b"r OK RENAME completed\r\n"]
    assert await t.say(b'l LIST "" "Play*"') == [
        b'* LIST (\\HasChildren) "/" Play\r\n', b'* LIST (\\HasNoChildren) "/" Play/2024\r\n',
        b"l OK LIST completed\r\n"]
    assert await t.say(b"d DELETE Play/2024") == [b"d OK DELETE completed\r\n"]
    assert await t.say(b'l LIST "" "Play*"') == [
        b'* LIST (\\HasNoChildren) "/" Play\r\n', b"l OK LIST completed\r\n"]


async def test_fetch_and_search_read_files_a_batch_at_a_time(
    t: Transcript, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = await _inbox(t.index)
    for _ in range(297):
        await t.index.deliver(inbox, MAILS[0], internaldate=DAY)
    reads: list[int] = []
    read_many = t.index.read_many

    async def counted(
        folder: Folder, rows: Sequence[MailRow], *, header_only: bool = False
    ) -> list[bytes | None]:
        reads.append(len(rows))
        return await read_many(folder, rows, header_only=header_only)

    monkeypatch.setattr(t.index, "read_many", counted)
    await t.say(b"s SELECT INBOX")
    lines = await t.say(b"f FETCH 1:* (BODY.PEEK[HEADER])")  # not cached: from the files
    assert sum(line.startswith(b"* ") for line in lines) == 300
    assert await t.say(b"g SEARCH SEEN BODY numbers") == [b"* SEARCH 2\r\n", b"g OK SEARCH completed\r\n"]
    # one trip per batch (a short first one, then 256 each); SEARCH reads only the one that is \Seen
    assert reads == [32, 256, 12, 1]


async def test_pipelined_fetches_of_one_message_each_are_answered_together_in_order(t: Transcript) -> None:
    """mbsync pulls a folder with one FETCH a message, pipelined: those here already are answered
    with the first, each tagged answer right after its own message; what follows stays unread."""
    await t.say(b"s SELECT INBOX")
    t.wire.queued = [b"b UID FETCH 2 (RFC822.SIZE)\r\n", b"c UID FETCH 3 (RFC822.SIZE)\r\n", b"d NOOP\r\n"]
    assert await t.say(b"a UID FETCH 1 (RFC822.SIZE)") == [
        b"* 1 FETCH (UID 1 RFC822.SIZE %d)\r\n" % len(MAILS[0]), b"a OK UID FETCH completed\r\n",
        b"* 2 FETCH (UID 2 RFC822.SIZE %d)\r\n" % len(MAILS[1]), b"b OK UID FETCH completed\r\n",
        b"* 3 FETCH (UID 3 RFC822.SIZE %d)\r\n" % len(MAILS[2]), b"c OK UID FETCH completed\r\n",
    ]
    assert t.wire.queued == [b"d NOOP\r\n"]


@pytest.mark.parametrize("after", [
    b"b UID FETCH 2 (FLAGS)\r\n",  # other items
    b"b FETCH 2 (UID)\r\n",  # not the same command
    b"b UID FETCH 2:3 (UID)\r\n",  # more than one message
    b"b UID FETCH 9 (UID)\r\n",  # no such message
    b"b UID FETCH 1 (UID)\r\n",  # not later in the folder
    b"b UID FETCH 2 (UID\r\n",  # malformed
])
async def test_a_pipelined_command_unlike_the_run_is_left_for_its_turn(t: Transcript, after: bytes) -> None:
    await t.say(b"s SELECT INBOX")
    t.wire.queued = [after]
    assert await t.say(b"a UID FETCH 1 (UID)") == [b"* 1 FETCH (UID 1)\r\n", b"a OK UID FETCH completed\r\n"]
    assert t.wire.queued == [after]


async def test_a_message_gone_from_a_pipelined_run_still_has_its_command_answered(
    t: Transcript, monkeypatch: pytest.MonkeyPatch,
) -> None:
    await t.say(b"s SELECT INBOX")
    cached_rows = t.index.cached_rows

    async def without_2(
        folder: Folder, uids: Sequence[int], wanted: Collection[str],
    ) -> dict[int, tuple[MailRow, Structures]]:
        return {u: entry for u, entry in (await cached_rows(folder, uids, wanted)).items() if u != 2}

    # expunged by another process between the commands' reading and the index's
    monkeypatch.setattr(t.index, "cached_rows", without_2)
    t.wire.queued = [b"b FETCH 2 (UID)\r\n", b"c FETCH 3 (UID)\r\n"]
    assert await t.say(b"a FETCH 1 (UID)") == [
        b"* 1 FETCH (UID 1)\r\n", b"a OK FETCH completed\r\n",
        b"b OK FETCH completed\r\n",
        b"* 3 FETCH (UID 3)\r\n", b"c OK FETCH completed\r\n",
    ]


async def test_a_pipelined_run_that_fails_answers_every_command_with_no(
    t: Transcript, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    await t.say(b"s SELECT INBOX")

    async def broken(*_: object, **__: object) -> list[bytes | None]:
        raise RuntimeError("disk gone")

    monkeypatch.setattr(t.index, "read_many", broken)
    t.wire.queued = [b"b UID FETCH 2 (BODY.PEEK[])\r\n", b"c UID FETCH 3 (BODY.PEEK[])\r\n"]
    assert await t.say(b"a UID FETCH 1 (BODY.PEEK[])") == [
        b"%s NO [SERVERBUG] Internal error, see the pizzamail log\r\n" % tag for tag in (b"a", b"b", b"c")
    ]
    assert t.wire.queued == []
    assert [r.message for r in caplog.records if r.levelname == "ERROR"] == ["IMAP command UID FETCH failed"]
