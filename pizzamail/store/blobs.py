"""Content-addressed files under ``blobs/``: raw mail bytes and attachments.

A blob is written and fsynced before the database row that names it is committed, so a committed
row never points at a missing file. Writing and fsyncing take a while on a slow disk, so the async
code writes through :meth:`BlobStore.save`, which does it in a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path


def digest_of(data: bytes) -> str:
    """The name ``data`` has in the blob store (a row may name it once :meth:`BlobStore.save` did)."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Blob:
    """Bytes in the blob store, written and fsynced: a row may name them now."""

    digest: str
    size: int


@dataclass(frozen=True, kw_only=True)
class BlobStore:
    root: Path

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    def put(self, data: bytes) -> str:
        digest = digest_of(data)
        target = self.path(digest)
        if target.exists():
            return digest
        target.parent.mkdir(mode=0o700, exist_ok=True)
        tmp = target.with_name(f".{digest}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        return digest

    async def save(self, data: bytes) -> Blob:
        """:meth:`put`, off the event loop."""
        return Blob(digest=await asyncio.to_thread(self.put, data), size=len(data))

    def get(self, digest: str) -> bytes:
        return self.path(digest).read_bytes()

    async def load(self, digest: str) -> bytes:
        """:meth:`get`, off the event loop."""
        return await asyncio.to_thread(self.get, digest)
