"""Spare files: an expunged message's file, emptied and kept in its folder's ``tmp/``, is the file the
folder's next delivery writes into.

A folder that takes and drops mail all the time (the Activity board replaces a run's status mail at
each change) would otherwise create one inode and free another each time. On ext4 that grows
costly: a new inode skips every one freed in the last minutes (``recently_deleted``), and 200 runs
at once spent a fifth of serve's CPU there. A spare is renamed into place before it is written, so
two writers never share one (the rename that loses finds no file and makes a new one), and it is
emptied when it is put aside, so an expunged message's bytes do not stay on disk. At most
:data:`KEPT` per folder; those a stopped process left are taken by the next one's reconciliation.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

#: spare files kept per folder; beyond, an expunged message's file is removed
KEPT = 64
PREFIX = ".spare."

_spares: dict[Path, list[Path]] = {}
_lock = threading.Lock()
_count = 0


def claim(folder: Path, tmp: Path) -> None:
    """Move one of ``folder``'s spares (if any is left) to ``tmp``, the name a delivery writes next."""
    while True:
        with _lock:
            pool = _spares.get(folder)
            if not pool:
                return
            spare = pool.pop()
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
        known = set(_spares.get(folder, ()))
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
        pool = _spares.setdefault(folder, [])
        if len(pool) >= KEPT:
            return False
        pool.append(spare)
        return True
