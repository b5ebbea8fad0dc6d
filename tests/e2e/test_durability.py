"""A server killed at any moment loses nothing and replies exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import smtplib
import sqlite3
import threading
from pathlib import Path

from pizzamail.home import Home
from pizzamail.store import Store
from pizzamail.store.blobs import digest_of
from pizzamail.store.location import blobs_for
from tests.e2e.crash import CRASHED
from tests.e2e.harness import Served, task_mail
from tests.e2e.test_roundtrip import connect, fetch_all, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, gated, text


async def test_sigkill_after_250_resumes_and_replies_once(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    never = threading.Event()
    fake_openai.script([gated(text("lost answer"), never), text("The answer, after the crash.")])
    served.start()
    served.send(task_mail("Count the open issues."))
    fake_openai.wait_requests(1)  # the run is in flight: the model call is held
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL

    served.start()
    client = await connect(served)
    await idle_until_exists(client, 2)
    await client.logout()
    fake_openai.wait_requests(2)

    replies = [m for _, m in fetch_all(served) if m["X-Pizzamail-Run"]]
    assert len(replies) == 1
    body = replies[0].get_body(("plain",))
    assert body is not None and "after the crash" in body.get_content()
    with sqlite3.connect(served.home / "state.db") as db:
        runs = db.execute("SELECT status, attempts FROM runs").fetchall()
        outgoing = db.execute("SELECT count(*) FROM messages WHERE direction = 'out'").fetchone()
    assert runs == [("done", 1)]  # the kill gave its start back: one attempt, the one that finished
    assert outgoing == (1,)


def test_a_crash_between_the_model_s_last_answer_and_the_run_s_end_asks_again_and_replies_once(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    # the answer that ends a run is written with the run's end: a crash in between loses only it
    fake_openai.script([text("Lost with the crash."), text("Answered again.")])
    served.start(crash_after="pizzamail.runner.pool:Runner._checkpoint")
    served.send(task_mail("Sum it up."))
    assert served.stop(None) == CRASHED

    served.start()
    served.wait_for("run 1 done")
    fake_openai.wait_requests(2)
    with sqlite3.connect(served.home / "state.db") as db:
        steps = db.execute("SELECT seq, kind FROM steps").fetchall()
        outgoing = db.execute("SELECT count(*) FROM messages WHERE direction = 'out'").fetchone()
    assert steps == [(0, "model")] and outgoing == (1,)
    replies = [m for _, m in fetch_all(served) if m["X-Pizzamail-Run"]]
    assert len(replies) == 1
    body = replies[0].get_body(("plain",))
    assert body is not None and "Answered again." in body.get_content()
    served.stop()


def test_a_crash_between_the_maildir_rename_and_the_index_commit_files_the_mail_once(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([], then=text("Filed after all."))
    # the first Maildir write is the task's copy in INBOX: the process dies right after its rename
    served.start(crash_after="pizzamail.mailbox.maildir:write_all")
    served.send(task_mail("Count the open issues."))
    assert served.stop(None) == CRASHED

    served.start()
    assert "filed 1 message(s) left unfiled by the last run" in "\n".join(served.output)
    served.wait_for("run 1 done")
    maildir = served.home / "Maildir"
    files = sorted(name.partition(":2,")[0]
                   for name in os.listdir(maildir / "new") + os.listdir(maildir / "cur"))
    with sqlite3.connect(served.home / "state.db") as db:
        unfiled = db.execute("SELECT count(*) FROM messages WHERE filed = 0").fetchone()
        indexed = db.execute("SELECT m.name, m.message_ref FROM mail m JOIN folders f"
                             " ON f.id = m.folder_id WHERE f.name = 'INBOX' ORDER BY m.uid").fetchall()
    assert unfiled == (0,)
    assert [name for name, _ in indexed] == files and len(files) == 2  # the task and its reply
    assert sorted(ref for _, ref in indexed) == [1, 2]
    subjects = [m["Subject"] for _, m in fetch_all(served)]
    assert subjects == ["Plan the team offsite", "Re: Plan the team offsite"]
    served.stop()

    served.start()  # a quiet start: nothing is left to file
    served.stop()
    assert not [line for line in served.output if "left unfiled" in line]


def test_sigkill_amid_concurrent_clients_keeps_every_mail_that_got_250(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    """Mails from several clients share commits (group commit); whatever was answered 250 when
    the process died is in the store, whichever batch it was in."""
    fake_openai.script([], then=text("Done."))
    served.start()
    answered: list[str] = []
    enough = threading.Event()

    def client(n: int) -> None:
        with contextlib.suppress(OSError, smtplib.SMTPException), \
                smtplib.SMTP("127.0.0.1", served.smtp, timeout=10) as smtp:
            smtp.login("me", served.password)
            for i in range(200):
                msg = task_mail(f"Task {i} of client {n}.", msgid=f"<c{n}-{i}@client.example>")
                smtp.send_message(msg)
                answered.append(f"c{n}-{i}@client.example")
                if len(answered) >= 40:
                    enough.set()

    clients = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for thread in clients:
        thread.start()
    assert enough.wait(60)
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL
    for thread in clients:
        thread.join()
    with sqlite3.connect(served.home / "state.db") as db:
        stored = {row[0] for row in db.execute("SELECT message_id FROM messages WHERE direction = 'in'")}
    assert set(answered) <= stored and len(answered) >= 40
    loaded = asyncio.run(bytes_of_every_message(served.home))
    assert all(f"<{message_id}>".encode() in loaded[message_id] for message_id in answered)


async def bytes_of_every_message(home: Path) -> dict[str, bytes]:
    """Each stored message's bytes, by Message-ID, as the home's blob store gives them (checked
    against the digest that names them)."""
    async with Store(path=home / "state.db") as store:
        blobs = blobs_for(Home(root=home), store)
        rows = await store.fetchall("SELECT message_id, blob FROM messages")
        loaded = {str(row[0]): await blobs.load(str(row[1])) for row in rows}
        assert all(digest_of(loaded[str(row[0])]) == row[1] for row in rows)
        return loaded
