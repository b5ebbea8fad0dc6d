"""Session transcripts against a live server on loopback: exact client bytes in, exact server
bytes out (the habit of pymap's test_fetch.py)."""

from __future__ import annotations

import base64

from imaptools import Client, connect

from pizzamail.imap import ImapServer
from pizzamail.mailbox import Mailbox

CAPS_BEFORE = b"IMAP4rev1 SASL-IR LITERAL+ ID ENABLE IDLE AUTH=PLAIN AUTH=LOGIN"
CAPS_AFTER = (b"IMAP4rev1 SASL-IR LITERAL+ ID ENABLE IDLE NAMESPACE UNSELECT UIDPLUS MOVE CHILDREN"
              b" SPECIAL-USE CONDSTORE QRESYNC LIST-EXTENDED LIST-STATUS BINARY")


async def uidvalidity(mailbox: Mailbox, name: str = "INBOX") -> int:
    folder = await mailbox.folder(name)
    assert folder is not None
    return folder.uidvalidity


async def test_greeting_capability_and_login(server: ImapServer) -> None:
    c = await connect(server, login=False)
    try:
        assert await c.command(b"a CAPABILITY") == [
            b"* CAPABILITY " + CAPS_BEFORE + b"\r\n",
            b"a OK CAPABILITY completed\r\n",
        ]
        assert await c.command(b"b LOGIN me wrong") == [
            b"b NO [AUTHENTICATIONFAILED] Authentication failed.\r\n"]
        assert await c.command(b"c LOGIN me pw") == [b"c OK [CAPABILITY " + CAPS_AFTER + b"] Logged in\r\n"]
        assert await c.command(b"d LOGIN me pw") == [
            b"d BAD LOGIN is not allowed in the authenticated state\r\n"]
    finally:
        await c.close()


async def test_greeting_bytes(server: ImapServer) -> None:
    c = await connect(server, login=False)
    await c.close()
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    greeting = await reader.readuntil(b"\n")
    writer.close()
    await writer.wait_closed()
    assert greeting == b"* OK [CAPABILITY " + CAPS_BEFORE + b"] pizzamail ready\r\n"


async def test_nothing_is_visible_without_login(server: ImapServer, sample: list[bytes]) -> None:
    c = await connect(server, login=False)
    try:
        for command in (b"a SELECT INBOX", b"a EXAMINE INBOX", b'a LIST "" *', b"a STATUS INBOX (MESSAGES)",
                        b"a FETCH 1 BODY[]", b"a UID SEARCH ALL", b"a APPEND INBOX {1+}\r\nx", b"a IDLE"):
            lines = await c.command(command)
            assert len(lines) == 1 and lines[0].startswith(b"a BAD "), (command, lines)
            assert b"not allowed in the not authenticated state" in lines[0]
    finally:
        await c.close()


async def test_too_many_failed_logins_end_the_connection(server: ImapServer) -> None:
    c = await connect(server, login=False)
    assert await c.command(b"1 LOGIN me x") == [b"1 NO [AUTHENTICATIONFAILED] Authentication failed.\r\n"]
    await c.command(b"2 LOGIN me y")
    await c.send(b"3 LOGIN me z\r\n")
    assert await c.line() == b"* BYE Too many failed logins\r\n"
    assert await c.line() == b"3 NO [AUTHENTICATIONFAILED] Authentication failed.\r\n"
    assert await c.reader.read() == b""
    await c.close()


async def test_authenticate_plain_with_initial_response_and_continuation(server: ImapServer) -> None:
    token = base64.b64encode(b"\x00me\x00pw")
    c = await connect(server, login=False)
    assert (await c.command(b"a AUTHENTICATE PLAIN " + token))[-1].startswith(b"a OK [CAPABILITY")
    await c.close()
    c = await connect(server, login=False)
    await c.send(b"b AUTHENTICATE PLAIN\r\n")
    assert await c.line() == b"+ \r\n"
    await c.send(token + b"\r\n")
    assert (await c.line()).startswith(b"b OK [CAPABILITY")
    await c.close()
    c = await connect(server, login=False)
    await c.send(b"c AUTHENTICATE PLAIN\r\n")
    assert await c.line() == b"+ \r\n"
    await c.send(b"*\r\n")
    assert await c.line() == b"c BAD AUTHENTICATE cancelled\r\n"
    await c.close()


async def test_select_and_examine(client: Client, mailbox: Mailbox, sample: list[bytes]) -> None:
    v = await uidvalidity(mailbox)
    assert await client.command(b"s SELECT inbox") == [
        b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)\r\n",
        b"* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags permitted.\r\n",
        b"* 9 EXISTS\r\n",
        b"* 0 RECENT\r\n",
        b"* OK [UNSEEN 5] First unseen.\r\n",
        b"* OK [UIDVALIDITY %d] UIDs valid\r\n" % v,
        b"* OK [UIDNEXT 10] Predicted next UID\r\n",
        b"* OK [HIGHESTMODSEQ 10] Highest\r\n",
        b"s OK [READ-WRITE] SELECT completed\r\n",
    ]
    lines = await client.command(b"e EXAMINE INBOX")
    assert lines[1] == b"* OK [PERMANENTFLAGS ()] Flags permitted.\r\n"
    assert lines[-1] == b"e OK [READ-ONLY] EXAMINE completed\r\n"
    assert await client.command(b"f STORE 1 +FLAGS (\\Flagged)") == [
        b"f NO [READ-ONLY] the folder is open read-only (EXAMINE)\r\n"]
    assert await client.command(b"g SELECT Nope") == [b"g NO [NONEXISTENT] no folder named Nope\r\n"]
    assert await client.command(b"h FETCH 1 FLAGS") == [
        b"h BAD FETCH is not allowed in the authenticated state\r\n"]


async def test_fetch_items(client: Client, sample: list[bytes]) -> None:
    await client.command(b"s SELECT INBOX")
    assert await client.command(b"f FETCH 1 (UID FLAGS RFC822.SIZE INTERNALDATE ENVELOPE)") == [
        b'* 1 FETCH (UID 1 FLAGS (\\Seen) RFC822.SIZE %d INTERNALDATE "24-Nov-2025 16:00:00 +0000" '
        b'ENVELOPE ("Mon, 24 Nov 2025 16:00:00 +0000" "Summarise new issues in pizzamail/pizzamail '
        b'every weekday at 8" (("Me" NIL "me" "pizzamail.localhost")) (("Me" NIL "me" '
        b'"pizzamail.localhost")) (("Me" NIL "me" "pizzamail.localhost")) (("Pizzamail Bot" NIL "bot" '
        b'"pizzamail.localhost")) NIL NIL NIL "<task-1@pizzamail.localhost>"))\r\n' % len(sample[0]),
        b"f OK FETCH completed\r\n",
    ]
    command = b"g UID FETCH 4 (BODY.PEEK[HEADER.FIELDS (subject)] BODY.PEEK[2.HEADER]<0.41>)"
    assert await client.command(command) == [
        b"* 4 FETCH (UID 4 BODY[HEADER.FIELDS (subject)] {44}\r\n",
        b"Subject: Fwd: Invoice question from ACME\r\n",
        b"\r\n",
        b" BODY[2.HEADER]<0> {41}\r\n",
        b"From: Alice Customer <alice@acme.example>)\r\n",  # 41 bytes, then the closing paren
        b"g OK UID FETCH completed\r\n",
    ]


async def test_body_is_served_byte_exact_and_sets_seen(client: Client, sample: list[bytes]) -> None:
    await client.command(b"s SELECT INBOX")
    await client.send(b"f FETCH 5 BODY[]\r\n")
    head = await client.line()
    assert head == b"* 5 FETCH (BODY[] {%d}\r\n" % len(sample[4])
    assert await client.read_exactly(len(sample[4])) == sample[4]
    assert await client.line() == b" FLAGS (\\Seen))\r\n"
    assert await client.line() == b"f OK FETCH completed\r\n"
    assert await client.command(b"g FETCH 5 FLAGS") == [
        b"* 5 FETCH (FLAGS (\\Seen))\r\n", b"g OK FETCH completed\r\n"]


async def test_store_keywords_persist(client: Client, mailbox: Mailbox, sample: list[bytes]) -> None:
    await client.command(b"s SELECT INBOX")
    assert await client.command(b"a STORE 1:2 +FLAGS ($Label1 \\Flagged)") == [
        b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Label1)\r\n",
        b"* 1 FETCH (FLAGS (\\Flagged \\Seen $Label1))\r\n",
        b"* 2 FETCH (FLAGS (\\Flagged \\Seen $Label1))\r\n",
        b"a OK STORE completed\r\n",
    ]
    assert await client.command(b"b UID STORE 2 -FLAGS.SILENT (\\Flagged)") == [
        b"b OK UID STORE completed\r\n"]
    assert await client.command(b"c UID STORE 1 FLAGS (\\Answered)") == [
        b"* 1 FETCH (FLAGS (\\Answered) UID 1)\r\n", b"c OK UID STORE completed\r\n"]
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    rows = await mailbox.messages(inbox)
    assert rows[0].flags == {"\\Answered"}
    assert rows[1].flags == {"\\Seen", "$Label1"}
    lines = await client.command(b"d SELECT INBOX")
    assert lines[0] == b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Label1)\r\n"


async def test_search(client: Client, sample: list[bytes]) -> None:
    await client.command(b"s SELECT INBOX")
    cases = {
        b"SEARCH UNSEEN": b"* SEARCH 5 6 7 8\r\n",
        b"SEARCH FLAGGED": b"* SEARCH 4\r\n",
        b"SEARCH ANSWERED NOT FLAGGED": b"* SEARCH 3\r\n",
        b"SEARCH FROM bot SUBJECT approval": b"* SEARCH 8\r\n",
        b'SEARCH HEADER Message-ID "<task-1@pizzamail.localhost>"': b"* SEARCH 1\r\n",
        b"SEARCH CHARSET UTF-8 SUBJECT {7+}\r\nGr\xc3\xb6\xc3\x9fe": b"* SEARCH 6\r\n",
        b"SEARCH SUBJECT \"r\xc3\xa9sum\xc3\xa9\"": b"* SEARCH 5\r\n",
        b"SEARCH BODY \"en fran\xc3\xa7ais\"": b"* SEARCH 5\r\n",
        b"SEARCH TEXT alice": b"* SEARCH 4\r\n",
        b"SEARCH OR 1 9 LARGER 1": b"* SEARCH 1 9\r\n",
        b"SEARCH SINCE 27-Nov-2025": b"* SEARCH\r\n",  # internal dates are the 24th
        b"SEARCH SENTSINCE 27-Nov-2025": b"* SEARCH 7 8 9\r\n",
        b"SEARCH SENTBEFORE 25-Nov-2025 SENTON 24-Nov-2025": b"* SEARCH 1 2\r\n",
        b"UID SEARCH UID 8:* NOT DELETED": b"* SEARCH 8 9\r\n",
        b"SEARCH (SEEN FLAGGED) ALL": b"* SEARCH 4\r\n",
    }
    for command, expected in cases.items():
        assert await client.command(b"x " + command) == [expected, b"x OK " + command.split(b" ")[0]
                                                          .replace(b"UID", b"UID SEARCH") + b" completed\r\n"
                                                          ], command


async def test_expunge_and_close(client: Client, mailbox: Mailbox, sample: list[bytes]) -> None:
    await client.command(b"s SELECT INBOX")
    await client.command(b"a STORE 2,4 +FLAGS.SILENT (\\Deleted)")
    assert await client.command(b"b EXPUNGE") == [
        b"* 4 EXPUNGE\r\n", b"* 2 EXPUNGE\r\n", b"b OK EXPUNGE completed\r\n"]
    assert await client.command(b"c FETCH 2:3 UID") == [
        b"* 2 FETCH (UID 3)\r\n", b"* 3 FETCH (UID 5)\r\n", b"c OK FETCH completed\r\n"]
    await client.command(b"d UID STORE 5,6 +FLAGS.SILENT (\\Deleted)")
    assert await client.command(b"e UID EXPUNGE 6:7") == [
        b"* 4 EXPUNGE\r\n", b"e OK UID EXPUNGE completed\r\n"]
    assert await client.command(b"f CLOSE") == [b"f OK CLOSE completed\r\n"]
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    assert [r.uid for r in await mailbox.messages(inbox)] == [1, 3, 7, 8, 9]


async def test_malformed_commands_get_bad_and_the_connection_lives(client: Client) -> None:
    assert await client.command(b"a FETCH 1 FLAGS") == [
        b"a BAD FETCH is not allowed in the authenticated state\r\n"]
    assert await client.command(b"a2 FETCH (") == [b"a2 BAD expected a number (at byte 9)\r\n"]
    assert await client.command(b"b FROBNICATE") == [b"b BAD unknown command FROBNICATE\r\n"]
    assert await client.command(b'c LOGIN "unterminated') == [
        b"c BAD unterminated quoted string (at byte 21)\r\n"]
    await client.send(b"\r\n")
    assert await client.line() == b"* BAD missing or invalid tag\r\n"
    await client.command(b"s SELECT INBOX")
    assert await client.command(b"d FETCH 1 (FLAGS") == [b"d BAD expected a space (at byte 16)\r\n"]
    assert await client.command(b"e NOOP") == [b"e OK NOOP completed\r\n"]


async def test_literals_sync_nonsync_and_limits(server: ImapServer, mailbox: Mailbox) -> None:
    c = await connect(server, login=False)
    try:
        await c.send(b"a LOGIN {2}\r\n")
        assert await c.line() == b"+ Ready for literal data\r\n"
        await c.send(b"me {2+}\r\npw\r\n")
        assert (await c.line()).startswith(b"a OK [CAPABILITY")
        await c.send(b"b APPEND INBOX {999999999}\r\n")
        assert await c.line() == b"b NO [TOOBIG] Literal too large\r\n"
        await c.send(b"c APPEND INBOX {2000000+}\r\n" + b"x" * 2000000 + b"\r\n")
        assert await c.line() == b"c NO [TOOBIG] Literal too large\r\n"
        await c.send(b"d NOOP " + b"x" * 70000 + b"\r\n")
        assert await c.line() == b"d BAD [TOOBIG] Line too long\r\n"
        assert await c.command(b"e NOOP") == [b"e OK NOOP completed\r\n"]
    finally:
        await c.close()


async def test_list_status_and_folder_management(
    client: Client, mailbox: Mailbox, sample: list[bytes]
) -> None:
    assert await client.command(b'a LIST "" ""') == [
        b'* LIST (\\Noselect) "/" ""\r\n', b"a OK LIST completed\r\n"]
    assert await client.command(b'b LIST "" *') == [
        b'* LIST (\\HasNoChildren) "/" INBOX\r\n',
        b'* LIST (\\HasNoChildren) "/" Action\r\n',
        b'* LIST (\\HasNoChildren) "/" Activity\r\n',
        b'* LIST (\\HasNoChildren \\Sent) "/" Sent\r\n',
        b'* LIST (\\HasNoChildren \\Drafts) "/" Drafts\r\n',
        b'* LIST (\\HasNoChildren \\Archive) "/" Archive\r\n',
        b'* LIST (\\HasNoChildren \\Trash) "/" Trash\r\n',
        b"b OK LIST completed\r\n",
    ]
    assert await client.command(b"c CREATE Projekte/&AMQ-pfel") == [b"c OK CREATE completed\r\n"]
    assert await client.command(b"d CREATE Projekte/&AMQ-pfel") == [
        b"d NO [ALREADYEXISTS] Projekte/\xc3\x84pfel already exists\r\n".replace(b"\xc3\x84", b"?")]
    assert await client.command(b'e LIST "" Pro%') == [
        b'* LIST (\\Noselect \\HasChildren) "/" Projekte\r\n', b"e OK LIST completed\r\n"]
    assert await client.command(b'f LIST "Projekte/" %') == [
        b'* LIST (\\HasNoChildren) "/" Projekte/&AMQ-pfel\r\n', b"f OK LIST completed\r\n"]
    assert await client.command(b'g LIST "" inbox') == [
        b'* LIST (\\HasNoChildren) "/" INBOX\r\n', b"g OK LIST completed\r\n"]
    assert await client.command(b"h RENAME Projekte/&AMQ-pfel v1.2") == [b"h OK RENAME completed\r\n"]
    assert await client.command(b"i STATUS v1.2 (MESSAGES UIDNEXT)") == [
        b"* STATUS v1.2 (MESSAGES 0 UIDNEXT 1)\r\n", b"i OK STATUS completed\r\n"]
    assert await client.command(b"j STATUS INBOX (MESSAGES UNSEEN RECENT)") == [
        b"* STATUS INBOX (MESSAGES 9 UNSEEN 4 RECENT 0)\r\n", b"j OK STATUS completed\r\n"]
    assert await client.command(b"k UNSUBSCRIBE Trash") == [b"k OK UNSUBSCRIBE completed\r\n"]
    assert b"Trash" not in b"".join(await client.command(b'l LSUB "" *'))
    assert await client.command(b"m DELETE v1.2") == [b"m OK DELETE completed\r\n"]
    assert await client.command(b"n DELETE INBOX") == [b"n NO [CANNOT] INBOX cannot be deleted\r\n"]
    assert await mailbox.folder("v1.2") is None
    assert await client.command(b"o NAMESPACE") == [
        b'* NAMESPACE (("" "/")) NIL NIL\r\n', b"o OK NAMESPACE completed\r\n"]
    assert await client.command(b'p ID ("name" "test")') == [
        b'* ID ("name" "pizzamail" "version" "0.1.0")\r\n', b"p OK ID completed\r\n"]


async def test_append_copy_move(client: Client, mailbox: Mailbox, sample: list[bytes]) -> None:
    sent = await uidvalidity(mailbox, "Sent")
    archive = await uidvalidity(mailbox, "Archive")
    message = b"From: me@pizzamail.localhost\r\nSubject: sent copy\r\n\r\nhello\r\n"
    await client.send(b'a APPEND Sent (\\Seen $Sent) "01-Dec-2025 10:00:00 +0100" {%d}\r\n' % len(message))
    assert await client.line() == b"+ Ready for literal data\r\n"
    await client.send(message + b"\r\n")
    assert await client.line() == b"a OK [APPENDUID %d 1] APPEND completed\r\n" % sent
    assert await client.command(b"b APPEND Nowhere {1+}\r\nx") == [
        b"b NO [TRYCREATE] no folder named Nowhere\r\n"]
    await client.command(b"c SELECT Sent")
    assert await client.command(b"d FETCH 1 (FLAGS INTERNALDATE BODY.PEEK[])") == [
        b'* 1 FETCH (FLAGS (\\Seen $Sent \\Recent) INTERNALDATE " 1-Dec-2025 09:00:00 +0000" BODY[] {%d}\r\n'
        % len(message),
        *message.splitlines(keepends=True)[:-1],
        b"hello\r\n",
        b")\r\n",
        b"d OK FETCH completed\r\n",
    ]
    await client.command(b"e SELECT INBOX")
    assert await client.command(b"f UID COPY 1:2,5 Archive") == [
        b"f OK [COPYUID %d 1:2,5 1:3] UID COPY completed\r\n" % archive]
    assert await client.command(b"g MOVE 3 Archive") == [
        b"* OK [COPYUID %d 3 4] Moved\r\n" % archive, b"* 3 EXPUNGE\r\n", b"g OK MOVE completed\r\n"]
    folder = await mailbox.folder("Archive")
    assert folder is not None
    rows = await mailbox.messages(folder)
    assert [await mailbox.read(folder, r) for r in rows] == [sample[0], sample[1], sample[4], sample[2]]
