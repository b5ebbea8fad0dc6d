"""Group commit of SMTP intake: mails arriving together share a transaction, each is answered
after the commit that holds it, and one mail's failure is its own."""

from __future__ import annotations

import asyncio
import email.policy
import smtplib
import sqlite3
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from pizzamail.auth import Accounts
from pizzamail.errors import TransactionLost
from pizzamail.intake import batch as intake_batch
from pizzamail.intake.batch import GroupCommit
from pizzamail.intake.smtp import IntakeHandler, start_smtp_server
from pizzamail.intake.tasks import Received, Stored, record_task
from pizzamail.mail.parse import parse_mail
from pizzamail.store import Statement, Store, Tx
from pizzamail.store.blobs import Blob, BlobStore, digest_of
from pizzamail.store.events import CommitEvent, RunQueued

OWNER, BOT = "me@pizzamail.localhost", "bot@pizzamail.localhost"
ACCOUNTS = Accounts(user="me", password="secret-pw", addresses=frozenset({OWNER}))


@pytest.fixture(params=["sqlite", "postgresql"])
def store_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def mail(n: int, *, msgid: str | None = None) -> bytes:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = OWNER, BOT, f"Task {n}"
    msg["Message-ID"] = msgid or f"<task-{n}@client>"
    msg.set_content(f"Do thing {n}.")
    return msg.as_bytes(policy=email.policy.SMTP)


def received(raw: bytes) -> Received:
    return Received(raw=raw, parsed=parse_mail(raw), agent=BOT, domain="pizzamail.localhost")


def count_commits(store: Store) -> list[list[CommitEvent]]:
    """Every commit publishes its events once (an empty list for none)."""
    commits: list[list[CommitEvent]] = []
    publish = store.events.publish

    def counted(changes: list[CommitEvent]) -> None:
        commits.append(list(changes))
        publish(changes)

    store.events.publish = counted  # type: ignore[method-assign]
    return commits


async def test_mails_arriving_together_are_one_commit(store: Store, blobs: BlobStore) -> None:
    commits = count_commits(store)
    group = GroupCommit(store=store, blobs=blobs)
    stored = await asyncio.gather(*(group.commit(received(mail(n))) for n in range(10)))
    assert len(commits) == 1
    assert sorted(s.run_id for s in stored if s.run_id is not None) == list(range(1, 11))
    assert sorted(e.run for e in commits[0] if isinstance(e, RunQueued)) == list(range(1, 11))


class SavedAtOnce:
    """Blobs saved without a thread (so a test knows when a batch waits for the store)."""

    async def save_in(self, db: Tx, datas: list[bytes]) -> list[Blob]:
        return [Blob(digest=digest_of(data), size=len(data)) for data in datas]


async def test_mails_waiting_for_the_writer_share_its_next_commit(store: Store) -> None:
    commits = count_commits(store)
    group = GroupCommit(store=store, blobs=SavedAtOnce())  # type: ignore[arg-type]
    async with store.write():  # holds the writer: the mails wait for it
        waiting = [asyncio.create_task(group.commit(received(mail(n)))) for n in range(6)]
        await asyncio.sleep(0)  # the mails' sessions: the first starts the batch
        await asyncio.sleep(0)  # the batch: it waits for the writer
        assert store._lock.waiting(priority=True) == 1
    await asyncio.gather(*waiting)
    runs_per_commit = [sum(isinstance(e, RunQueued) for e in c) for c in commits]
    assert runs_per_commit == [0, 6]  # the held write, then the six together


async def test_the_next_batch_forms_while_a_commit_is_in_flight(store: Store) -> None:
    """The first mail is committed at once (nobody waits for company); those arriving meanwhile
    share the next commit."""
    commits = count_commits(store)
    group = GroupCommit(store=store, blobs=SavedAtOnce())  # type: ignore[arg-type]
    first = asyncio.create_task(group.commit(received(mail(0))))
    await asyncio.sleep(0)  # the mail's session: it starts the batch
    await asyncio.sleep(0)  # the batch takes the free writer: its commit is under way
    assert store._lock._held
    rest = [asyncio.create_task(group.commit(received(mail(n)))) for n in range(1, 6)]
    await asyncio.gather(first, *rest)
    runs_per_commit = [sum(isinstance(e, RunQueued) for e in c) for c in commits]
    assert runs_per_commit == [1, 5]


async def test_a_failing_mail_fails_alone_and_a_duplicate_is_told(
    store: Store, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits = count_commits(store)

    async def broken_for_task_2(db: Tx, mail: Received, blob: Blob) -> Stored:
        stored = await record_task(db, mail, blob)  # its rows are written, then it fails
        if mail.parsed.subject == "Task 2":
            raise RuntimeError("invariant broken")
        return stored

    monkeypatch.setattr(intake_batch, "record_task", broken_for_task_2)
    group = GroupCommit(store=store, blobs=blobs)
    answers = await asyncio.gather(
        *(group.commit(received(raw)) for raw in [mail(1), mail(2), mail(3), mail(1)]),
        return_exceptions=True)
    assert isinstance(answers[1], RuntimeError)
    assert [type(a) for a in answers] == [Stored, RuntimeError, Stored, Stored]
    assert isinstance(answers[3], Stored) and answers[3].duplicate
    subjects = [r[0] for r in await store.fetchall("SELECT subject FROM messages ORDER BY id")]
    assert subjects == ["Task 1", "Task 3"]
    assert len(commits) == 1 and sum(isinstance(e, RunQueued) for e in commits[0]) == 2


@pytest.mark.parametrize("store_backend", ["sqlite"])  # SQLite's own rollback of a whole transaction
async def test_a_mail_whose_failure_ends_the_transaction_fails_the_batch(
    store: Store, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite rolls the whole transaction back by itself on some errors (SQLITE_FULL, SQLITE_IOERR,
    # SQLITE_NOMEM): the batch's blobs are gone with it, and no later mail may be recorded (each
    # savepoint would then commit on its own, naming a blob that is not there).
    async def full_disk_at_task_2(db: Tx, mail: Received, blob: Blob) -> Stored:
        if mail.parsed.subject == "Task 2":
            await db.execute("ROLLBACK")  # what SQLite does itself on SQLITE_FULL
            raise sqlite3.OperationalError("database or disk is full")
        return await record_task(db, mail, blob)

    monkeypatch.setattr(intake_batch, "record_task", full_disk_at_task_2)
    group = GroupCommit(store=store, blobs=blobs)
    answers = await asyncio.gather(*(group.commit(received(mail(n))) for n in (1, 2, 3)),
                                   return_exceptions=True)
    # none of them is committed, and each sender is told to try again (451)
    assert all(isinstance(a, TransactionLost) for a in answers), answers
    assert (await store.fetchall("SELECT count(*) FROM messages"))[0][0] == 0


class Sent:
    """A transaction that notes each statement sent through it: its verb and table."""

    def __init__(self, db: Tx) -> None:
        self.db, self.statements = db, list[str]()

    def execute(self, sql: str, parameters: Iterable[Any] | None = None, /) -> Statement:
        words = sql.split()
        table = next(words[i + 1] for i, w in enumerate(words) if w in ("FROM", "INTO", "UPDATE"))
        self.statements.append(f"{words[0]} {table.partition('(')[0]}")
        return self.db.execute(sql, parameters)


async def test_a_task_is_recorded_in_one_statement_a_row(store: Store, blobs: BlobStore) -> None:
    """Each statement is a turn of the writer's thread: a new task reads once (a duplicate? the
    thread of its references?) and writes its thread, message, run and event; a reply in that
    thread writes no thread of its own but moves the thread's status."""
    first = received(mail(1, msgid="<first@client>"))
    raw = mail(2).replace(b"Message-ID:", b"In-Reply-To: <first@client>\r\nMessage-ID:")
    reply = received(raw)
    sent: list[list[str]] = []
    for task in (first, reply):
        blob = await blobs.save(task.raw)
        async with store.write() as db:
            counted = Sent(db)
            stored = await record_task(counted, task, blob)  # type: ignore[arg-type]
        sent.append(counted.statements)
        assert stored.run_id is not None
    assert sent == [
        ["SELECT messages", "INSERT threads", "INSERT messages", "INSERT runs", "INSERT events"],
        ["SELECT messages", "INSERT messages", "INSERT runs", "UPDATE threads", "INSERT events"],
    ]
    [row] = await store.fetchall("SELECT count(DISTINCT thread_id), min(folder) FROM messages")
    assert (row[0], row[1]) == (1, "INBOX")


@pytest.fixture
async def smtp_port(store: Store, blobs: BlobStore) -> AsyncIterator[int]:
    handler = IntakeHandler(store=store, blobs=blobs, accounts=ACCOUNTS, agents=frozenset({BOT}),
                            domain="pizzamail.localhost")
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=100_000)
    yield int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()


def send_and_check(port: int, db_path: Path, client: int, count: int) -> list[str]:
    """Send ``count`` mails on one connection; after each 250 the mail must be committed: read
    back through a connection of our own. Returns what was missing at its 250."""
    missing = []
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as smtp, sqlite3.connect(db_path) as db:
        smtp.login("me", "secret-pw")
        for n in range(count):
            msgid = f"<c{client}-{n}@client>"
            smtp.sendmail(OWNER, [BOT], mail(n, msgid=msgid))
            found = db.execute("SELECT 1 FROM messages WHERE message_id = ?", (msgid.strip("<>"),))
            if found.fetchone() is None:
                missing.append(msgid)
    return missing


@pytest.mark.parametrize("store_backend", ["sqlite"])  # read back through SQLite's own connection
async def test_each_250_comes_after_the_commit_that_holds_its_mail(
    store: Store, smtp_port: int
) -> None:
    commits = count_commits(store)
    assert store.path is not None
    with ThreadPoolExecutor(6) as pool:
        answers = await asyncio.gather(*(
            asyncio.get_running_loop().run_in_executor(pool, send_and_check, smtp_port, store.path, c, 8)
            for c in range(6)))
    assert [m for missing in answers for m in missing] == []
    rows = await store.fetchall("SELECT count(*) FROM messages")
    assert rows[0][0] == 48
    assert len(commits) < 48  # some arrived together and shared a commit
