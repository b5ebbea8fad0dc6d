"""``pizzamail backup`` and ``restore``: a home in one ``.tar.gz``, consistent while ``serve`` runs.

Consistency. The database says which message has which UID, flags and folder; the Maildir's file
names carry the same flags, and every change renames or removes files inside the store's write
transaction. So the copy is taken while this process holds the database's write lock (``BEGIN
IMMEDIATE`` on a connection of its own; serve's writers wait meanwhile, well within their busy
timeout): the database is copied through SQLite's online backup API and every Maildir file is
hard-linked (a link is one system call, so writers wait milliseconds rather than a copy's time)
into a staging folder. Both then show the same moment. A file a delivery wrote just before its
transaction is linked too; the restored home's first start indexes it, as after a crash at that
point, with the UID the live home gives it. The blobs of mail taken by SMTP are rows of the database, so
its copy holds them; the others are content-addressed files, on disk before the row naming them
commits, so copying them once the lock is released takes every blob the copied database names
(and perhaps a few newer ones, which are harmless). The rest (config, skills, TLS
certificate, memory, workspaces) is copied as it is: no transaction covers it.

Secrets are never in the archive: the manifest lists their names and the command that sets each.
The copy is SQLite's (its backup API, its lock); a PostgreSQL backend will bring its own dump.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pizzamail.errors import BackupError
from pizzamail.home import Home

FORMAT = 1
"""the archive layout; a restore refuses an archive of a later format"""
MANIFEST = "manifest.json"
DATABASE = "state.db"
MAILDIR = "Maildir"
FILES = ("config.toml", "blobs", "skills", "tls", "memory.md", "workspaces")
"""what the archive holds besides the database and the Maildir, named as in the home"""
HOLD_SECONDS = 30.0
"""how long to wait for serve's current write to end before the copy can start"""


@dataclass(frozen=True, kw_only=True)
class Secret:
    """A secret the home uses (never its value), and the command that sets it again."""

    name: str
    stored: bool
    command: str


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """``manifest.json``, the archive's first member."""

    version: str
    """the pizzamail that wrote it"""
    home: str
    created: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    format: int = FORMAT
    secrets: list[Secret] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        """Read as this pizzamail wrote it: fields a later format adds are for that pizzamail."""
        raw = json.loads(data)
        return cls(version=str(raw["version"]), home=str(raw["home"]), created=str(raw["created"]),
                   format=int(raw["format"]),
                   secrets=[Secret(name=s["name"], stored=bool(s["stored"]), command=s["command"])
                            for s in raw.get("secrets", [])])


def backup(home: Home, target: Path, manifest: Manifest) -> None:
    """Write ``target``: the database and Maildir as of one moment, then the other files."""
    if not home.database.is_file():
        raise BackupError(f"{home.root} holds no pizzamail data to back up",
                          hint="name the home with --home (or PIZZAMAIL_HOME)")
    staging = Path(tempfile.mkdtemp(prefix=".backup-", dir=home.root))
    try:
        # the write lock only while the moment is fixed: a read snapshot (WAL) and a hard link per
        # mail; the database is copied from that snapshot after serve may write again
        with _writes_held(home.database):
            snapshot = _snapshot(home.database)
            _link_tree(home.maildir, staging / MAILDIR)
        try:
            _copy_database(snapshot, staging / DATABASE)
        finally:
            snapshot.close()
        _write_archive(target, manifest, staging, home)
    except OSError as exc:  # a target folder that is missing or not ours, a file we cannot read
        where = exc.filename or target
        raise BackupError(f"could not write the backup: {where}: {exc.strerror or exc}",
                          hint="name a FILE in a folder you can write to") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def _writes_held(database: Path) -> Iterator[None]:
    """The database's write lock, for the copy: no transaction commits (and no Maildir file is
    renamed or removed) until it is let go."""
    db = sqlite3.connect(database, isolation_level=None, timeout=HOLD_SECONDS)
    try:
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise BackupError(f"the database stayed busy for {HOLD_SECONDS:g} s ({exc})",
                              hint="run `pizzamail backup` again") from None
        try:
            yield
        finally:
            db.execute("ROLLBACK")
    finally:
        db.close()


def _snapshot(database: Path) -> sqlite3.Connection:
    """A second connection in a read transaction: the database as of now, however serve writes on
    (a WAL reader sees the last commit before it began and nothing after)."""
    source = sqlite3.connect(database, isolation_level=None)
    source.execute("BEGIN")
    source.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the read begins here
    return source


def _copy_database(snapshot: sqlite3.Connection, target: Path) -> None:
    # in one step (pages=-1), read through the snapshot's open transaction
    copy = sqlite3.connect(target)
    try:
        snapshot.backup(copy)
    finally:
        copy.close()


def _link_tree(source: Path, target: Path) -> None:
    """``source``'s folders and files under ``target``, each file a hard link (a copy where the
    file system has no links); files in ``tmp/`` are half-written and left out."""
    for folder, dirs, files in os.walk(source):
        here = target / Path(folder).relative_to(source)
        here.mkdir(mode=0o700, exist_ok=True)
        if Path(folder).name == "tmp":
            continue
        for name in files:
            _link(Path(folder) / name, here / name)
        dirs.sort()


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except FileNotFoundError:
        return  # a delivery's file moving from tmp/ into new/ under our eyes: listed, then gone
    except OSError:
        shutil.copy2(source, target)


def _write_archive(target: Path, manifest: Manifest, staging: Path, home: Home) -> None:
    """The archive, written beside ``target`` and renamed onto it once complete (0600: it holds
    all of the user's mail)."""
    partial = target.with_name(f".{target.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as raw:
            # a config.toml or skill linked from elsewhere (a dotfiles folder) is backed up as
            # what it points to: a link would leave the backup without it, and restore refuses links
            with tarfile.open(fileobj=raw, mode="w:gz", dereference=True) as tar:
                info = tarfile.TarInfo(MANIFEST)
                data = manifest.to_bytes()
                info.size, info.mode, info.mtime = len(data), 0o600, int(datetime.now(UTC).timestamp())
                tar.addfile(info, io.BytesIO(data))
                tar.add(staging / DATABASE, DATABASE)
                _add_tree(tar, staging / MAILDIR, MAILDIR)
                for name in FILES:
                    _add_tree(tar, home.root / name, name)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _add_tree(tar: tarfile.TarFile, path: Path, name: str) -> None:
    """``path`` and what is under it, skipping files half written (``.NAME.tmp``, as pizzamail
    writes a blob or a private file) and files that go away while the walk passes (a run's
    workspace changes under it)."""
    try:
        tar.add(path, name, recursive=False)
    except FileNotFoundError:
        return
    if path.is_symlink() or not path.is_dir():
        return
    for child in sorted(path.iterdir()):
        if not (child.name.startswith(".") and child.name.endswith(".tmp")):
            _add_tree(tar, child, f"{name}/{child.name}")


def restore(archive: Path, home: Home) -> Manifest:
    """Unpack ``archive`` into ``home``, which must be empty or not exist yet. Unpacked beside it
    and renamed into place, so a failed restore leaves no half home behind."""
    if home.root.exists() and any(home.root.iterdir()):
        raise BackupError(f"{home.root} is not empty; restore fills only an empty home",
                          hint=f"restore into a new folder: `pizzamail --home NEW_FOLDER restore {archive}`")
    with _opened(archive) as tar:
        manifest = _manifest(tar, archive)
        home.root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{home.root.name}.restoring-", dir=home.root.parent))
        try:
            _unpack(tar, staging)
            if home.root.exists():
                home.root.rmdir()
            staging.rename(home.root)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return manifest


@contextlib.contextmanager
def _opened(archive: Path) -> Iterator[tarfile.TarFile]:
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            yield tar
    except (OSError, tarfile.TarError) as exc:
        raise BackupError(f"cannot read {archive} as a pizzamail backup: {exc}",
                          hint="name a file written by `pizzamail backup`") from None


def _manifest(tar: tarfile.TarFile, archive: Path) -> Manifest:
    try:
        member = tar.extractfile(MANIFEST)
        assert member is not None
        manifest = Manifest.from_bytes(member.read())
    except (KeyError, AssertionError, ValueError, TypeError):
        raise BackupError(f"{archive} is not a pizzamail backup (no readable {MANIFEST})",
                          hint="name a file written by `pizzamail backup`") from None
    if manifest.format > FORMAT:
        raise BackupError(f"{archive} was written by pizzamail {manifest.version}, in a newer format",
                          hint="update pizzamail, then restore again")
    return manifest


def _unpack(tar: tarfile.TarFile, target: Path) -> None:
    """The home's members only; tarfile's ``data`` filter refuses absolute paths, ``..`` and links
    that lead out of the home."""
    known = {DATABASE, MAILDIR, *FILES}
    members = [m for m in tar.getmembers() if m.name.split("/", 1)[0] in known]
    try:
        tar.extractall(target, members=members, filter="data")
    except tarfile.FilterError as exc:
        raise BackupError(f"the backup holds a file that would land outside the home: {exc}",
                          hint="restore only backups you made with `pizzamail backup`") from None
    target.chmod(0o700)
