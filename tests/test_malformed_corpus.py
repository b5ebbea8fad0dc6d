"""The malformed-mail corpus (tests/mailcorpus.py) through the real SMTP intake, then IMAP.

Each mail is either stored as a task (250, one new message, filed in INBOX, found by SEARCH where
its case says, FETCH of its structure answered OK) or refused with a clear 5xx that carries no
exception text. Never a crash, never a 250 without a stored task. Loopback only: smtplib against
our aiosmtpd intake, imaplib against our IMAP server, over one store and Maildir.
"""

from __future__ import annotations

import asyncio
import imaplib
import re
import smtplib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from pizzamail.auth import Accounts
from pizzamail.imap import ImapServer, Limits
from pizzamail.intake.smtp import IntakeHandler, start_smtp_server
from pizzamail.mailbox import Mailbox
from pizzamail.mailbox.filing import file_pending
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from tests.mailcorpus import CASES, Case

pytestmark = pytest.mark.slow

OWNER, BOT = "me@pizzamail.localhost", "bot@pizzamail.localhost"
ACCOUNTS = Accounts(user="me", password="pw", addresses=frozenset({OWNER}))
#: what a reply must never show: Python's exception names or aiosmtpd's "500 Error: (Name) text"
LEAK = re.compile(r"Error: \(|Traceback|\b[A-Z]\w*(Error|Exception)\b")


@dataclass
class Servers:
    smtp: int
    imap: int


@pytest.fixture
async def servers(store: Store, blobs: BlobStore, mailbox: Mailbox) -> AsyncIterator[Servers]:
    handler = IntakeHandler(store=store, blobs=blobs, accounts=ACCOUNTS, agents=frozenset({BOT}),
                            domain="pizzamail.localhost")
    smtp = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=4_000_000)
    imap = await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS,
                                  limits=Limits(login_delay=0.01))
    yield Servers(smtp=int(smtp.sockets[0].getsockname()[1]), imap=imap.port)
    smtp.close()
    await smtp.wait_closed()
    await imap.close()


def submit(port: int, data: bytes) -> tuple[int, str]:
    """The reply to DATA (or to the first command refused before it)."""
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
        client.login("me", "pw")
        for command, arg in ((client.mail, OWNER), (client.rcpt, BOT)):
            code, text = command(arg)
            if code != 250:
                return code, text.decode()
        code, text = client.data(data)
        return code, text.decode()


def ok(imap: imaplib.IMAP4, *command: str) -> list[bytes]:
    status, data = imap.uid(*command)
    assert status == "OK", f"UID {' '.join(command)} answered {status} {data!r}"
    return [d for d in data if isinstance(d, bytes)]


def found(imap: imaplib.IMAP4, uid: int, key: str, token: str) -> bool:
    [line] = ok(imap, "SEARCH", f"UID {uid} {key} {token}")
    return str(uid).encode() in line.split()


def check_stored(imap: imaplib.IMAP4, case: Case) -> list[str]:
    """The newest INBOX mail is this case's task: its structure fetches, SEARCH finds what it should."""
    assert imap.select("INBOX", readonly=True)[0] == "OK"
    [listing] = ok(imap, "SEARCH", "ALL")
    uid = max(int(u) for u in listing.split())
    ok(imap, "FETCH", str(uid), "(BODYSTRUCTURE ENVELOPE BODY BODY.PEEK[1] BODY.PEEK[1.2] BODY.PEEK[1.MIME]"
                                " BODY.PEEK[HEADER] BODY.PEEK[TEXT] RFC822.SIZE)")
    status, data = imap.uid("FETCH", str(uid), "(BINARY.SIZE[1])")  # damaged base64 may say so
    assert status == "OK" or b"[UNKNOWN-CTE]" in data[0], f"BINARY.SIZE[1] answered {status} {data!r}"
    expected = {"SUBJECT": case.subject, "BODY": case.body, "TEXT": case.subject or case.body}
    return [f"SEARCH {key} {'missed' if want else 'found'} it" for key, want in expected.items()
            if found(imap, uid, key, case.token) != want]


def login(port: int) -> imaplib.IMAP4:
    imap = imaplib.IMAP4("127.0.0.1", port, timeout=30)
    imap.login("me", "pw")
    return imap


async def count(store: Store) -> int:
    row = await store.fetchone("SELECT count(*) AS n FROM messages")
    assert row is not None
    return int(row["n"])


async def test_every_malformed_mail_is_stored_and_searchable_or_clearly_refused(
    servers: Servers, store: Store, mailbox: Mailbox, blobs: BlobStore
) -> None:
    assert len(CASES) >= 60 and len({c.name for c in CASES}) == len(CASES)
    imap = await asyncio.to_thread(login, servers.imap)
    problems = {}
    try:
        for case in CASES:
            before = await count(store)
            code, text = await asyncio.to_thread(submit, servers.smtp, case.data())
            found_problems = await _judge(case, code, text, await count(store) - before, imap, mailbox, blobs)
            if found_problems:
                problems[case.name] = found_problems
        whole_folder = await asyncio.to_thread(_search_whole_folder, imap)
    finally:
        await asyncio.to_thread(imap.logout)
    stored = sum(1 for c in CASES if not c.refused)
    if whole_folder != [f"TEXT found {stored}"]:
        problems["the whole INBOX"] = whole_folder
    assert not problems, "\n".join(f"{name}: {'; '.join(p)}" for name, p in problems.items())


async def _judge(case: Case, code: int, text: str, stored: int, imap: imaplib.IMAP4, mailbox: Mailbox,
                 blobs: BlobStore) -> list[str]:
    if code != 250:
        problems = [] if case.refused else [f"refused: {code} {text}"]
        if not 500 <= code < 600 or LEAK.search(text):
            problems.append(f"unclear refusal: {code} {text}")
        return problems + ([f"{stored} message(s) stored despite {code}"] if stored else [])
    if stored != 1:
        return [f"250 ({text}) but {stored} message(s) stored"]
    if case.refused:
        return [f"accepted ({text}) though it should be refused"]
    await file_pending(mailbox, blobs)
    try:
        return await asyncio.to_thread(check_stored, imap, case)
    except AssertionError as exc:
        return [str(exc)]


def _search_whole_folder(imap: imaplib.IMAP4) -> list[str]:
    """SEARCH over every stored mail at once answers OK (one bad mail must not fail the folder);
    each mail carries a token starting "zq", so TEXT finds all of them."""
    imap.select("INBOX", readonly=True)
    answers = {key: imap.uid("SEARCH", f"{key} zq") for key in ("SUBJECT", "BODY", "TEXT")}
    failed = [f"{key} answered {status} {data!r}" for key, (status, data) in answers.items()
              if status != "OK"]
    return failed or [f"TEXT found {len(answers['TEXT'][1][0].split())}"]
