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
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pizzamail.store import Store


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

    async def save_all(self, datas: list[bytes]) -> list[Blob]:
        """:meth:`save` of several at once (cheaper than one by one: fsyncs share the disk's time)."""

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
        """:meth:`save_all` in the calling thread: each new blob written to a temporary file and
        fsynced, renamed into place, then each folder that got a name fsynced once (a rename is
        durable only with its folder). Returns the digests."""
        digests = [digest_of(data) for data in datas]
        fresh = {digest: data for digest, data in zip(digests, datas, strict=True)
                 if not self.path(digest).exists()}
        folders = {self.path(digest).parent for digest in fresh}
        made = [folder for folder in folders if not folder.exists()]
        for folder in made:
            folder.mkdir(mode=0o700, exist_ok=True)
        for digest, data in fresh.items():
            os.replace(_written(self.path(digest), data), self.path(digest))
        for folder in [*folders, *([self.root] if made else [])]:
            _fsync_folder(folder)
        return digests

    async def save(self, data: bytes) -> Blob:
        return (await self.save_all([data]))[0]

    async def save_all(self, datas: list[bytes]) -> list[Blob]:
        digests = await asyncio.to_thread(self.put_all, datas)
        return [Blob(digest=digest, size=len(data)) for digest, data in zip(digests, datas, strict=True)]

    def get(self, digest: str) -> bytes:
        return self.path(digest).read_bytes()

    async def load(self, digest: str) -> bytes:
        return await asyncio.to_thread(self.get, digest)


def _written(target: Path, data: bytes) -> Path:
    """``data`` in a temporary file beside ``target``, fsynced."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


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

    async def save_all(self, datas: list[bytes]) -> list[Blob]:
        return [await self.save(data) for data in datas]

    async def load(self, digest: str) -> bytes:
        row = await self.store.fetchone("SELECT data FROM blobs WHERE digest = ?", (digest,))
        if row is None:
            raise FileNotFoundError(f"blob {digest} is not in the store")
        return bytes(row[0])

