"""The Filer: one filing pass at a time, shared by everyone who asks while one runs."""

from __future__ import annotations

import asyncio

import pytest

from pizzamail.mailbox import Mailbox, filing
from pizzamail.mailbox.filing import Filer
from pizzamail.store.blobs import BlobStore
from pizzamail.store.threads import NewMessage, add_message, create_thread

MAIL = b"From: a@example.org\nSubject: hi\n\nbody\n"


async def commit_mail(mailbox: Mailbox, blobs: BlobStore, n: int) -> None:
    digest = (await blobs.save(MAIL)).digest
    async with mailbox.store.write() as db:
        thread = await create_thread(db, subject=f"hi {n}", agent="bot@x")
        await add_message(db, thread, NewMessage(
            message_id=f"m{n}@x", in_reply_to=None, refs=[], direction="in", kind="task",
            sender="a@example.org", subject=f"hi {n}", body="body", blob=digest, size=len(MAIL)))


async def test_callers_during_a_pass_share_the_next_and_find_their_mail_filed(
    mailbox: Mailbox, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, passes, looking, hold = filing.file_pending, [], asyncio.Event(), asyncio.Event()

    async def held(*args: object) -> int:
        passes.append(len(passes))
        if len(passes) == 1:  # the first pass has looked at the index and is filing what it found
            filed = await real(*args)  # type: ignore[arg-type]
            looking.set()
            await hold.wait()
            return filed
        return await real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(filing, "file_pending", held)
    filer = Filer(mailbox=mailbox, blobs=blobs)
    await commit_mail(mailbox, blobs, 0)
    first = asyncio.create_task(filer.run())
    await looking.wait()
    for n in range(1, 11):  # committed after the first pass looked: each caller needs a later pass
        await commit_mail(mailbox, blobs, n)
    later = [asyncio.create_task(filer.run()) for _ in range(10)]
    hold.set()
    assert await asyncio.gather(first, *later) == [1] + [10] * 10
    assert len(passes) == 2  # not one per caller
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None and len(await mailbox.messages(inbox)) == 11
