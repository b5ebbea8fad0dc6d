"""The Filer: one filing pass at a time, shared by everyone who asks while one runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pizzamail.mailbox import Mailbox, filing, maildir
from pizzamail.mailbox.filing import Filer
from pizzamail.mailbox.writing import Delivery
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


async def test_a_pass_files_a_folders_mail_in_one_write_of_its_files_and_one_commit(
    mailbox: Mailbox, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(70):
        await commit_mail(mailbox, blobs, n)
    writes: list[int] = []
    commits: list[object] = []
    write_all, write_at_once = maildir.write_all, mailbox.store.write_at_once

    def counted_write(folder: object, mails: list[Any]) -> list[str]:
        writes.append(len(mails))
        return write_all(folder, mails)  # type: ignore[arg-type]

    async def counted_commit(work: Any, **options: Any) -> Any:
        commits.append(work)
        return await write_at_once(work, **options)

    monkeypatch.setattr(maildir, "write_all", counted_write)
    monkeypatch.setattr(mailbox.store, "write_at_once", counted_commit)
    assert await Filer(mailbox=mailbox, blobs=blobs).run() == 70
    assert writes == [filing.AT_ONCE, 70 - filing.AT_ONCE] and len(commits) == 2
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    filed = await mailbox.messages(inbox)
    assert len(filed) == 70 and len({m.name for m in filed}) == 70
    assert await Filer(mailbox=mailbox, blobs=blobs).run() == 0  # every one counts as filed


async def test_a_delivery_of_several_indexes_a_file_a_crash_left_unindexed_once(mailbox: Mailbox) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    maildir.write_all(mailbox.path(inbox), [("left-1", MAIL, 1_700_000_000, set())])  # crash before its row
    uids = await mailbox.deliver_each(inbox, [Delivery(data=MAIL, base="left-1"),
                                              Delivery(data=MAIL, base="new-2")])
    again = await mailbox.deliver_each(inbox, [Delivery(data=MAIL, base="new-2"),
                                               Delivery(data=MAIL, base="left-1")])
    assert again == uids[::-1]
    assert sorted(m.name for m in await mailbox.messages(inbox)) == ["left-1", "new-2"]
    assert len(list((mailbox.path(inbox) / "new").iterdir())) == 2
