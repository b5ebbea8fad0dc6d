"""IMAPClient, the way an agent framework or a script talks IMAP: list, select, fetch, search with
UTF-8 criteria, append to Sent with flags and a date, move, flag with keywords."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from imapclient import IMAPClient
from imapclient.imapclient import SENT, TRASH
from imaptools import READ_TIMEOUT

from pizzamail.imap import ImapServer
from pizzamail.mailbox import Mailbox

REPLY = (
    b"From: Me <me@pizzamail.localhost>\r\nTo: Pizzamail Bot <bot@pizzamail.localhost>\r\n"
    b"Subject: Re: Approval needed: comment on issue #42\r\n"
    b"Message-ID: <reply-approve-2@pizzamail.localhost>\r\n"
    b"In-Reply-To: <approval-42.n7Kq2@pizzamail.localhost>\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n\r\napprove\r\n\r\n-- \r\nJ\xc3\xbcrgen\r\n"
)
SENT_AT = datetime(2025, 11, 26, 8, 15, 30, tzinfo=timezone(timedelta(hours=1)))


def _listing_and_fetch(c: IMAPClient, sample: list[bytes]) -> None:
    names = [name for _, _, name in c.list_folders()]
    assert names[0] == "INBOX" and {"Sent", "Drafts", "Trash", "Action"} <= set(names)
    assert c.find_special_folder(SENT) == "Sent"
    assert c.find_special_folder(TRASH) == "Trash"
    selected = c.select_folder("INBOX")
    assert selected[b"EXISTS"] == 9 and selected[b"UIDNEXT"] == 10
    assert b"\\Seen" in selected[b"FLAGS"]
    data = c.fetch(range(1, 10), ["UID", "ENVELOPE", "BODYSTRUCTURE", "FLAGS", "RFC822.SIZE", "INTERNALDATE"])
    assert sorted(data) == list(range(1, 10))
    assert [data[u][b"RFC822.SIZE"] for u in range(1, 10)] == [len(m) for m in sample]
    env = data[6][b"ENVELOPE"]
    assert env.subject == "Übersetzung der Größentabelle prüfen".encode()
    assert env.from_[0].name == "Jürgen Müller".encode() and env.from_[0].host == b"example.org"
    assert env.message_id == b"<8bit-header-1@example.org>"
    assert data[3][b"BODYSTRUCTURE"].is_multipart and data[3][b"BODYSTRUCTURE"][1] == b"MIXED"
    assert data[8][b"FLAGS"] == ()
    assert data[1][b"INTERNALDATE"].replace(tzinfo=None) < data[9][b"INTERNALDATE"].replace(tzinfo=None)
    # Nothing above fetched a body: no message became seen.
    assert c.search("UNSEEN") == [5, 6, 7, 8]


def _search(c: IMAPClient) -> None:
    c.select_folder("INBOX", readonly=True)
    assert c.search(["SUBJECT", "Größentabelle"], charset="UTF-8") == [6]
    assert c.search(["FROM", "Jürgen"], charset="UTF-8") == [6]
    assert c.search(["TEXT", "Größentabelle"], charset="UTF-8") == [6]
    assert c.search(["SUBJECT", "Résumé"], charset="UTF-8") == [5]  # an encoded-word subject
    assert c.search(["NOT", "SEEN", "SUBJECT", "issue #42"], charset="UTF-8") == [8]
    # Internal dates are 24 Nov 2025 (the delivery stamps); Date: headers say 25 Nov.
    assert c.search(["SINCE", datetime(2025, 11, 24).date()]) == list(range(1, 10))
    assert c.search(["BEFORE", datetime(2025, 11, 24).date()]) == []
    assert c.search(["SENTSINCE", datetime(2025, 11, 25).date(), "SUBJECT", "ACME"]) == [4]
    c.unselect_folder()


def _append_move_flag(c: IMAPClient) -> None:
    answer = c.append("Sent", REPLY, flags=["\\Seen", "$Forwarded"], msg_time=SENT_AT)
    assert answer.startswith(b"[APPENDUID ")
    uid = int(answer.split()[2].rstrip(b"]"))
    c.select_folder("Sent")
    sent = c.fetch([uid], ["BODY.PEEK[]", "FLAGS", "INTERNALDATE"])[uid]
    assert sent[b"BODY[]"] == REPLY
    assert set(sent[b"FLAGS"]) == {b"\\Seen", b"$Forwarded", b"\\Recent"}  # new to this session
    assert sent[b"INTERNALDATE"] == SENT_AT.astimezone().replace(tzinfo=None)
    c.select_folder("INBOX")
    c.move([8], "Action")
    assert c.search("ALL") == [1, 2, 3, 4, 5, 6, 7, 9]
    c.add_flags([4], ["$label1"])
    c.remove_flags([4], ["\\Flagged"])


async def test_imapclient_list_fetch_search_append_move(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes]
) -> None:
    def session() -> None:
        with IMAPClient("127.0.0.1", port=server.port, ssl=False, timeout=READ_TIMEOUT) as c:
            c.login("me", "pw")
            assert c.has_capability("MOVE") and c.has_capability("UIDPLUS")
            _listing_and_fetch(c, sample)
            _search(c)
            _append_move_flag(c)

    await asyncio.to_thread(session)

    inbox, action, sent = [await mailbox.folder(n) for n in ("INBOX", "Action", "Sent")]
    assert inbox is not None and action is not None and sent is not None
    in_inbox = {row.uid: row for row in await mailbox.messages(inbox)}
    assert sorted(in_inbox) == [1, 2, 3, 4, 5, 6, 7, 9]
    assert in_inbox[4].flags == {"\\Seen", "$label1"}
    moved = await mailbox.messages(action)
    assert [await mailbox.read(action, row) for row in moved] == [sample[7]]
    [copy] = await mailbox.messages(sent)
    assert await mailbox.read(sent, copy) == REPLY
    assert copy.internaldate == int(SENT_AT.timestamp())
    assert copy.flags == {"\\Seen", "$Forwarded"}
