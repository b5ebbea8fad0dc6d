"""CONDSTORE and QRESYNC (RFC 7162) transcripts. The sample INBOX is delivered into a new folder
(modseq 1), so message n arrives with modseq n + 1 and the folder stands at 10."""

from __future__ import annotations

from imaptools import Client, connect

from pizzamail.imap import ImapServer
from pizzamail.mailbox import Mailbox


async def uidvalidity(mailbox: Mailbox) -> int:
    folder = await mailbox.folder("INBOX")
    assert folder is not None
    return folder.uidvalidity


async def test_enable_select_fetch_modseq(client: Client, sample: list[bytes]) -> None:
    assert await client.command(b"e ENABLE CONDSTORE X-UNKNOWN") == [
        b"* ENABLED CONDSTORE\r\n", b"e OK ENABLE completed\r\n"]
    assert await client.command(b"f ENABLE CONDSTORE") == [b"* ENABLED\r\n", b"f OK ENABLE completed\r\n"]
    lines = await client.command(b"s SELECT INBOX")
    assert lines[-2:] == [b"* OK [HIGHESTMODSEQ 10] Highest\r\n", b"s OK [READ-WRITE] SELECT completed\r\n"]
    assert await client.command(b"a FETCH 1:2 (FLAGS MODSEQ)") == [
        b"* 1 FETCH (FLAGS (\\Seen) MODSEQ (2))\r\n",
        b"* 2 FETCH (FLAGS (\\Seen) MODSEQ (3))\r\n",
        b"a OK FETCH completed\r\n",
    ]
    assert await client.command(b"b STORE 1 +FLAGS (\\Flagged)") == [
        b"* 1 FETCH (FLAGS (\\Flagged \\Seen) MODSEQ (11))\r\n", b"b OK STORE completed\r\n"]
    assert await client.command(b"c UID FETCH 1:* (FLAGS) (CHANGEDSINCE 10)") == [
        b"* 1 FETCH (UID 1 FLAGS (\\Flagged \\Seen) MODSEQ (11))\r\n", b"c OK UID FETCH completed\r\n"]
    assert await client.command(b"d FETCH 5 BODY.PEEK[HEADER.FIELDS (X-NONE)] (CHANGEDSINCE 11)") == [
        b"d OK FETCH completed\r\n"]
    # Reading a message sets \Seen: the response carries the new modseq along with the flags.
    assert await client.command(b"g FETCH 5 (BODY[HEADER.FIELDS (X-NONE)])") == [
        b"* 5 FETCH (BODY[HEADER.FIELDS (X-NONE)] {2}\r\n", b"\r\n",
        b" FLAGS (\\Seen) MODSEQ (12))\r\n", b"g OK FETCH completed\r\n"]


async def test_fetch_that_sets_seen_and_asks_for_flags_carries_modseq(
    client: Client, sample: list[bytes]
) -> None:
    """RFC 7162 §3.2.4 (found by IMAPClient's live tests): a FETCH that changes flags reports the
    new MODSEQ, also when the client asked for FLAGS itself."""
    await client.command(b"e ENABLE CONDSTORE")
    await client.command(b"s SELECT INBOX")
    assert await client.command(b"a FETCH 5 (FLAGS BODY[HEADER.FIELDS (X-NONE)])") == [
        b"* 5 FETCH (FLAGS (\\Seen) BODY[HEADER.FIELDS (X-NONE)] {2}\r\n", b"\r\n",
        b" MODSEQ (11))\r\n", b"a OK FETCH completed\r\n"]
    # Nothing changed this time: no MODSEQ unless asked for.
    assert await client.command(b"b FETCH 5 (FLAGS BODY[HEADER.FIELDS (X-NONE)])") == [
        b"* 5 FETCH (FLAGS (\\Seen) BODY[HEADER.FIELDS (X-NONE)] {2}\r\n", b"\r\n",
        b")\r\n", b"b OK FETCH completed\r\n"]


async def test_conditional_store(client: Client, sample: list[bytes]) -> None:
    await client.command(b"s SELECT INBOX (CONDSTORE)")
    await client.command(b"a STORE 1 +FLAGS.SILENT (\\Flagged)")  # message 1 now at modseq 11
    assert await client.command(b"b STORE 1,2 (UNCHANGEDSINCE 10) +FLAGS.SILENT (\\Answered)") == [
        b"* 2 FETCH (MODSEQ (12))\r\n", b"b OK [MODIFIED 1] STORE completed\r\n"]
    assert await client.command(b"c UID STORE 1:3 (UNCHANGEDSINCE 11) FLAGS (\\Seen)") == [
        b"* 1 FETCH (FLAGS (\\Seen) UID 1 MODSEQ (13))\r\n",
        b"* 3 FETCH (FLAGS (\\Seen) UID 3 MODSEQ (13))\r\n",
        b"c OK [MODIFIED 2] UID STORE completed\r\n",
    ]
    assert await client.command(b"d STORE 4 (UNCHANGEDSINCE 0) -FLAGS (\\Flagged)") == [
        b"d OK [MODIFIED 4] STORE completed\r\n"]
    assert await client.command(b"e SEARCH MODSEQ 12") == [
        b"* SEARCH 1 2 3 (MODSEQ 13)\r\n", b"e OK SEARCH completed\r\n"]
    assert await client.command(b'f UID SEARCH MODSEQ "/flags/\\\\answered" all 12 ANSWERED') == [
        b"* SEARCH 2 (MODSEQ 12)\r\n", b"f OK UID SEARCH completed\r\n"]
    assert await client.command(b"g SEARCH MODSEQ 100") == [b"* SEARCH\r\n", b"g OK SEARCH completed\r\n"]
    assert await client.command(b"h STATUS INBOX (HIGHESTMODSEQ MESSAGES)") == [
        b"* STATUS INBOX (HIGHESTMODSEQ 13 MESSAGES 9)\r\n", b"h OK STATUS completed\r\n"]
    await client.command(b"i STORE 9 +FLAGS.SILENT (\\Deleted)")
    assert await client.command(b"j EXPUNGE") == [
        b"* 9 EXPUNGE\r\n", b"j OK [HIGHESTMODSEQ 15] EXPUNGE completed\r\n"]


async def test_enabling_command_in_selected_state_reports_highestmodseq(
    client: Client, sample: list[bytes]
) -> None:
    await client.command(b"s SELECT INBOX")
    assert await client.command(b"a FETCH 3 (UID MODSEQ)") == [
        b"* OK [HIGHESTMODSEQ 10] Highest\r\n",
        b"* 3 FETCH (UID 3 MODSEQ (4))\r\n",
        b"a OK FETCH completed\r\n",
    ]
    assert await client.command(b"b FETCH 3 (MODSEQ)") == [
        b"* 3 FETCH (MODSEQ (4))\r\n", b"b OK FETCH completed\r\n"]


async def test_flag_changes_reach_a_condstore_session_with_modseq(
    server: ImapServer, sample: list[bytes]
) -> None:
    one, two = await connect(server), await connect(server)
    try:
        await one.command(b"s SELECT INBOX")
        await two.command(b"s SELECT INBOX (CONDSTORE)")
        await one.command(b"a STORE 3 +FLAGS.SILENT ($Todo)")
        assert await two.command(b"n NOOP") == [
            b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Todo)\r\n",
            b"* 3 FETCH (FLAGS (\\Answered \\Seen $Todo) MODSEQ (11))\r\n",
            b"n OK NOOP completed\r\n",
        ]
        await two.send(b"i IDLE\r\n")
        assert await two.line() == b"+ idling\r\n"
        await one.command(b"b STORE 3 -FLAGS.SILENT ($Todo)")
        assert await two.line() == b"* 3 FETCH (FLAGS (\\Answered \\Seen) MODSEQ (12))\r\n"
        await two.send(b"DONE\r\n")
        assert await two.line() == b"i OK IDLE terminated\r\n"
    finally:
        await one.close()
        await two.close()


async def test_condstore_syntax_errors(client: Client, sample: list[bytes]) -> None:
    await client.command(b"s SELECT INBOX")
    assert await client.command(b"a FETCH 1 FLAGS (CHANGEDSINCE 0)") == [
        b"a BAD expected a mod-sequence (at byte 31)\r\n"]
    assert await client.command(b"b FETCH 1 FLAGS (CHANGEDSINCE 1 VANISHED)") == [
        b"b BAD VANISHED needs UID FETCH and ENABLE QRESYNC\r\n"]
    assert await client.command(b"c SELECT INBOX (FOO)") == [
        b"c BAD unknown SELECT parameter FOO (at byte 19)\r\n"]
    assert await client.command(b"d SELECT INBOX (QRESYNC (1 1))") == [
        b"d BAD ENABLE QRESYNC before using it in SELECT\r\n"]


# -- QRESYNC ----------------------------------------------------------------------------------


async def test_qresync_select_reports_changes_and_vanished(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes]
) -> None:
    v = await uidvalidity(mailbox)
    one = await connect(server)
    await one.command(b"s SELECT INBOX")
    await one.command(b"a STORE 2,4 +FLAGS.SILENT (\\Deleted)")  # modseq 11
    await one.command(b"b EXPUNGE")  # modseq 12
    await one.command(b"c UID STORE 6 +FLAGS.SILENT (\\Flagged)")  # modseq 13
    await one.close()
    two = await connect(server)
    try:
        assert await two.command(b"e ENABLE QRESYNC") == [
            b"* ENABLED QRESYNC\r\n", b"e OK ENABLE completed\r\n"]
        lines = await two.command(b"s SELECT INBOX (QRESYNC (%d 10 1:9))" % v)
        assert lines[-4:] == [
            b"* OK [HIGHESTMODSEQ 13] Highest\r\n",
            b"* 4 FETCH (FLAGS (\\Flagged) UID 6 MODSEQ (13))\r\n",
            b"* VANISHED (EARLIER) 2,4\r\n",
            b"s OK [READ-WRITE] SELECT completed\r\n",
        ]
        lines = await two.command(b"t SELECT INBOX (QRESYNC (%d 12 3:9))" % v)
        assert lines[0] == b"* OK [CLOSED] Previous mailbox closed\r\n"
        assert lines[-3:] == [
            b"* OK [HIGHESTMODSEQ 13] Highest\r\n",
            b"* 4 FETCH (FLAGS (\\Flagged) UID 6 MODSEQ (13))\r\n",
            b"t OK [READ-WRITE] SELECT completed\r\n",
        ]
        lines = await two.command(b"u SELECT INBOX (QRESYNC (%d 10))" % (v + 1))  # stale UIDVALIDITY
        assert lines[-2:] == [
            b"* OK [HIGHESTMODSEQ 13] Highest\r\n", b"u OK [READ-WRITE] SELECT completed\r\n"]
        assert await two.command(b"f UID FETCH 1:* (FLAGS) (CHANGEDSINCE 11 VANISHED)") == [
            b"* VANISHED (EARLIER) 2,4\r\n",
            b"* 4 FETCH (UID 6 FLAGS (\\Flagged) MODSEQ (13))\r\n",
            b"f OK UID FETCH completed\r\n",
        ]
        assert await two.command(b"g UID FETCH 3:5 (FLAGS) (CHANGEDSINCE 11 VANISHED)") == [
            b"* VANISHED (EARLIER) 4\r\n", b"g OK UID FETCH completed\r\n"]
    finally:
        await two.close()


async def test_qresync_session_gets_vanished_instead_of_expunge(
    server: ImapServer, sample: list[bytes]
) -> None:
    one, two = await connect(server), await connect(server)
    try:
        await one.command(b"s SELECT INBOX")
        await two.command(b"e ENABLE QRESYNC")
        await two.command(b"s SELECT INBOX")
        await one.command(b"a STORE 3,5:6 +FLAGS.SILENT (\\Deleted)")
        await one.command(b"b EXPUNGE")
        assert await two.command(b"n NOOP") == [
            b"* VANISHED 3,5:6\r\n",
            b"n OK NOOP completed\r\n",
        ]
        # Flag updates carry the UID too once QRESYNC is on.
        await one.command(b"c STORE 1 +FLAGS.SILENT (\\Flagged)")
        assert await two.command(b"o NOOP") == [
            b"* 1 FETCH (FLAGS (\\Flagged \\Seen) UID 1 MODSEQ (13))\r\n", b"o OK NOOP completed\r\n"]
        await two.command(b"p STORE 1 +FLAGS.SILENT (\\Deleted)")
        assert await two.command(b"q EXPUNGE") == [
            b"* VANISHED 1\r\n", b"q OK [HIGHESTMODSEQ 15] EXPUNGE completed\r\n"]
        assert await two.command(b"r FETCH 1 UID") == [b"* 1 FETCH (UID 2)\r\n", b"r OK FETCH completed\r\n"]
    finally:
        await one.close()
        await two.close()


async def test_expunges_are_remembered_with_their_modseq(mailbox: Mailbox, sample: list[bytes]) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    assert await mailbox.expunge(inbox, [3, 5]) == [3, 5]
    await mailbox.expunge(inbox, [7])
    assert await mailbox.expunged_since(inbox, 10) == [3, 5, 7]
    assert await mailbox.expunged_since(inbox, 11) == [7]
    assert await mailbox.expunged_since(inbox, 12) == []
