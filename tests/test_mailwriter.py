"""The one mail writer: a mail in a thread, a task received, their bytes saved off the event loop."""

from __future__ import annotations

import os
import threading

import pytest

from pizzamail.intake.tasks import store_task, submit_text
from pizzamail.mail.build import build_mail
from pizzamail.mail.parse import parse_mail
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailwriter import add_mail, add_task, message_row
from pizzamail.store.runs import get_run
from pizzamail.store.threads import thread_messages


def note(message_id: str, text: str = "on it") -> bytes:
    return build_mail(sender="bot@x", to="me@x", subject="Re: report", text=text,
                      message_id=message_id).as_bytes()


async def test_blobs_are_written_and_fsynced_off_the_event_loop(
    store: Store, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced_on: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced_on.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    stored = await submit_text(store, blobs, "the nightly report", sender="me@x", agent="bot@x", domain="x")
    assert stored.run_id is not None
    assert synced_on and threading.main_thread().name not in synced_on


async def test_a_task_is_its_message_thread_and_queued_run_in_one(store: Store, blobs: BlobStore) -> None:
    task_mail = build_mail(sender="me@x", to="bot@x", subject="Nightly", text="summarise the report",
                           message_id="t1@x")
    blob = await blobs.save(task_mail.as_bytes())
    row = message_row(task_mail, blob, direction="in", kind="task", sender="me@x", flags="\\Seen")
    async with store.write() as db:
        task = await add_task(db, row, thread_id=None, agent="bot@x", event="task.triggered",
                              source="hook:ci")
    run = await get_run(store, task.run_id)
    [message] = await thread_messages(store, task.thread_id)
    assert (run.status, run.source, run.thread_id) == ("queued", "hook:ci", task.thread_id)
    assert (message.id, message.kind, message.subject) == (task.message_row, "task", "Nightly")
    assert await blobs.load(message.blob) == task_mail.as_bytes() and message.size == blob.size


async def test_a_mail_written_once_is_not_stored_again(store: Store, blobs: BlobStore) -> None:
    stored = await submit_text(store, blobs, "report", sender="me@x", agent="bot@x", domain="x")
    assert stored.thread_id is not None
    progress = build_mail(sender="bot@x", to="me@x", subject="Re: report", text="half way",
                          message_id="progress.1@x")
    blob = await blobs.save(progress.as_bytes())
    rows = []
    for _ in range(2):  # a resumed run posting the same note again
        async with store.write() as db:
            rows.append(await add_mail(db, stored.thread_id, message_row(progress, blob, kind="progress",
                                                                        sender="bot@x"), once=True))
    assert rows[0] is not None and rows[1] is None
    assert [m.kind for m in await thread_messages(store, stored.thread_id)] == ["task", "progress"]


async def test_a_retried_submission_is_stored_once(store: Store, blobs: BlobStore) -> None:
    raw = note("retry@client", "the same task twice")
    first = await store_task(store, blobs, raw, parse_mail(raw), agent="bot@x", domain="x")
    again = await store_task(store, blobs, raw, parse_mail(raw), agent="bot@x", domain="x")
    assert (first.duplicate, again.duplicate, again.run_id) == (False, True, None)
