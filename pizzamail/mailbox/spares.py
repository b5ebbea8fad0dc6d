"""Spare files: an expunged message's file, emptied and kept in its folder's ``tmp/``, is the file one
of the folder's later deliveries writes into.

A folder that takes and drops mail all the time (the Activity board replaces a run's status mail at
each change) would otherwise create one inode and free another each time. On ext4 that grows
costly: a new inode skips every one freed in the last minutes (``recently_deleted``), and 200 runs
at once spent a sixth of serve's CPU there.

- A spare is emptied when it is put aside, so an expunged message's bytes do not stay on disk. A
  reader that had opened it just before finds it shorter than the index says, and takes the
  message as gone (:meth:`~pizzamail.mailbox.box.Mailbox.read_many`), as it would a removed file.
- It is written again only :data:`REST` seconds later, when no read begun before its expunge is
  still going: a message's bytes are never read under another message's UID.
- It is renamed into place before it is written, so two writers never share one (the rename that
  loses finds no file, and a new one is made).
- At most :data:`KEPT` per folder; those a stopped process left are taken by the next one's
  reconciliation.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from pathlib import Path

#: spare files kept per folder; beyond, an expunged message's file is removed
KEPT = 256
#: seconds a spare rests before a delivery may write into it
REST = 5.0
PREFIX = ".spare."

_spares: dict[Path, deque[tuple[float, Path]]] = {}
"""each folder's spares, oldest first, with the time each was put aside"""
_lock = threading.Lock()
_count = 0


def claim(folder: Path, tmp: Path) -> None:
    """Move ``folder``'s oldest rested spare (if any) to ``tmp``, the name a delivery writes next."""
    while True:
        with _lock:
            pool = _spares.get(folder)
            if not pool or time.monotonic() - pool[0][0] < REST:
                return
            _, spare = pool.popleft()
        try:
            os.rename(spare, tmp)
            return
        except FileNotFoundError:  # another process took it (it took the spares of ours it found)
            continue


def retire(folder: Path, paths: list[Path]) -> None:
    """Remove expunged files: emptied and kept as spares while the folder has fewer than :data:`KEPT`."""
    for path in paths:
        spare = _spare_name(folder)
        if spare is None:
            path.unlink(missing_ok=True)
            continue
        try:
            os.rename(path, spare)
        except FileNotFoundError:
            continue
        os.truncate(spare, 0)
        if not _keep(folder, spare):  # the folder's spares filled up meanwhile
            spare.unlink(missing_ok=True)


def adopt(folder: Path) -> int:
    """Take the spares in ``folder``'s ``tmp/`` that this process does not know (another one's, left
    at its stop); returns how many were taken."""
    with _lock:
        known = {spare for _, spare in _spares.get(folder, ())}
    taken = 0
    try:
        names = [n for n in os.listdir(folder / "tmp") if n.startswith(PREFIX)]
    except FileNotFoundError:
        return 0
    for name in names:
        spare = folder / "tmp" / name
        if spare in known:
            continue
        try:
            os.truncate(spare, 0)  # emptied again: one put aside by a process killed in between
        except FileNotFoundError:
            continue
        if not _keep(folder, spare):
            spare.unlink(missing_ok=True)
            continue
        taken += 1
    return taken


def forget(folder: Path) -> None:
    """The folder is gone or renamed: its spares went with its directory."""
    with _lock:
        _spares.pop(folder, None)


def _spare_name(folder: Path) -> Path | None:
    global _count
    with _lock:
        if len(_spares.get(folder, ())) >= KEPT:
            return None
        _count += 1
        return folder / "tmp" / f"{PREFIX}{os.getpid()}.{_count}"


def _keep(folder: Path, spare: Path) -> bool:
    with _lock:
        pool = _spares.setdefault(folder, deque())
        if len(pool) >= KEPT:
            return False
        pool.append((time.monotonic(), spare))
        return True
