"""Content-addressed blobs: raw mail bytes and attachments, named by their SHA-256.

A blob is stored durably before the database row that names it is committed, so a committed row
never points at a missing blob. Two places keep them, behind one interface (:class:`BlobStore`):

- :class:`FileBlobs`, files under the home's ``blobs/`` (SQLite homes): written and fsynced in a
  worker thread, since that takes a while on a slow disk;
- :class:`StoredBlobs`, the ``blobs`` table (PostgreSQL): every process on every machine reads what
  any of them wrote, with no shared filesystem. Each blob is inserted and committed on its own
  connection, so it may be saved in the middle of a transaction that will name it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from pizzamail.store import Store, Tx, on_writer_thread

A = TypeVar("A")


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
        _each(_placed, list(fresh.items()))
        _each(_fsync_folder, [*folders, *([self.root] if made else [])])
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


_SYNCING = ThreadPoolExecutor(max_workers=16, thread_name_prefix="pizzamail-fsync")
"""where the fsyncs of one batch of blobs run side by side"""


def _each(step: Callable[[A], object], items: list[A]) -> None:
    if len(items) == 1:
        step(items[0])
    else:
        list(_SYNCING.map(step, items))


def _blobs(digests: list[str], datas: list[bytes]) -> list[Blob]:
    return [Blob(digest=digest, size=len(data)) for digest, data in zip(digests, datas, strict=True)]


def _placed(new: tuple[Path, bytes]) -> None:
    """The bytes in a temporary file beside their place, fsynced, then renamed into it."""
    target, data = new
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)


def _fsync_folder(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, kw_only=True)
class StoredBlobs:
    store: Store

    async def save(self, data: bytes) -> Blob:
        digest = digest_of(data)
        await self.store.write_alone("INSERT INTO blobs(digest, data) VALUES (?, ?)"
                                     " ON CONFLICT (digest) DO NOTHING", (digest, data))
        return Blob(digest=digest, size=len(data))

    async def save_in(self, db: Tx, datas: list[bytes]) -> list[Blob]:
        """In the transaction itself: committed with the rows that name them."""
        await db.executemany("INSERT INTO blobs(digest, data) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING",
                             [(digest_of(data), data) for data in datas])
        return _blobs([digest_of(data) for data in datas], datas)

    async def load(self, digest: str) -> bytes:
        row = await self.store.fetchone("SELECT data FROM blobs WHERE digest = ?", (digest,))
        if row is None:
            raise FileNotFoundError(f"blob {digest} is not in the store")
        return bytes(row[0])

