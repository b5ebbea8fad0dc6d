"""Maildir++ on disk: folder paths, unique names, atomic delivery, flags in file names.

Files hold the message's wire form (CRLF line endings) so the IMAP server serves the stored bytes
exactly and RFC822.SIZE is the file size; mutt and Dovecot read such files as they are.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SUBDIRS = ("tmp", "new", "cur")

# System flags that Maildir spells as letters in the file name (the "2," info section).
FLAG_LETTERS = {"\\Draft": "D", "\\Flagged": "F", "\\Answered": "R", "\\Seen": "S", "\\Deleted": "T"}
LETTER_FLAGS = {v: k for k, v in FLAG_LETTERS.items()}

_LONE_LINE_END = re.compile(rb"\r(?!\n)|(?<!\r)\n")


def to_crlf(data: bytes) -> bytes:
    """Wire form: every line ends in CRLF. A lone CR or LF ends a line too, as the stdlib's parser
    reads it, so what IMAP serves is the mail that became the task."""
    return _LONE_LINE_END.sub(b"\r\n", data)


def folder_path(root: Path, name: str) -> Path:
    """INBOX is the Maildir root; any other folder is a directory in it (see :func:`dir_name`)."""
    if name.upper() == "INBOX":
        return root
    return root / dir_name(name)


def dir_name(name: str) -> str:
    """``a/b`` -> ``.a.b``: however deep, a folder is one directory, a literal dot escaped as ``%2E``."""
    parts = [p.replace("%", "%25").replace(".", "%2E") for p in name.split("/")]
    return "." + ".".join(parts)


def name_max(root: Path) -> int:
    """The longest file name, in bytes, the file system under ``root`` takes (255 on most; 143 on
    eCryptfs): the limit of a folder name once it is a directory name."""
    try:
        return os.pathconf(root, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def folder_name(dirname: str) -> str:
    """Inverse of :func:`folder_path` for a ``.a.b`` directory name."""
    parts = dirname[1:].split(".")
    return "/".join(p.replace("%2E", ".").replace("%25", "%") for p in parts)


def make_folder(path: Path, *, is_inbox: bool) -> None:
    for sub in SUBDIRS:
        (path / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    if not is_inbox:
        (path / "maildirfolder").touch(mode=0o600, exist_ok=True)


def info_suffix(flags: set[str]) -> str:
    letters = sorted(FLAG_LETTERS[f] for f in flags if f in FLAG_LETTERS)
    return ":2," + "".join(letters)


def split_name(filename: str) -> tuple[str, set[str]]:
    """``base:2,FS`` -> (``base``, {\\Flagged, \\Seen})."""
    base, _, info = filename.partition(":2,")
    return base, {LETTER_FLAGS[c] for c in info if c in LETTER_FLAGS}


def file_name(base: str, subdir: str, flags: set[str]) -> str:
    return base if subdir == "new" else base + info_suffix(flags)


def write_atomic(folder: Path, base: str, data: bytes, mtime: int, flags: set[str]) -> str:
    """Write into ``tmp/``, fsync, then rename into ``new/`` (or ``cur/`` when flags are set):
    readers never see half a file. Returns the subdir it landed in."""
    tmp = folder / "tmp" / base
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.utime(tmp, (mtime, mtime))
    subdir = "cur" if set(flags) & set(FLAG_LETTERS) else "new"
    os.rename(tmp, folder / subdir / file_name(base, subdir, flags))
    dir_fd = os.open(folder / subdir, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return subdir


def rename_all(moves: list[tuple[Path, Path]]) -> None:
    """Rename each (source, destination), all or none: a failure undoes the renames done, then
    raises its OSError."""
    done: list[tuple[Path, Path]] = []
    try:
        for src, dst in moves:
            os.rename(src, dst)
            done.append((src, dst))
    except OSError:
        for src, dst in reversed(done):
            os.rename(dst, src)
        raise


def written(folder: Path, base: str, flags: set[str]) -> str | None:
    """The subdir where :func:`write_atomic` put ``base`` with ``flags``, if the file is there.

    Only the two names it can have are looked at, not the whole folder: until the file is
    indexed nobody can change its flags, so its name is still the one it was written under.
    """
    for subdir in ("new", "cur"):
        if (folder / subdir / file_name(base, subdir, flags)).exists():
            return subdir
    return None


def scan(folder: Path) -> dict[str, tuple[str, str]]:
    """Files present in ``new/`` and ``cur/``: base name -> (subdir, file name)."""
    found: dict[str, tuple[str, str]] = {}
    for sub in ("new", "cur"):
        try:
            names = os.listdir(folder / sub)
        except FileNotFoundError:
            continue
        for name in names:
            if not name.startswith("."):
                found[split_name(name)[0]] = (sub, name)
    return found
