"""The mailbox: Maildir++ folders plus their index in the store (UIDs, flags, sizes).

The Maildir files are the message bytes; the ``folders`` and ``mail`` tables are the index IMAP
serves from. Every change goes through :class:`Mailbox`, which bumps the folder's modseq and wakes
whoever waits on that folder (IDLE sessions), so pushes need no polling.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import aiosqlite

from pizzamail.errors import FolderError
from pizzamail.mailbox import maildir
from pizzamail.store import Store

#: folder name -> SPECIAL-USE attribute (RFC 6154); the order is the order LIST shows them in
STANDARD_FOLDERS: dict[str, str | None] = {
    "INBOX": None,
    "Action": None,
    "Activity": None,
    "Sent": "\\Sent",
    "Drafts": "\\Drafts",
    "Archive": "\\Archive",
    "Trash": "\\Trash",
}


@dataclass(frozen=True, kw_only=True)
class Folder:
    id: int
    name: str
    uidvalidity: int
    uidnext: int
    modseq: int
    special_use: str | None
    subscribed: bool
    #: UIDs from here on are \Recent for the next session that opens the folder
    first_recent: int


@dataclass(frozen=True, kw_only=True)
class MailRow:
    uid: int
    name: str
    subdir: str
    size: int
    internaldate: int
    flags: frozenset[str]
    modseq: int


#: bytes read at a time when only the header is wanted (most headers fit in one read)
_HEAD = 8192
_END_OF_HEADER = re.compile(rb"(?:^|\n)\r?\n")

#: UIDs per query: well under SQLite's limit on bound parameters
_CHUNK = 500


def _flags_text(flags: Iterable[str]) -> str:
    return " ".join(sorted(set(flags)))


class _NewFile(NamedTuple):
    """A Maildir file about to be indexed."""

    base: str
    subdir: str
    size: int
    stamp: int
    flags: set[str]


@dataclass(kw_only=True)
class Mailbox:
    root: Path
    store: Store
    _events: dict[int, asyncio.Event] = field(default_factory=dict)

    async def open(self) -> Mailbox:
        for name, special in STANDARD_FOLDERS.items():
            await self.create_folder(name, special_use=special, exist_ok=True)
        for folder in await self.folders():
            await self.reconcile(folder)
        return self

    # -- folders -----------------------------------------------------------------------------

    def path(self, folder: Folder | str) -> Path:
        return maildir.folder_path(self.root, folder if isinstance(folder, str) else folder.name)

    async def folders(self) -> list[Folder]:
        rows = await self.store.fetchall("SELECT * FROM folders ORDER BY id")
        return [_folder(r) for r in rows]

    async def folder(self, name: str) -> Folder | None:
        if name.upper() == "INBOX":
            name = "INBOX"
        row = await self.store.fetchone("SELECT * FROM folders WHERE name = ?", (name,))
        return _folder(row) if row else None

    async def create_folder(
        self, name: str, *, special_use: str | None = None, exist_ok: bool = False,
        subscribed: bool = True,
    ) -> Folder:
        """Make a folder. Folders pizzamail makes for itself are subscribed, so every client
        shows them; an IMAP client's CREATE passes ``subscribed=False`` and subscribes itself."""
        existing = await self.folder(name)
        if existing is not None:
            if exist_ok:
                maildir.make_folder(self.path(existing), is_inbox=name == "INBOX")
                return existing
            raise FolderError(f"{name} already exists", code="ALREADYEXISTS")
        await self._check_names([name])
        try:
            maildir.make_folder(self.path(name), is_inbox=name == "INBOX")
        except OSError as exc:
            raise FolderError(f"the file system refused the folder's directory: {exc.strerror}",
                              code="CANNOT") from exc
        async with self.store.write() as db:
            await db.execute(
                "INSERT INTO folders(id, name, uidvalidity, special_use, subscribed) VALUES (?, ?, ?, ?, ?)",
                (await _new_folder_id(db), name, await _new_uidvalidity(db), special_use, int(subscribed)),
            )
        folder = await self.folder(name)
        assert folder is not None
        return folder

    async def delete_folder(self, folder: Folder) -> None:
        """Remove a folder, its messages and its files (sub-folders are left alone)."""
        async with self.store.write() as db:
            await db.execute("DELETE FROM folders WHERE id = ?", (folder.id,))
        shutil.rmtree(self.path(folder), ignore_errors=True)
        self._changed(folder.id)

    async def rename_folder(self, folder: Folder, new_name: str) -> None:
        """Rename a folder and the folders below it (``a`` -> ``b`` also moves ``a/x`` to ``b/x``)."""
        moves = [(f, new_name + f.name[len(folder.name):]) for f in await self.folders()
                 if f.id == folder.id or f.name.startswith(folder.name + "/")]
        await self._check_names([name for _, name in moves], moving={f.id for f, _ in moves})
        async with self.store.write() as db:
            for f, name in moves:
                await db.execute("UPDATE folders SET name = ? WHERE id = ?", (name, f.id))
            self._rename_all([(self.path(f), self.path(name)) for f, name in moves])
        for f, _ in moves:
            self._changed(f.id)

    def _rename_all(self, moves: list[tuple[Path, Path]]) -> None:
        """Rename directories or files, all or none (the caller's transaction then rolls back): the
        index and the Maildir never disagree about a name."""
        try:
            maildir.rename_all(moves)
        except OSError as exc:
            raise FolderError(f"the file system refused the rename: {exc.strerror}", code="CANNOT") from exc

    async def _check_names(self, names: list[str], *, moving: Collection[int] = ()) -> None:
        """Each new name is free, fits in a directory name, and is not the directory of another
        folder (on a case-insensitive file system ``Foo`` and ``foo`` are one directory)."""
        limit = maildir.name_max(self.root)
        folders = await self.folders()
        others = [f for f in folders if f.id not in moving]
        for name in names:
            size = len(os.fsencode(maildir.dir_name(name)))
            if size > limit:
                raise FolderError(
                    f"that name is too long: as a Maildir directory it takes {size} bytes (a dot takes"
                    f" three, a non-ASCII letter two or more) and the file system allows {limit}",
                    code="LIMIT")
            if any(f.name == name for f in folders):
                raise FolderError(f"{name} already exists", code="ALREADYEXISTS")
            sharing = self._same_directory(name, others)
            if sharing is not None:
                raise FolderError(f"{name} would share its directory with the folder {sharing.name}",
                                  code="ALREADYEXISTS")

    def _same_directory(self, name: str, folders: list[Folder]) -> Folder | None:
        path = self.path(name)
        if not path.exists():  # the usual case: nothing there yet
            return None
        return next((f for f in folders if self.path(f).exists() and os.path.samefile(path, self.path(f))),
                    None)

    async def set_subscribed(self, folder: Folder, subscribed: bool) -> None:
        async with self.store.write() as db:
            await db.execute(
                "UPDATE folders SET subscribed = ? WHERE id = ?", (int(subscribed), folder.id)
            )

    # -- Recent -------------------------------------------------------------------------------

    async def recent_from(self, folder: Folder) -> int:
        """The first UID of ``folder`` no session has been shown as \\Recent (RFC 3501 §2.3.2)."""
        row = await self.store.fetchone("SELECT first_recent FROM folders WHERE id = ?", (folder.id,))
        return int(row["first_recent"]) if row else folder.uidnext

    async def claim_recent(self, folder: Folder, uids: list[int]) -> set[int]:
        """Of ``uids``, the ones still recent, which from now on are recent for the caller only.

        Kept in the folder's row, so it survives restarts and dies with the folder; a write
        happens only when there is something to claim.
        """
        if not uids or max(uids) < await self.recent_from(folder):
            return set()
        async with self.store.write() as db:
            async with db.execute("SELECT first_recent FROM folders WHERE id = ?", (folder.id,)) as cursor:
                row = await cursor.fetchone()
            if row is None:
                return set()
            floor = int(row[0])
            await db.execute("UPDATE folders SET first_recent = max(first_recent, ?) WHERE id = ?",
                             (max(uids) + 1, folder.id))
        return {u for u in uids if u >= floor}

    # -- change notification -----------------------------------------------------------------

    def change_event(self, folder: Folder) -> asyncio.Event:
        """An event set at the next change of ``folder`` (take a fresh one after each wake-up)."""
        return self._events.setdefault(folder.id, asyncio.Event())

    def _changed(self, folder_id: int) -> None:
        event = self._events.pop(folder_id, None)
        if event is not None:
            event.set()

    # -- messages ----------------------------------------------------------------------------

    async def deliver(
        self, folder: Folder, data: bytes, *, flags: Iterable[str] = (),
        base: str | None = None, internaldate: int | None = None,
        message_ref: int | None = None,
    ) -> int:
        """Add a message: atomic file write, then its index row. Returns its UID.

        With a deterministic ``base`` delivery is idempotent: a file already there (a crash
        between the rename and the commit) is indexed instead of written twice, and one that
        :meth:`reconcile` indexed at start-up, not knowing whose it was, is linked to
        ``message_ref``, which counts as filed.
        """
        data = maildir.to_crlf(data)
        stamp = internaldate or int(time.time())
        flag_set = set(flags)
        existing = None
        if base is not None:
            uid = await self._indexed_uid(folder, base)
            if uid is not None:
                await self._link(folder, uid, message_ref)
                return uid
            existing = maildir.written(self.path(folder), base, flag_set)
        base = base or _unique_base()
        if existing is not None:
            subdir = existing
        else:
            subdir = maildir.write_atomic(self.path(folder), base, data, stamp, flag_set)
        uid = await self._index(folder, base, subdir, len(data), stamp, flag_set, message_ref)
        self._changed(folder.id)
        return uid

    async def _indexed_uid(self, folder: Folder, base: str) -> int | None:
        row = await self.store.fetchone(
            "SELECT uid FROM mail WHERE folder_id = ? AND name = ?", (folder.id, base)
        )
        return int(row["uid"]) if row else None

    async def _link(self, folder: Folder, uid: int, message_ref: int | None) -> None:
        if message_ref is None:
            return
        async with self.store.write() as db:
            await db.execute("UPDATE mail SET message_ref = ? WHERE folder_id = ? AND uid = ?",
                             (message_ref, folder.id, uid))
            await _mark_filed(db, message_ref)

    async def _index(
        self, folder: Folder, base: str, subdir: str, size: int, stamp: int,
        flags: set[str], message_ref: int | None,
    ) -> int:
        [uid] = await self._index_files(folder, [_NewFile(base, subdir, size, stamp, flags)], message_ref)
        return uid

    async def _index_files(
        self, folder: Folder, files: list[_NewFile], message_ref: int | None = None
    ) -> list[int]:
        """Index files in one transaction under one modseq, with a block of consecutive UIDs
        (a folder of 20,000 files found at start-up is one commit, not 20,000)."""
        async with self.store.write() as db:
            first, modseq = await _next_uids(db, folder.id, len(files))
            await db.executemany(
                "INSERT INTO mail(folder_id, uid, name, subdir, size, internaldate, flags, modseq,"
                " message_ref) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(folder.id, first + n, f.base, f.subdir, f.size, f.stamp, _flags_text(f.flags),
                  modseq, message_ref) for n, f in enumerate(files)],
            )
            if message_ref is not None:
                await _mark_filed(db, message_ref)
        return list(range(first, first + len(files)))

    async def messages(self, folder: Folder) -> list[MailRow]:
        rows = await self.store.fetchall(
            "SELECT uid, name, subdir, size, internaldate, flags, modseq FROM mail"
            " WHERE folder_id = ? ORDER BY uid", (folder.id,),
        )
        return [_mail(r) for r in rows]

    def file_path(self, folder: Folder, row: MailRow) -> Path:
        name = maildir.file_name(row.name, row.subdir, set(row.flags))
        return self.path(folder) / row.subdir / name

    def read(self, folder: Folder, row: MailRow) -> bytes:
        return self.file_path(folder, row).read_bytes()

    def read_header(self, folder: Folder, row: MailRow) -> bytes:
        """The start of the file, up to at least the blank line that ends the header: what a
        header listing needs, without reading attachments."""
        with self.file_path(folder, row).open("rb") as f:
            data = f.read(_HEAD)
            while not _END_OF_HEADER.search(data) and (more := f.read(_HEAD)):
                data += more
        return data

    async def set_flags(self, folder: Folder, changes: dict[int, set[str]]) -> int:
        """Replace the flags of several messages (uid -> new flags). Returns the new modseq."""
        return (await self._write_flags(folder, changes, None))[0]

    async def set_flags_unless_changed(
        self, folder: Folder, changes: dict[int, set[str]], unchangedsince: int
    ) -> tuple[int, set[int]]:
        """:meth:`set_flags` for the messages whose modseq is still at most ``unchangedsince``,
        checked in the same transaction (IMAP's conditional STORE, RFC 7162 §3.1.3).

        Returns the new modseq (0 when nothing was written) and the UIDs left alone because
        they had changed.
        """
        return await self._write_flags(folder, changes, unchangedsince)

    async def _write_flags(
        self, folder: Folder, changes: dict[int, set[str]], unchangedsince: int | None
    ) -> tuple[int, set[int]]:
        # Rows are read and files renamed under the write lock: two sessions flagging the same
        # message at once would otherwise rename a file by a name the other one already changed.
        async with self.store.write() as db:
            current = {r.uid: r for r in await _locked_rows(db, folder.id, changes)}
            skipped = set()
            if unchangedsince is not None:
                skipped = {u for u, r in current.items() if r.modseq > unchangedsince}
            todo = {u: f for u, f in changes.items() if u in current and u not in skipped}
            modseq = await _bump(db, folder.id) if todo or unchangedsince is None else 0
            for uid, flags in todo.items():
                await db.execute(
                    "UPDATE mail SET flags = ?, modseq = ?, subdir = 'cur' WHERE folder_id = ? AND uid = ?",
                    (_flags_text(flags), modseq, folder.id, uid),
                )
            for uid, flags in todo.items():
                self._move_file(folder, current[uid], flags)
        if modseq:
            self._changed(folder.id)
        return modseq, skipped

    async def expunge(self, folder: Folder, uids: Iterable[int]) -> list[int]:
        """Remove messages (file and index row). Returns the UIDs actually removed."""
        async with self.store.write() as db:
            # Read under the lock, like _write_flags: the file name must be the current one.
            rows = await _locked_rows(db, folder.id, uids)
            if not rows:
                return []
            await _forget(db, folder.id, rows)
            for row in rows:
                self.file_path(folder, row).unlink(missing_ok=True)
        self._changed(folder.id)
        return [r.uid for r in rows]

    async def move(self, source: Folder, uids: Iterable[int], target: Folder) -> list[tuple[int, int]]:
        """Move messages by renaming their files, so that whenever a crash comes each is in one
        folder or the other: never in neither, and never in both (after a copy and a crash, a
        client sending its MOVE again would copy it twice). The index follows in the transaction
        the renames happen in; a crash before its commit leaves files that the start-up
        reconciliation indexes where they are. Returns (source UID, new UID) pairs."""
        async with self.store.write() as db:
            rows = await _locked_rows(db, source.id, uids)
            if not rows:
                return []
            taken = set(maildir.scan(self.path(target)))
            names = [row.name if row.name not in taken else _unique_base() for row in rows]
            first, modseq = await _next_uids(db, target.id, len(rows))
            await db.executemany(
                "INSERT INTO mail(folder_id, uid, name, subdir, size, internaldate, flags, modseq)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(target.id, first + n, name, row.subdir, row.size, row.internaldate, _flags_text(row.flags),
                  modseq) for n, (row, name) in enumerate(zip(rows, names, strict=True))],
            )
            await _forget(db, source.id, rows)
            self._rename_all([(self.file_path(source, row), self.path(target) / row.subdir
                                 / maildir.file_name(name, row.subdir, set(row.flags)))
                                for row, name in zip(rows, names, strict=True)])
        self._changed(source.id)
        self._changed(target.id)
        return [(row.uid, first + n) for n, row in enumerate(rows)]

    async def expunged_since(self, folder: Folder, modseq: int) -> list[int]:
        """UIDs expunged from ``folder`` with a modseq above ``modseq``, ascending (QRESYNC)."""
        rows = await self.store.fetchall(
            "SELECT uid FROM expunged WHERE folder_id = ? AND modseq > ? ORDER BY uid", (folder.id, modseq)
        )
        return [int(r["uid"]) for r in rows]

    def _move_file(self, folder: Folder, row: MailRow, flags: set[str]) -> None:
        src = self.file_path(folder, row)
        dst = self.path(folder) / "cur" / maildir.file_name(row.name, "cur", flags)
        if src != dst:
            os.rename(src, dst)

    # -- reconciliation ----------------------------------------------------------------------

    async def reconcile(self, folder: Folder) -> tuple[int, int]:
        """Bring the index in line with the files (changes made by other programs, or a crash).

        Unknown files are indexed with the flags in their names; index rows whose file is gone
        are dropped; Maildir flag letters changed by another program are taken over.
        Returns (added, removed).
        """
        files = maildir.scan(self.path(folder))
        indexed = {r.name: r for r in await self.messages(folder)}
        gone = [r.uid for name, r in indexed.items() if name not in files]
        if gone:
            await self.expunge(folder, gone)
        new = [self._stat(folder, base, *files[base])
               for base in sorted(set(files) - set(indexed), key=_delivery_order)]
        if new:
            await self._index_files(folder, new)
        await self._adopt_flags(folder, files, indexed)
        if new:
            self._changed(folder.id)
        return len(new), len(gone)

    def _stat(self, folder: Folder, base: str, subdir: str, name: str) -> _NewFile:
        st = os.stat(self.path(folder) / subdir / name)
        return _NewFile(base, subdir, st.st_size, int(st.st_mtime), maildir.split_name(name)[1])

    async def _adopt_flags(
        self, folder: Folder, files: dict[str, tuple[str, str]], indexed: dict[str, MailRow]
    ) -> None:
        changes: list[tuple[str, str, int]] = []
        for base, row in indexed.items():
            if base not in files:
                continue
            subdir, name = files[base]
            on_disk = maildir.split_name(name)[1]
            system = {f for f in row.flags if f in maildir.FLAG_LETTERS}
            if subdir != row.subdir or on_disk != system:
                keywords = {f for f in row.flags if f not in maildir.FLAG_LETTERS}
                changes.append((_flags_text(on_disk | keywords), subdir, row.uid))
        if not changes:
            return
        async with self.store.write() as db:
            modseq = await _bump(db, folder.id)
            for flags, subdir, uid in changes:
                await db.execute(
                    "UPDATE mail SET flags = ?, subdir = ?, modseq = ? WHERE folder_id = ? AND uid = ?",
                    (flags, subdir, modseq, folder.id, uid),
                )
        self._changed(folder.id)


def _delivery_order(base: str) -> tuple[int, str]:
    head = base.split(".", 1)[0]
    return (int(head) if head.isdigit() else 0, base)


_counter = 0


def _unique_base() -> str:
    """A Maildir unique name: time, microseconds, pid and a counter, then the host."""
    global _counter
    _counter += 1
    now = time.time()
    usec = int((now % 1) * 1_000_000)
    host = os.uname().nodename.replace("/", "_").replace(":", "_")
    return f"{int(now)}.M{usec}P{os.getpid()}Q{_counter}.{host}"


def message_base(message_row: int, created: int) -> str:
    """The deterministic Maildir name of a stored message, which makes filing idempotent."""
    return f"{created}.P0Q{message_row}.pizzamail"


async def _new_uidvalidity(db: aiosqlite.Connection) -> int:
    """Never one given out before, also to a folder since deleted (clients cache by it)."""
    async with db.execute("SELECT latest FROM uidvalidity") as cursor:
        row = await cursor.fetchone()
    fresh = max(int(time.time()), (int(row[0]) if row else 0) + 1)
    await db.execute("UPDATE uidvalidity SET latest = ?", (fresh,))
    return fresh


async def _new_folder_id(db: aiosqlite.Connection) -> int:
    """Never one given out before: SQLite would hand a deleted folder's id to the next one."""
    await db.execute(
        "UPDATE folder_ids SET latest = max(latest, (SELECT coalesce(max(id), 0) FROM folders)) + 1")
    async with db.execute("SELECT latest FROM folder_ids") as cursor:
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _bump(db: aiosqlite.Connection, folder_id: int) -> int:
    await db.execute("UPDATE folders SET modseq = modseq + 1 WHERE id = ?", (folder_id,))
    async with db.execute("SELECT modseq FROM folders WHERE id = ?", (folder_id,)) as cursor:
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _forget(db: aiosqlite.Connection, folder_id: int, rows: list[MailRow]) -> None:
    """Drop index rows, remembering their UIDs as expunged (QRESYNC) under one new modseq."""
    modseq = await _bump(db, folder_id)
    for row in rows:
        await db.execute("DELETE FROM mail WHERE folder_id = ? AND uid = ?", (folder_id, row.uid))
        await db.execute("INSERT OR REPLACE INTO expunged(folder_id, uid, modseq) VALUES (?, ?, ?)",
                         (folder_id, row.uid, modseq))


async def _mark_filed(db: aiosqlite.Connection, message_ref: int) -> None:
    await db.execute("UPDATE messages SET filed = 1 WHERE id = ?", (message_ref,))


async def _locked_rows(db: aiosqlite.Connection, folder_id: int, uids: Iterable[int]) -> list[MailRow]:
    """Index rows of these UIDs, read inside a write transaction (so they cannot be stale)."""
    wanted = sorted(set(uids))
    rows: list[MailRow] = []
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start:start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        sql = ("SELECT uid, name, subdir, size, internaldate, flags, modseq FROM mail"
               f" WHERE folder_id = ? AND uid IN ({marks}) ORDER BY uid")
        async with db.execute(sql, (folder_id, *chunk)) as cursor:
            rows.extend(_mail(r) for r in await cursor.fetchall())
    return rows


async def _next_uids(db: aiosqlite.Connection, folder_id: int, count: int) -> tuple[int, int]:
    """Reserve ``count`` UIDs; returns the first and the modseq of this change."""
    modseq = await _bump(db, folder_id)
    async with db.execute("SELECT uidnext FROM folders WHERE id = ?", (folder_id,)) as cursor:
        row = await cursor.fetchone()
    assert row is not None
    await db.execute("UPDATE folders SET uidnext = uidnext + ? WHERE id = ?", (count, folder_id))
    return int(row[0]), modseq


def _folder(row: aiosqlite.Row) -> Folder:
    data = dict(row)
    data["subscribed"] = bool(data["subscribed"])
    return Folder(**data)


def _mail(row: aiosqlite.Row) -> MailRow:
    data = dict(row)
    data["flags"] = frozenset(data["flags"].split())
    return MailRow(**data)
