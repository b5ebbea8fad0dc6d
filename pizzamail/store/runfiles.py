"""Each run's workspace: ``workspaces/<run>/``, the files the agent wrote there (attached to its
reply) and the pictures tools gave back (under ``.pictures/``, named by digest in the checkpoints).

A SQLite home keeps the folder alone; it outlives a crash, so a resumed run still has its files.
With PostgreSQL the run may resume on another machine, so the folder is only this machine's working
copy: after each tool call its new or changed files are saved as blobs and named in ``run_files``
(before the step that relies on them is checkpointed), and a run starting or resuming anywhere first
gets its folder filled from there.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore, digest_of

#: the workspace's subfolder of pictures by digest
PICTURES = ".pictures"


@dataclass(frozen=True, kw_only=True)
class Workspaces:
    """The folders alone (SQLite homes)."""

    root: Path

    def folder(self, run_id: int) -> Path:
        return self.root / str(run_id)

    async def fetch(self, run_id: int) -> Path:
        """The run's folder, with every file the run has kept."""
        return self.folder(run_id)

    async def keep(self, run_id: int) -> None:
        """Make what was written in the run's folder last beyond this machine."""


@dataclass(frozen=True, kw_only=True)
class StoredWorkspaces(Workspaces):
    """The folders as working copies of ``run_files`` (PostgreSQL)."""

    store: Store
    blobs: BlobStore
    _hashed: dict[Path, tuple[tuple[int, int, int], str]] = field(default_factory=dict, compare=False,
                                                                  repr=False)
    """digests by file, with the inode, mtime and size they were taken at (a file is replaced, not
    rewritten in place): a file unchanged since is not read again after each tool call"""

    async def fetch(self, run_id: int) -> Path:
        folder = self.folder(run_id)
        local = await asyncio.to_thread(self._digests, folder)
        for name, digest in (await self._kept(run_id)).items():
            if local.get(name) != digest:
                await asyncio.to_thread(write_file, folder / name, await self.blobs.load(digest))
        return folder

    async def keep(self, run_id: int) -> None:
        folder = self.folder(run_id)
        local = await asyncio.to_thread(self._digests, folder)
        if not local:  # most tool calls write nothing
            return
        kept = await self._kept(run_id)
        rows = []
        for name in (name for name, digest in local.items() if kept.get(name) != digest):
            # named by the bytes saved, whatever a tool still running beside this one did meanwhile
            blob = await self.blobs.save(await asyncio.to_thread((folder / name).read_bytes))
            rows.append((run_id, name, blob.digest))
        if rows:
            async with self.store.write() as db:
                await db.executemany(
                    "INSERT INTO run_files(run_id, name, digest) VALUES (?, ?, ?)"
                    " ON CONFLICT (run_id, name) DO UPDATE SET digest = excluded.digest", rows)

    async def _kept(self, run_id: int) -> dict[str, str]:
        rows = await self.store.fetchall("SELECT name, digest FROM run_files WHERE run_id = ?", (run_id,))
        return {str(row[0]): str(row[1]) for row in rows}

    def _digests(self, folder: Path) -> dict[str, str]:
        found = {}
        for name in files_in(folder):
            path = folder / name
            stat = path.stat()
            mark = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            seen = self._hashed.get(path)
            if seen is None or seen[0] != mark:
                seen = self._hashed[path] = (mark, digest_of(path.read_bytes()))
            found[name] = seen[1]
        return found


def write_file(target: Path, data: bytes) -> None:
    """``data`` at ``target`` whole or not at all (a reader never sees half a file)."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def files_in(folder: Path) -> list[str]:
    """The workspace's files by name (``.pictures/<digest>`` for pictures); temporary files
    (hidden) are not among them."""
    found = []
    for base in (folder, folder / PICTURES):
        if base.is_dir():
            found += [str(path.relative_to(folder)) for path in sorted(base.iterdir())
                      if path.is_file() and not path.name.startswith(".")]
    return found
