"""One blob interface on both engines: files (and, for mail taken by SMTP, the ``blobs`` table) for
SQLite homes, the ``blobs`` table for PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from pizzamail.home import Home
from pizzamail.store import Store, Tx
from pizzamail.store.blobs import IN_TABLE, BlobStore, Recent, SqliteBlobs, StoredBlobs, digest_of
from pizzamail.store.location import blobs_for


async def test_each_engine_keeps_blobs_where_every_process_of_it_reaches_them(
    home: Home, store: Store, blobs: BlobStore
) -> None:
    expected = StoredBlobs if store.dialect == "postgresql" else SqliteBlobs
    assert isinstance(blobs, expected)
    saved = await blobs.save(b"Subject: hi\r\n\r\nhello\r\n")
    assert (saved.digest, saved.size) == (digest_of(b"Subject: hi\r\n\r\nhello\r\n"), 22)
    async with store.twin() as other:  # another process, maybe on another machine
        assert await blobs_for(home, other).load(saved.digest) == b"Subject: hi\r\n\r\nhello\r\n"


async def test_the_same_bytes_are_one_blob(store: Store, blobs: BlobStore) -> None:
    first, again = await blobs.save(b"same"), await blobs.save(b"same")
    assert first == again and await blobs.load(first.digest) == b"same"
    if store.dialect == "postgresql":
        assert await store.fetchall("SELECT digest FROM blobs") == [(first.digest,)]


async def test_a_blob_never_saved_is_not_found(blobs: BlobStore) -> None:
    with pytest.raises(FileNotFoundError):
        await blobs.load(digest_of(b"never saved"))


async def test_a_blob_saved_inside_a_write_is_committed_before_the_row_that_names_it(
    home: Home, store: Store, blobs: BlobStore
) -> None:
    """Mail is often written in the transaction that also builds it: the blob must not wait for that
    transaction (nor deadlock on its lock), and must be there for anyone who sees the row."""
    async with store.twin() as other, store.write() as db:
        await db.execute("SELECT 1")
        saved = await blobs.save(b"raw mail")
        assert await blobs_for(home, other).load(saved.digest) == b"raw mail"


def files_under(home: Home) -> list[str]:
    return sorted(p.name for p in home.blobs.rglob("*") if p.is_file())


async def test_a_batch_of_mail_is_saved_in_its_own_transaction_and_rolled_back_with_it(
    home: Home, store: Store, blobs: BlobStore
) -> None:
    """SMTP's batch commits its mails' bytes with the rows that name them: on SQLite no file (and no
    fsync of its own) is made for a mail, and a batch rolled back leaves no blob behind."""
    small, large = b"Subject: a task\r\n\r\nplease\r\n", b"x" * (IN_TABLE + 1)

    async def batch(db: Tx) -> list[str]:
        return [blob.digest for blob in await blobs.save_in(db, [small, large, small])]

    saved = await store.write_at_once(batch, priority=True)
    assert saved == [digest_of(small), digest_of(large), digest_of(small)]
    if store.dialect == "sqlite":
        assert files_under(home) == [digest_of(large)]  # too large for the table: a file
    async with store.twin() as other:
        assert await blobs_for(home, other).load(digest_of(small)) == small
        assert await blobs_for(home, other).load(digest_of(large)) == large
    with pytest.raises(RuntimeError):
        async with store.write() as db:
            await blobs.save_in(db, [b"never committed"])
            raise RuntimeError("the batch failed")
    with pytest.raises(FileNotFoundError):
        await blobs.load(digest_of(b"never committed"))


async def test_a_blob_loaded_again_soon_is_read_from_the_store_once(
    store: Store, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = await blobs.save(b"Subject: task\r\n\r\nread by its filing, its history and its reply\r\n")
    reads: list[str] = []
    fetchone = store.fetchone

    async def counted(sql: str, params: Any = ()) -> Any:
        reads.append(sql)
        return await fetchone(sql, params)

    monkeypatch.setattr(store, "fetchone", counted)
    loads = [await blobs.load(saved.digest) for _ in range(3)]
    assert loads == [b"Subject: task\r\n\r\nread by its filing, its history and its reply\r\n"] * 3
    assert len(reads) == 1


def test_the_recent_blobs_kept_stay_within_their_budget() -> None:
    recent = Recent(budget=800)
    for n in range(20):
        recent.keep(f"d{n}", bytes(100))
    assert recent.get("d19") == bytes(100) and recent.get("d0") is None  # the oldest went first
    assert recent.keep("big", bytes(101)) == bytes(101) and recent.get("big") is None  # over 1/8
    assert sum(recent.get(f"d{n}") is not None for n in range(20)) == 8
