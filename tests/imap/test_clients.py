"""Real client libraries against our server: imaplib, aioimaplib (IDLE push) and IMAPClient."""

from __future__ import annotations

import asyncio
import imaplib

import aioimaplib
from imapclient import IMAPClient
from imaptools import READ_TIMEOUT

from pizzamail.imap import ImapServer
from pizzamail.mailbox import Mailbox

NEW_MAIL = b"From: bot@pizzamail.localhost\r\nSubject: pushed\r\n\r\nfresh\r\n"


def _imaplib_session(port: int, sample: list[bytes]) -> None:
    with imaplib.IMAP4("127.0.0.1", port) as m:
        assert m.login("me", "pw")[0] == "OK"
        assert "UIDPLUS" in m.capabilities or "IDLE" in m.capabilities
        assert m.select("INBOX") == ("OK", [b"9"])
        typ, data = m.fetch("1:9", "(UID RFC822.SIZE BODY.PEEK[])")
        assert typ == "OK"
        bodies = [item[1] for item in data if isinstance(item, tuple)]
        assert bodies == sample
        assert m.search(None, "UNSEEN") == ("OK", [b"5 6 7 8"])
        assert m.uid("SEARCH", "HEADER", "Message-ID", "<fwd-7@pizzamail.localhost>") == ("OK", [b"4"])
        assert m.store("2", "+FLAGS", "(\\Deleted)")[0] == "OK"
        assert m.expunge() == ("OK", [b"2"])
        assert m.select("INBOX") == ("OK", [b"8"])
        typ, data = m.append("Sent", "(\\Seen)", None, b"Subject: sent\r\n\r\nhi\r\n")
        assert typ == "OK" and data[0].startswith(b"[APPENDUID ")
        assert m.logout()[0] == "BYE"


async def test_imaplib(server: ImapServer, sample: list[bytes]) -> None:
    await asyncio.to_thread(_imaplib_session, server.port, sample)


async def test_aioimaplib_idle_push(server: ImapServer, mailbox: Mailbox, sample: list[bytes]) -> None:
    client = aioimaplib.IMAP4(host="127.0.0.1", port=server.port, timeout=READ_TIMEOUT)
    await client.wait_hello_from_server()
    assert (await client.login("me", "pw")).result == "OK"
    assert (await client.select("INBOX")).result == "OK"
    idle = await client.idle_start(timeout=30)
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    await mailbox.deliver(inbox, NEW_MAIL)
    pushed: list[bytes] = []
    while b"10 EXISTS" not in pushed:
        pushed += await asyncio.wait_for(client.wait_server_push(), READ_TIMEOUT)
    client.idle_done()
    assert (await asyncio.wait_for(idle, READ_TIMEOUT)).result == "OK"
    assert (await client.logout()).result == "OK"


def _imapclient_session(port: int) -> None:
    with IMAPClient("127.0.0.1", port=port, ssl=False, timeout=READ_TIMEOUT) as c:
        c.login("me", "pw")
        c.select_folder("INBOX")
        data = c.fetch([2, 4, 6], ["ENVELOPE", "BODYSTRUCTURE", "FLAGS"])
        env = data[2][b"ENVELOPE"]
        assert env.message_id == b"<run-1.step-3@pizzamail.localhost>"
        assert env.in_reply_to == b"<task-1@pizzamail.localhost>"
        assert env.from_[0].mailbox == b"bot" and env.from_[0].host == b"pizzamail.localhost"
        structure = data[2][b"BODYSTRUCTURE"]
        assert structure.is_multipart and structure[1] == b"ALTERNATIVE"
        forwarded = data[4][b"BODYSTRUCTURE"]
        assert forwarded[0][1][:2] == (b"MESSAGE", b"RFC822")
        assert data[4][b"FLAGS"] == (b"\\Flagged", b"\\Seen")
        assert data[6][b"ENVELOPE"].subject == "Übersetzung der Größentabelle prüfen".encode()
        folders = {name: flags for flags, _, name in c.list_folders()}
        assert b"\\Sent" in folders["Sent"]
        assert c.folder_status("INBOX", ["MESSAGES", "UNSEEN"]) == {b"MESSAGES": 9, b"UNSEEN": 4}


async def test_imapclient_envelope_and_bodystructure(server: ImapServer, sample: list[bytes]) -> None:
    await asyncio.to_thread(_imapclient_session, server.port)
