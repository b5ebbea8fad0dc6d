"""Spare files: an expunged message's file is emptied, kept, and written again by the next delivery."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pizzamail.home import Home
from pizzamail.mailbox import Mailbox, spares
from pizzamail.store import Store
from pizzamail.store.mailindex import Folder

MAIL = b"From: a@example.org\r\nSubject: secret\r\n\r\nthe launch code\r\n"


@pytest.fixture(autouse=True)
def _no_spares_across_tests(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(spares, "REST", 0.0)  # written again at once (the test of the rest sets its own)
    yield
    spares._spares.clear()


async def activity(mailbox: Mailbox) -> Folder:
    return await mailbox.folder("Activity") or await mailbox.create_folder("Activity")


async def paths(mailbox: Mailbox, folder: Folder) -> dict[int, Path]:
    return {row.uid: mailbox.file_path(folder, row) for row in await mailbox.messages(folder)}


def spare_files(mailbox: Mailbox, folder: Folder) -> list[Path]:
    return sorted((mailbox.path(folder) / "tmp").glob(f"{spares.PREFIX}*"))


async def test_the_next_delivery_writes_into_the_expunged_message_s_file_emptied_meanwhile(
    mailbox: Mailbox
) -> None:
    folder = await activity(mailbox)
    old = await mailbox.deliver(folder, MAIL)
    before = (await paths(mailbox, folder))[old].stat().st_ino
    await mailbox.expunge(folder, [old])
    [spare] = spare_files(mailbox, folder)
    assert spare.stat().st_size == 0  # the expunged bytes are gone from the disk at once
    new = await mailbox.deliver(folder, b"Subject: next\r\n\r\nanother\r\n")
    file = (await paths(mailbox, folder))[new]
    assert file.stat().st_ino == before  # no inode freed and none allocated
    assert file.read_bytes() == b"Subject: next\r\n\r\nanother\r\n"
    assert await mailbox.read(folder, (await mailbox.messages(folder))[0]) == file.read_bytes()
    assert spare_files(mailbox, folder) == []


async def test_a_folder_keeps_at_most_its_share_of_spares(
    mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spares, "KEPT", 2)
    folder = await activity(mailbox)
    uids = [await mailbox.deliver(folder, MAIL) for _ in range(5)]
    await mailbox.expunge(folder, uids)
    assert len(spare_files(mailbox, folder)) == 2
    assert not list((mailbox.path(folder) / "new").iterdir())


async def test_spares_a_stopped_process_left_are_emptied_and_taken_by_the_next_start(
    mailbox: Mailbox, home: Home, store: Store
) -> None:
    folder = await activity(mailbox)
    uid = await mailbox.deliver(folder, MAIL)
    file = (await paths(mailbox, folder))[uid]
    # killed between putting the file aside and emptying it: the bytes are still there
    left = mailbox.path(folder) / "tmp" / f"{spares.PREFIX}999.1"
    os.rename(file, left)
    spares._spares.clear()  # a new process knows none
    again = await Mailbox(root=home.maildir, store=store).open()
    assert left.stat().st_size == 0
    assert await again.messages(folder) == []  # the index lost the file it named
    taken = left.stat().st_ino
    new = await again.deliver(folder, b"Subject: after\r\n\r\nx\r\n")
    assert (await paths(again, folder))[new].stat().st_ino == taken
    assert not left.exists()


async def test_a_spare_another_process_took_is_not_written_into_twice(mailbox: Mailbox) -> None:
    folder = await activity(mailbox)
    uids = [await mailbox.deliver(folder, MAIL) for _ in range(2)]
    await mailbox.expunge(folder, uids)
    for spare in spare_files(mailbox, folder):  # another process renamed them for its deliveries
        spare.rename(spare.with_name("taken-" + spare.name))
    first = await mailbox.deliver(folder, b"Subject: one\r\n\r\n1\r\n")
    second = await mailbox.deliver(folder, b"Subject: two\r\n\r\n2\r\n")
    files = await paths(mailbox, folder)
    assert files[first].read_bytes() != files[second].read_bytes()
    assert files[first].stat().st_ino != files[second].stat().st_ino


async def test_a_deleted_folder_s_spares_are_forgotten(mailbox: Mailbox) -> None:
    folder = await mailbox.create_folder("Scratch")
    await mailbox.expunge(folder, [await mailbox.deliver(folder, MAIL)])
    await mailbox.delete_folder(folder)
    again = await mailbox.create_folder("Scratch")
    uid = await mailbox.deliver(again, MAIL)
    assert (await paths(mailbox, again))[uid].read_bytes() == MAIL


async def test_a_spare_rests_before_it_is_written_again(
    mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spares, "REST", 3600.0)
    folder = await activity(mailbox)
    await mailbox.expunge(folder, [await mailbox.deliver(folder, MAIL)])
    [spare] = spare_files(mailbox, folder)
    new = await mailbox.deliver(folder, b"Subject: next\r\n\r\nanother\r\n")
    assert (await paths(mailbox, folder))[new].stat().st_ino != spare.stat().st_ino
    assert spare_files(mailbox, folder) == [spare]  # still resting


async def test_a_message_emptied_while_it_is_read_reads_as_gone(mailbox: Mailbox) -> None:
    folder = await activity(mailbox)
    uid = await mailbox.deliver(folder, MAIL)
    [row] = await mailbox.messages(folder)
    (await paths(mailbox, folder))[uid].write_bytes(b"")  # expunged by another session, as the read began
    assert await mailbox.read(folder, row) is None
