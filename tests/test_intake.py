"""SMTP intake over loopback with smtplib: what is accepted, what is refused, what is stored."""

from __future__ import annotations

import asyncio
import email.policy
import smtplib
import sqlite3
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from email.message import EmailMessage
from pathlib import Path

import pytest

from pizzamail.auth import Accounts
from pizzamail.intake import batch as intake_batch
from pizzamail.intake.smtp import IntakeHandler, start_smtp_server
from pizzamail.intake.tasks import Stored
from pizzamail.mail.parse import MAX_HEADER, MAX_REFERENCES, parse_mail
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.events import MessageAdded, RunQueued
from pizzamail.tls import generate_certificate, server_context
from tests.mailcorpus import deep_multipart, deep_rfc822

OWNER = "me@pizzamail.localhost"
BOT = "bot@pizzamail.localhost"
ACCOUNTS = Accounts(user="me", password="secret-pw", addresses=frozenset({OWNER}))


@pytest.fixture
async def smtp_port(store: Store, blobs: BlobStore) -> AsyncIterator[int]:
    handler = IntakeHandler(
        store=store, blobs=blobs, accounts=ACCOUNTS, agents=frozenset({BOT}),
        domain="pizzamail.localhost",
    )
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=100_000)
    yield int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()


def mail(subject: str = "Summarise the report", body: str = "Please summarise it.", **headers: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = headers.pop("From", OWNER)
    msg["To"] = BOT
    msg["Subject"] = subject
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    msg.set_content(body)
    return msg.as_bytes(policy=email.policy.SMTP)


def send(port: int, data: bytes, *, login: tuple[str, str] | None = ("me", "secret-pw"),
         sender: str = OWNER, rcpt: str = BOT) -> dict[str, tuple[int, bytes]]:
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        if login:
            client.login(*login)
        return client.sendmail(sender, [rcpt], data)


async def count(store: Store, table: str) -> int:
    row = await store.fetchone(f"SELECT count(*) AS n FROM {table}")
    assert row is not None
    return int(row["n"])


async def test_owner_mail_is_stored_with_a_queued_run(smtp_port: int, store: Store, blobs: BlobStore) -> None:
    data = mail(Message_ID="<task-1@client>")
    assert await asyncio.to_thread(send, smtp_port, data) == {}
    [msg] = await store.fetchall("SELECT * FROM messages")
    assert msg["message_id"] == "task-1@client"
    assert msg["body"] == "Please summarise it."
    assert await blobs.load(msg["blob"]) == data
    [run] = await store.fetchall("SELECT * FROM runs")
    assert run["status"] == "queued" and run["thread_id"] == msg["thread_id"]


async def test_follow_up_continues_the_thread(smtp_port: int, store: Store) -> None:
    await asyncio.to_thread(send, smtp_port, mail(Message_ID="<a@client>"))
    follow = mail("Re: Summarise the report", "And the appendix?", Message_ID="<b@client>",
                  In_Reply_To="<a@client>", References="<a@client>")
    await asyncio.to_thread(send, smtp_port, follow)
    rows = await store.fetchall("SELECT thread_id FROM messages ORDER BY id")
    assert [r["thread_id"] for r in rows] == [1, 1]
    assert await count(store, "threads") == 1
    assert await count(store, "runs") == 2


async def test_a_retried_message_is_not_stored_twice(smtp_port: int, store: Store) -> None:
    data = mail(Message_ID="<same@client>")
    await asyncio.to_thread(send, smtp_port, data)
    await asyncio.to_thread(send, smtp_port, data)
    assert await count(store, "messages") == 1


async def test_malformed_mime_is_still_stored(smtp_port: int, store: Store) -> None:
    data = (b"From: me@pizzamail.localhost\r\nTo: bot@pizzamail.localhost\r\nSubject: \xff\xfe odd\r\n"
            b"Content-Type: multipart/mixed; boundary=\"never-closed\"\r\n\r\n--never-closed\r\n"
            b"Content-Type: text/plain; charset=no-such-charset\r\n\r\ncheck this\r\n")
    await asyncio.to_thread(send, smtp_port, data)
    [msg] = await store.fetchall("SELECT body FROM messages")
    assert "check this" in msg["body"]


@pytest.mark.parametrize("build", [deep_multipart, deep_rfc822])
async def test_a_mail_nested_950_deep_is_stored_as_a_task(
    smtp_port: int, store: Store, build: Callable[[str, int], bytes]
) -> None:
    assert await asyncio.to_thread(send, smtp_port, build("zqdeep", 950)) == {}
    [msg] = await store.fetchall("SELECT subject, body FROM messages")
    assert msg["subject"] == "deep zqdeep"
    assert "more than 100 levels deep" in msg["body"]  # the agent (and the user) learn why parts are missing


async def test_an_ordinary_lf_text_file_over_1_kb_is_accepted(smtp_port: int, store: Store) -> None:
    # as `curl -T report.txt` sends a file written on Linux: LF line ends, CRLF only at the end
    lines = [b"line %d of the nightly report" % i for i in range(100)]
    head = b"From: " + OWNER.encode() + b"\nTo: " + BOT.encode() + b"\nSubject: nightly\n\n"
    data = head + b"\n".join(lines)
    assert len(data) > 2000
    assert await asyncio.to_thread(send, smtp_port, data) == {}
    [msg] = await store.fetchall("SELECT subject, body FROM messages")
    assert msg["subject"] == "nightly" and msg["body"].splitlines()[-1] == "line 99 of the nightly report"


@pytest.mark.parametrize(("error", "code", "text"), [
    (OSError(28, "No space left on device: '/home/me/.pizzamail/blobs/ab'"), 451, "try again later"),
    (RuntimeError("tasks.py line 42: invariant broken for thread 7"), 451, "try again later"),
])
async def test_an_unexpected_error_answers_without_internal_text(
    smtp_port: int, store: Store, monkeypatch: pytest.MonkeyPatch, error: Exception, code: int, text: str
) -> None:
    async def broken(*args: object, **kwargs: object) -> Stored:
        raise error

    monkeypatch.setattr(intake_batch, "record_task", broken)
    got_code, got_text = await asyncio.to_thread(refused, smtp_port, mail())
    assert (got_code, text in got_text) == (code, True), got_text
    assert not any(leak in got_text for leak in ("Error", "space", "/home", "tasks.py", "thread 7"))
    monkeypatch.undo()
    assert await asyncio.to_thread(send, smtp_port, mail()) == {}  # the session and server still work


async def test_an_unexpected_error_before_data_is_try_again_later_too(
    smtp_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answered by aiosmtpd's exception hook (the handler's handle_exception), not by DATA's own
    except: what a bug in MAIL or RCPT says is 451 as well, never aiosmtpd's "500 Error: (Name) text"."""
    def broken(*args: object) -> bool:
        raise RuntimeError("rate.py line 9: bucket for sender cron is None")

    monkeypatch.setattr(IntakeHandler, "_within_rate", broken)
    code, text = await asyncio.to_thread(refused, smtp_port, mail())
    assert code == 451 and "try again later" in text and "rate.py" not in text, text


def refused(port: int, data: bytes, **kwargs: object) -> tuple[int, str]:
    try:
        send(port, data, **kwargs)  # type: ignore[arg-type]
    except smtplib.SMTPRecipientsRefused as exc:
        code, text = next(iter(exc.recipients.values()))
        return code, text.decode()
    except (smtplib.SMTPSenderRefused, smtplib.SMTPDataError, smtplib.SMTPAuthenticationError) as exc:
        return exc.smtp_code, exc.smtp_error.decode()
    raise AssertionError("the server accepted the mail")


@pytest.mark.parametrize(
    ("kwargs", "code", "text"),
    [
        ({"login": None}, 530, "Authentication required"),
        ({"login": ("me", "wrong")}, 535, "Authentication credentials invalid"),
        ({"login": ("someone", "secret-pw")}, 535, "Authentication credentials invalid"),
        ({"sender": "mallory@example.org"}, 550, "may not send tasks"),
        ({"rcpt": "nobody@pizzamail.localhost"}, 550, "write to bot@pizzamail.localhost"),
    ],
)
async def test_refusals_store_nothing(
    smtp_port: int, store: Store, kwargs: dict[str, object], code: int, text: str
) -> None:
    got = await asyncio.to_thread(refused, smtp_port, mail(), **kwargs)
    assert got[0] == code and text in got[1]
    assert await count(store, "messages") == 0


async def test_oversized_mail_is_refused_with_552(smtp_port: int, store: Store) -> None:
    code, _ = await asyncio.to_thread(refused, smtp_port, mail(body="x" * 200_000))
    assert code == 552
    assert await count(store, "messages") == 0


async def test_forged_from_header_is_refused(smtp_port: int, store: Store) -> None:
    code, text = await asyncio.to_thread(refused, smtp_port, mail(From="boss@example.org"))
    assert (code, "is not your address" in text) == (550, True)
    assert await count(store, "messages") == 0


async def test_empty_mail_is_refused_with_a_reason(smtp_port: int, store: Store) -> None:
    code, text = await asyncio.to_thread(refused, smtp_port, mail(subject="", body=""))
    assert code == 554 and "empty mail" in text
    assert await count(store, "messages") == 0


async def test_plus_address_reaches_the_agent(smtp_port: int, store: Store) -> None:
    await asyncio.to_thread(send, smtp_port, mail(), rcpt="bot+abc123@pizzamail.localhost")
    [thread] = await store.fetchall("SELECT agent FROM threads")
    assert thread["agent"] == BOT


async def test_a_stored_task_is_announced_only_once_committed(store: Store, smtp_port: int) -> None:
    """Whoever follows the store's events finds the row from inside its callback: read by a
    connection of its own (as another process would), so a row not yet committed is not there."""
    seen: list[tuple[str, tuple[str, str] | None]] = []

    def committed(table: str, column: str, row: int) -> None:
        with closing(sqlite3.connect(store.path)) as db:
            found = db.execute(f"SELECT {column}, thread_id FROM {table} WHERE id = ?", (row,)).fetchone()
        seen.append((table, found and (str(found[0]), str(found[1]))))

    store.events.subscribe(MessageAdded, lambda e: committed("messages", "kind", e.message))
    store.events.subscribe(RunQueued, lambda e: committed("runs", "status", e.run))
    await asyncio.to_thread(send, smtp_port, mail())
    [thread] = await store.fetchall("SELECT id FROM threads")
    assert seen == [("messages", ("task", str(thread["id"]))), ("runs", ("queued", str(thread["id"])))]


def test_parse_reads_threading_headers_and_encoded_subject() -> None:
    parsed = parse_mail(
        b"From: Me <ME@pizzamail.localhost>\r\nSubject: =?utf-8?q?h=C3=A9llo?=\r\n"
        b"Message-ID: <a@b>\r\nReferences: <x@y> <z@w>\r\nIn-Reply-To: <z@w>\r\n\r\nhi\r\n"
    )
    assert (parsed.subject, parsed.sender, parsed.message_id) == ("héllo", "me@pizzamail.localhost", "a@b")
    assert parsed.thread_refs() == ["x@y", "z@w"]


def test_parse_reads_only_so_much_of_a_huge_header() -> None:
    # the modern policy's parser is quadratic in a value's words: 1 MB of them would take minutes
    refs = b" ".join(b"<r%d@x>" % n for n in range(5_000))
    parsed = parse_mail(b"Subject: " + b"word " * 200_000 + b"\r\nReferences: " + refs + b"\r\n\r\nhi\r\n")
    assert parsed.subject.startswith("word word") and len(parsed.subject) <= MAX_HEADER
    assert len(parsed.references) == MAX_REFERENCES
    first, second, *_, last = parsed.references
    assert (first, second, last) == ("r0@x", "r4901@x", "r4999@x")  # the thread's start, the newest


def test_parse_reads_8_bit_message_ids_as_utf8() -> None:
    parsed = parse_mail(b"Message-ID: <caf\xc3\xa9-\xff@x>\r\nIn-Reply-To: <\xe9@y>\r\n\r\nhi\r\n")
    assert (parsed.message_id, parsed.in_reply_to) == ("caf\u00e9-\ufffd@x", "\ufffd@y")


def test_parse_html_only_mail_gives_text() -> None:
    parsed = parse_mail(b"Content-Type: text/html\r\n\r\n<p>Hi <b>you</b></p>\r\n")
    assert parsed.body == "Hi you"


def send_with_auth_login(port: int, data: bytes) -> dict[str, tuple[int, bytes]]:
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        client.ehlo()
        client.user, client.password = "me", "secret-pw"
        code, _ = client.auth("LOGIN", client.auth_login, initial_response_ok=False)
        assert code == 235
        return client.sendmail(OWNER, [BOT], data)


async def test_auth_login_mechanism_works_too(smtp_port: int, store: Store) -> None:
    assert await asyncio.to_thread(send_with_auth_login, smtp_port, mail()) == {}
    assert await count(store, "messages") == 1


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    generate_certificate(cert, key, hosts=["pizzamail.localhost"])
    return cert, key


async def test_starttls_is_required_when_bound_beyond_loopback(
    store: Store, blobs: BlobStore, tls_files: tuple[Path, Path]
) -> None:
    handler = IntakeHandler(store=store, blobs=blobs, accounts=ACCOUNTS, agents=frozenset({BOT}),
                            domain="pizzamail.localhost")
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=10_000,
                                     tls=server_context(*tls_files), require_tls=True)
    port = int(server.sockets[0].getsockname()[1])
    client_tls = ssl.create_default_context(cafile=str(tls_files[0]))

    def without_tls() -> int:
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
            client.ehlo()
            return client.docmd("AUTH", "PLAIN AG1lAHNlY3JldC1wdw==")[0]

    def with_tls() -> dict[str, tuple[int, bytes]]:
        with smtplib.SMTP("localhost", port, timeout=10) as client:
            client.starttls(context=client_tls)
            client.login("me", "secret-pw")
            return client.sendmail(OWNER, [BOT], mail())

    try:
        assert await asyncio.to_thread(without_tls) == 530
        assert await asyncio.to_thread(with_tls) == {}
    finally:
        server.close()
        await server.wait_closed()
    assert await count(store, "messages") == 1


async def test_a_small_task_is_parsed_in_the_loop_a_large_or_many_part_one_in_a_thread(
    smtp_port: int, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hop to a worker thread and back costs a small mail more than its parse; a mail whose
    parse may take long (large, or of many parts) still leaves the loop free meanwhile."""
    to_thread, sent_away = asyncio.to_thread, []

    async def counted(work: Callable[..., object], *args: object) -> object:
        sent_away.append(work)
        return await to_thread(work, *args)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    await asyncio.to_thread(send, smtp_port, mail("small"))
    assert sent_away == [send]
    await asyncio.to_thread(send, smtp_port, mail("large", body="many words\n" * 7_000))
    parts = EmailMessage()
    parts["From"], parts["To"], parts["Subject"] = OWNER, BOT, "parts"
    parts.set_content("see the files")
    for n in range(6):
        parts.add_attachment(b"x", maintype="application", subtype="octet-stream", filename=f"{n}.bin")
    await asyncio.to_thread(send, smtp_port, parts.as_bytes(policy=email.policy.SMTP))
    assert len(sent_away) == 5 and sent_away.count(send) == 3  # the other two: their parses
    assert await count(store, "messages") == 3
