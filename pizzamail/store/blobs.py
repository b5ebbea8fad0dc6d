"""Content-addressed blobs: raw mail bytes and attachments, named by their SHA-256.

A blob is stored durably before the database row that names it is committed, so a committed row
never points at a missing blob. Two places keep them, behind one interface (:class:`BlobStore`):

- :class:`FileBlobs`, files under the home's ``blobs/``: written and fsynced in a worker thread,
  since that takes a while on a slow disk;
- :class:`SqliteBlobs` (SQLite homes): those files, and the ``blobs`` table for the mails SMTP takes
  and a run's closing mail (up to :data:`IN_TABLE` bytes each), saved in the transaction that
  records them;
- :class:`StoredBlobs`, the ``blobs`` table (PostgreSQL): every process on every machine reads what
  any of them wrote, with no shared filesystem. Each blob is inserted and committed on its own
  connection, so it may be saved in the middle of a transaction that will name it.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pizzamail.home import fsync_path, side_by_side, write_private
from pizzamail.store import Store, Tx, on_writer_thread

IN_TABLE = 1 << 20
"""the largest blob :meth:`SqliteBlobs.save_in` keeps in the table (SQLite reads blobs of up to
about this size from its own pages as fast as from files of their own; larger ones are files)"""


def digest_of(data: bytes) -> str:
    """The name ``data`` has in the blob store (a row may name it once :meth:`BlobStore.save` did)."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Blob:
    """Bytes in the blob store, stored durably: a row may name them now."""

    digest: str
    size: int


class BlobStore(Protocol):
    async def save(self, data: bytes) -> Blob:
        """Store ``data`` durably (once: the same bytes again are the same blob)."""

    async def save_in(self, db: Tx, datas: list[bytes]) -> list[Blob]:
        """:meth:`save` of several at once as part of the work of ``db``'s transaction (before
        anything names them), in the same step when that work runs on the writer's thread
        (``Store.write_at_once``)."""

    async def load(self, digest: str) -> bytes:
        """The bytes of a saved blob; FileNotFoundError for a digest never saved."""


@dataclass(frozen=True, kw_only=True)
class FileBlobs:
    root: Path

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    def put(self, data: bytes) -> str:
        """:meth:`save` in the calling thread; returns the digest."""
        return self.put_all([data])[0]

    def put_all(self, datas: list[bytes]) -> list[str]:
        """:meth:`save_in` in the calling thread: each new blob written to a temporary file, fsynced
        and renamed into place, then each folder that got a name fsynced once (a rename is durable
        only with its folder). The fsyncs of a batch run side by side: the filesystem's journal
        takes them in one commit, about the time of one. Returns the digests."""
        digests = [digest_of(data) for data in datas]
        fresh = {self.path(digest): data for digest, data in zip(digests, datas, strict=True)
                 if not self.path(digest).exists()}
        folders = {target.parent for target in fresh}
        made = [folder for folder in folders if not folder.exists()]
        for folder in made:
            folder.mkdir(mode=0o700, exist_ok=True)
        side_by_side(_placed, list(fresh.items()))
        side_by_side(fsync_path, [*folders, *([self.root] if made else [])])
        return digests

    async def save(self, data: bytes) -> Blob:
        return (await self._saved([data]))[0]

    async def save_in(self, db: Tx, datas: list[bytes]) -> list[Blob]:
        """On the writer's thread, written right there (it may block); elsewhere in a thread."""
        if on_writer_thread(db):
            return _blobs(self.put_all(datas), datas)
        return await self._saved(datas)

    async def _saved(self, datas: list[bytes]) -> list[Blob]:
        return _blobs(await asyncio.to_thread(self.put_all, datas), datas)

    def get(self, digest: str) -> bytes:
        return self.path(digest).read_bytes()

    async def load(self, digest: str) -> bytes:
        return await asyncio.to_thread(self.get, digest)


def _blobs(digests: list[str], datas: list[bytes]) -> list[Blob]:
    return [Blob(digest=digest, size=len(data)) for digest, data in zip(digests, datas, strict=True)]


def _placed(new: tuple[Path, bytes]) -> None:
    """The bytes in a temporary file beside their place, fsynced, then renamed into it."""
    write_private(*new)


_INSERT = "INSERT INTO blobs(digest, data) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING"


@dataclass(kw_only=True)
class Recent:
    """The blobs loaded last, by digest. A task's mail is read by its filing, its run's history and
    its reply within moments; a digest's bytes never change, so a kept copy is never stale."""

    budget: int = 8 << 20
    """bytes kept at most; a blob over an eighth of it is not kept"""
    _kept: OrderedDict[str, bytes] = field(default_factory=OrderedDict)
    _size: int = 0

    def get(self, digest: str) -> bytes | None:
        data = self._kept.get(digest)
        if data is not None:
            self._kept.move_to_end(digest)
        return data

    def keep(self, digest: str, data: bytes) -> bytes:
        if len(data) <= self.budget // 8 and digest not in self._kept:
            self._kept[digest] = data
            self._size += len(data)
            while self._size > self.budget:
                self._size -= len(self._kept.popitem(last=False)[1])
        return data


@dataclass(frozen=True, kw_only=True)
class StoredBlobs:
    store: Store
    recent: Recent = field(default_factory=Recent)

    async def save(self, data: bytes) -> Blob:
        digest = digest_of(data)
        await self.store.write_alone(_INSERT, (digest, data))
        return Blob(digest=digest, size=len(data))

    async def save_in(self, db: Tx, datas: list[bytes]) -> list[Blob]:
        """In the transaction itself: committed with the rows that name them."""
        return await _inserted(db, datas)

    async def load(self, digest: str) -> bytes:
        if (kept := self.recent.get(digest)) is not None:
            return kept
        found = await _row(self.store, digest)
        if found is None:
            raise FileNotFoundError(f"blob {digest} is not in the store")
        return self.recent.keep(digest, found)


@dataclass(frozen=True, kw_only=True)
class SqliteBlobs:
    """A SQLite home's blobs. A batch of mail taken by SMTP (:meth:`save_in`) goes into the
    ``blobs`` table inside the transaction that records it, so the batch costs one fsync, the
    commit's, before its 250s (as files, each would cost its own fsync and its folder's, 5-7 ms a
    batch here); a run's closing mail goes there the same way. The rest are files (:meth:`save`
    runs outside any transaction, and SQLite's one writer cannot commit a row on its own beside an
    open one). A blob stays where it was saved: the database copy of ``pizzamail backup`` holds
    the table's blobs as of the moment it copies."""

    files: FileBlobs
    store: Store
    recent: Recent = field(default_factory=Recent)

    async def save(self, data: bytes) -> Blob:
        return await self.files.save(data)

    async def save_in(self, db: Tx, datas: list[bytes]) -> list[Blob]:
        small = [data for data in datas if len(data) <= IN_TABLE]
        large = [data for data in datas if len(data) > IN_TABLE]
        kept = iter(await _inserted(db, small))
        filed = iter(await self.files.save_in(db, large) if large else [])
        return [next(kept) if len(data) <= IN_TABLE else next(filed) for data in datas]

    async def load(self, digest: str) -> bytes:
        if (kept := self.recent.get(digest)) is not None:
            return kept
        found = await _row(self.store, digest)
        return self.recent.keep(digest, found if found is not None else await self.files.load(digest))


async def _inserted(db: Tx, datas: list[bytes]) -> list[Blob]:
    digests = [digest_of(data) for data in datas]
    if datas:
        await db.executemany(_INSERT, zip(digests, datas, strict=True))
    return _blobs(digests, datas)


async def _row(store: Store, digest: str) -> bytes | None:
    row = await store.fetchone("SELECT data FROM blobs WHERE digest = ?", (digest,))
    return None if row is None else bytes(row[0])

