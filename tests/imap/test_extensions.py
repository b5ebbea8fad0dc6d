"""LIST-EXTENDED / LIST-STATUS, BINARY, and the RFC 3501 corners: every SEARCH key, BADCHARSET,
message numbers past the end, CHECK."""

from __future__ import annotations

import base64

import pytest
from imaptools import Client

from pizzamail.mailbox import Mailbox

ATTACHMENT = bytes(range(256))
BINARY_MAIL = (
    b'From: bot@pizzamail.localhost\r\nSubject: files\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n'
    b"--b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
    b"Gr=C3=BC=C3=9Fe=\r\n!\r\n"
    b"--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    + base64.encodebytes(ATTACHMENT).replace(b"\n", b"\r\n")
    + b"--b\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\nbegin\r\n"
    b"--b--\r\n"
)


async def test_list_extended_and_status(client: Client, mailbox: Mailbox, sample: list[bytes]) -> None:
    await client.command(b"a CREATE Projects/Alpha")
    await client.command(b"a SUBSCRIBE Projects/Alpha")
    await client.command(b"b UNSUBSCRIBE Trash")
    assert await client.command(b'c LIST (SPECIAL-USE) "" * RETURN (SUBSCRIBED)') == [
        b'* LIST (\\HasNoChildren \\Sent \\Subscribed) "/" Sent\r\n',
        b'* LIST (\\HasNoChildren \\Drafts \\Subscribed) "/" Drafts\r\n',
        b'* LIST (\\HasNoChildren \\Archive \\Subscribed) "/" Archive\r\n',
        b'* LIST (\\HasNoChildren \\Trash) "/" Trash\r\n',
        b"c OK LIST completed\r\n",
    ]
    assert await client.command(b'd LIST (SUBSCRIBED) "" (INBOX Tr* Proj*)') == [
        b'* LIST (\\HasNoChildren \\Subscribed) "/" INBOX\r\n',
        b'* LIST (\\HasNoChildren \\Subscribed) "/" Projects/Alpha\r\n',
        b"d OK LIST completed\r\n",
    ]
    await client.command(b"e CREATE Projects")
    await client.command(b"f UNSUBSCRIBE Projects")
    assert (await client.command(b'g LIST (SUBSCRIBED RECURSIVEMATCH) "" %'))[-2:] == [
        b'* LIST (\\HasChildren) "/" Projects ("CHILDINFO" ("SUBSCRIBED"))\r\n',
        b"g OK LIST completed\r\n",
    ]
    command = b'h LIST "" (INBOX Action) RETURN (STATUS (MESSAGES UNSEEN HIGHESTMODSEQ))'
    assert await client.command(command) == [
        b'* LIST (\\HasNoChildren) "/" INBOX\r\n',
        b"* STATUS INBOX (MESSAGES 9 UNSEEN 4 HIGHESTMODSEQ 10)\r\n",
        b'* LIST (\\HasNoChildren) "/" Action\r\n',
        b"* STATUS Action (MESSAGES 0 UNSEEN 0 HIGHESTMODSEQ 1)\r\n",
        b"h OK LIST completed\r\n",
    ]
    assert await client.command(b'i LIST (FOO) "" *') == [
        b"i BAD LIST selection options are RECURSIVEMATCH REMOTE SPECIAL-USE SUBSCRIBED (at byte 12)\r\n"]


async def test_binary_fetch(client: Client, mailbox: Mailbox) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    await mailbox.deliver(inbox, BINARY_MAIL)
    await client.command(b"s SELECT INBOX")
    assert await client.command(b"a FETCH 1 (BINARY.SIZE[1] BINARY.SIZE[2] BINARY.PEEK[1])") == [
        b"* 1 FETCH (BINARY.SIZE[1] 8 BINARY.SIZE[2] 256 BINARY[1] {8}\r\n",
        "Grüße!)\r\n".encode(),
        b"a OK FETCH completed\r\n",
    ]
    await client.send(b"b FETCH 1 BINARY.PEEK[2]\r\n")
    assert await client.line() == b"* 1 FETCH (BINARY[2] ~{256}\r\n"
    assert await client.read_exactly(256) == ATTACHMENT
    assert await client.line() == b")\r\n"
    assert await client.line() == b"b OK FETCH completed\r\n"
    assert await client.command(b"c FETCH 1 BINARY[2]<65.4>") == [
        b"* 1 FETCH (BINARY[2]<65> {4}\r\n", b"ABCD FLAGS (\\Seen \\Recent))\r\n",
        b"c OK FETCH completed\r\n"]
    assert await client.command(b"d FETCH 1 BINARY.PEEK[3]") == [
        b"d NO [UNKNOWN-CTE] unknown Content-Transfer-Encoding\r\n"]
    assert await client.command(b"e FETCH 1 BINARY.SIZE[4]") == [
        b"* 1 FETCH (BINARY.SIZE[4] 0)\r\n", b"e OK FETCH completed\r\n"]
    assert await client.command(b"f FETCH 1 BINARY[1.HEADER]") == [
        b"f BAD expected a number (at byte 19)\r\n"]


async def test_append_accepts_literal8(client: Client) -> None:
    lines = await client.command(b"a APPEND Drafts ~{11+}\r\nSubject: x\n")
    assert lines[-1].startswith(b"a OK [APPENDUID")


SEARCHES = {
    b"ALL": b" 1 2 3 4 5 6 7 8 9",
    b"ANSWERED": b" 3",
    b"UNANSWERED DELETED": b"",
    b"UNDELETED DRAFT": b"",
    b"UNDRAFT FLAGGED": b" 4",
    b"UNFLAGGED SEEN NOT ANSWERED": b" 1 2 9",
    b"UNSEEN": b" 5 6 7 8",
    b"NEW": b"",
    b"OLD RECENT": b"",
    b"KEYWORD $Todo": b" 2",
    b"UNKEYWORD $Todo 1:3": b" 1 3",
    b"BCC nobody": b"",
    b"CC bot": b" 6",
    b"TO bot FROM me SUBJECT summarise": b" 1",
    b"HEADER In-Reply-To task-1": b" 2",
    b"BODY franais": b"",
    b"TEXT alice": b" 4",
    b"LARGER 100000": b"",
    b"SMALLER 1": b"",
    b"BEFORE 1-Jan-2000": b"",
    b"ON 24-Nov-2025": b" 1 2 3 4 5 6 7 8 9",
    b"SINCE 25-Nov-2025": b"",
    b"SENTON 24-Nov-2025": b" 1 2",
    b"SENTBEFORE 24-Nov-2025": b"",
    b"SENTSINCE 28-Nov-2025": b"",
    b"UID 2,4:5": b" 2 4 5",
    b"OR (UID 1) (OR 9 ANSWERED)": b" 1 3 9",
    b"NOT (OR SEEN FLAGGED)": b" 5 6 7 8",
    b"2:4,*": b" 2 3 4 9",
    b"5:20": b" 5 6 7 8 9",  # a search set may reach past the end: it finds nothing there
    b"CHARSET UTF-8 TEXT gr\xc3\xb6\xc3\x9fe": b" 6",
    b"CHARSET us-ascii ALL": b" 1 2 3 4 5 6 7 8 9",
}


@pytest.mark.parametrize("key", list(SEARCHES))
async def test_every_search_key(client: Client, sample: list[bytes], key: bytes) -> None:
    await client.command(b"s SELECT INBOX")
    await client.command(b"k STORE 2 +FLAGS.SILENT ($Todo)")
    assert await client.command(b"x SEARCH " + key) == [
        b"* SEARCH" + SEARCHES[key] + b"\r\n", b"x OK SEARCH completed\r\n"]


async def test_search_errors(client: Client, sample: list[bytes]) -> None:
    await client.command(b"s SELECT INBOX")
    assert await client.command(b"a SEARCH CHARSET KOI8-R TEXT x") == [
        b"a NO [BADCHARSET (UTF-8 US-ASCII)] unsupported charset\r\n"]
    assert await client.command(b"b SEARCH FRUIT apple") == [
        b"b BAD unknown search key FRUIT (at byte 14)\r\n"]
    assert await client.command(b"c SEARCH CHARSET UTF-8 TEXT \xff") == [
        b"c BAD search text is not valid in its charset\r\n"]


async def test_message_numbers_past_the_end_are_bad(client: Client, sample: list[bytes]) -> None:
    await client.command(b"s SELECT INBOX")
    assert await client.command(b"a FETCH 10 FLAGS") == [b"a BAD no message has the number 10\r\n"]
    assert await client.command(b"b STORE 3:12 +FLAGS (\\Seen)") == [
        b"b BAD no message has the number 12\r\n"]
    assert await client.command(b"c COPY 1,99 Archive") == [b"c BAD no message has the number 99\r\n"]
    assert await client.command(b"d FETCH 9:* UID") == [b"* 9 FETCH (UID 9)\r\n", b"d OK FETCH completed\r\n"]
    assert await client.command(b"e UID FETCH 99 UID") == [b"e OK UID FETCH completed\r\n"]
    assert await client.command(b"f CHECK") == [b"f OK CHECK completed\r\n"]
    await client.command(b"g SELECT Trash")
    assert await client.command(b"h FETCH 1:* UID") == [b"h OK FETCH completed\r\n"]
    assert await client.command(b"i FETCH 1 UID") == [b"i BAD no message has the number 1\r\n"]
