"""The user's pizzamail folder: where it is and what it holds.

Everything pizzamail keeps lives here (config, database, Maildir, blobs, logs, skills), so backing
up or moving this one folder moves the whole installation.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import platformdirs

from pizzamail.errors import HomeInUse, HomeUnusable

ENV_VAR = "PIZZAMAIL_HOME"


@dataclass(frozen=True, kw_only=True)
class Home:
    """Paths inside the home folder."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def database(self) -> Path:
        return self.root / "state.db"

    @property
    def maildir(self) -> Path:
        return self.root / "Maildir"

    @property
    def blobs(self) -> Path:
        return self.root / "blobs"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def skills(self) -> Path:
        return self.root / "skills"

    @property
    def tls_cert(self) -> Path:
        return self.root / "tls" / "cert.pem"

    @property
    def tls_key(self) -> Path:
        return self.root / "tls" / "key.pem"

    @property
    def secrets_file(self) -> Path:
        """The 0600 fallback used only when the machine has no usable OS keyring."""
        return self.root / "secrets.json"

    @property
    def state_file(self) -> Path:
        """Written by a running ``serve`` (pid and ports), removed when it stops."""
        return self.root / "serve.json"

    @property
    def serve_lock(self) -> Path:
        """Locked by the running ``serve`` for as long as it runs; holds its pid."""
        return self.root / "serve.lock"

    def exists(self) -> bool:
        return self.config.is_file()

    def create_dirs(self) -> None:
        """Create the folder tree, private to the user (0700)."""
        for path in (self.root, self.blobs, self.logs, self.skills, self.tls_cert.parent):
            try:
                path.mkdir(mode=0o700, parents=True, exist_ok=True)
                path.chmod(0o700)
            except OSError as exc:
                raise HomeUnusable(path, exc) from None


@contextlib.contextmanager
def serving(home: Home) -> Iterator[None]:
    """Held by ``serve`` before it touches anything in ``home``: one server per home.

    The lock is the kernel's (``flock``), so it ends with the process however that ends, and a
    lock file left behind by a crash locks nothing. The file stays: removing it would let a third
    ``serve`` lock a new file while the second still holds the old one."""
    try:
        home.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        # not inherited (os.open's default): an MCP server left running by a crash holds nothing
        fd = os.open(home.serve_lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise HomeUnusable(Path(exc.filename or home.root), exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HomeInUse(home.root, _holder(fd)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def usable(home: Home) -> Iterator[None]:
    """Around setting up the home: an OSError on one of its files (one left by another user, a
    file where a folder belongs) is :class:`HomeUnusable` naming it, for the user to fix."""
    try:
        yield
    except OSError as exc:
        if not isinstance(exc.filename, str) or not Path(exc.filename).is_relative_to(home.root):
            raise
        raise HomeUnusable(Path(exc.filename), exc) from None


def _holder(fd: int) -> int | None:
    """The pid the holder wrote (None while it has yet to write it)."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def resolve_home(option: str | Path | None) -> Home:
    """``--home`` wins, then ``$PIZZAMAIL_HOME``, then the platform's user data dir."""
    if option:
        return Home(root=Path(option).expanduser().absolute())
    env = os.environ.get(ENV_VAR)
    if env:
        return Home(root=Path(env).expanduser().absolute())
    return Home(root=Path(platformdirs.user_data_dir("pizzamail", appauthor=False)))


def write_private(path: Path, data: bytes) -> None:
    """Write a file readable only by the user, atomically (tmp, fsync, rename). The temporary name
    carries the process id: two processes may write the same file (a blob) at once."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write_synced(tmp, data)
    os.replace(tmp, path)


def write_synced(path: Path, data: bytes) -> None:
    """``data`` in a new file readable only by the user, fsynced (not yet renamed into its place)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


A = TypeVar("A")

_SYNCING = ThreadPoolExecutor(max_workers=16, thread_name_prefix="pizzamail-fsync")
"""where the fsyncs of one batch of files run side by side"""


def side_by_side(step: Callable[[A], object], items: list[A]) -> None:
    """``step`` on each item, at once in threads when there are several: fsyncs issued side by side
    are taken by the filesystem's journal in one commit, about the time of one."""
    if len(items) == 1:
        step(items[0])
    else:
        list(_SYNCING.map(step, items))


def fsync_path(path: Path) -> None:
    """fsync a file or a folder by its path (a rename is durable only with its folder's fsync)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
