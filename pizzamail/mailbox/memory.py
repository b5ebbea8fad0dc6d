"""A mail index held in dicts: the :class:`~pizzamail.mailbox.index.MailIndex` an IMAP session runs
over in transcript tests, with no files, no database and no sockets.

It keeps the same promises as the Maildir one: UIDs ascend and are never reused in a folder, every
change takes the folder's next modseq and wakes its waiters, expunged UIDs are remembered for
QRESYNC, and UIDVALIDITY and folder ids are never given out twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from array import array
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from pizzamail.errors import FolderError
from pizzamail.mailbox import maildir
from pizzamail.mailbox.folders import STANDARD_FOLDERS
from pizzamail.mailbox.index import ChangeEvents
from pizzamail.store.mailindex import Counts, Folder, MailRow, Outline, Structures


@dataclass
class _Box:
    folder: Folder
    mail: dict[int, tuple[MailRow, bytes]] = field(default_factory=dict)
    structures: dict[int, Structures] = field(default_factory=dict)
    expunged: dict[int, int] = field(default_factory=dict)

    def bump(self, uids: int = 0) -> int:
        """Take the next modseq (and ``uids`` UIDs) for a change."""
        f = self.folder
        self.folder = dataclasses.replace(f, modseq=f.modseq + 1, uidnext=f.uidnext + uids)
        return self.folder.modseq


@dataclass
class MemoryMailbox:
    _boxes: dict[int, _Box] = field(default_factory=dict)
    _changes: ChangeEvents = field(default_factory=ChangeEvents)
    _last_id: int = 0
    _last_uidvalidity: int = 0
    #: dicts are read in place, as SQLite's index is
    reads_in_place: bool = True

    @classmethod
    def standard(cls) -> MemoryMailbox:
        """With the folders ``serve`` makes."""
        box = cls()
        for name, special in STANDARD_FOLDERS.items():
            box._make(name, special_use=special, subscribed=True)
        return box

    def _make(self, name: str, *, special_use: str | None, subscribed: bool) -> Folder:
        self._last_id += 1
        self._last_uidvalidity += 1
        folder = Folder(id=self._last_id, name=name, uidvalidity=self._last_uidvalidity, uidnext=1, modseq=1,
                        special_use=special_use, subscribed=subscribed, first_recent=1)
        self._boxes[folder.id] = _Box(folder)
        return folder

    def _box(self, folder: Folder) -> _Box:
        """The folder's contents; a deleted folder reads as empty, as its index rows would."""
        return self._boxes.get(folder.id) or _Box(folder)

    def _target(self, folder: Folder) -> _Box:
        box = self._boxes.get(folder.id)
        if box is None:
            raise FolderError(f"{folder.name} was deleted meanwhile", code="NONEXISTENT")
        return box

    # -- folders -----------------------------------------------------------------------------

    async def folders(self) -> list[Folder]:
        return [box.folder for box in self._boxes.values()]

    async def folder(self, name: str) -> Folder | None:
        name = "INBOX" if name.upper() == "INBOX" else name
        return next((box.folder for box in self._boxes.values() if box.folder.name == name), None)

    async def create_folder(
        self, name: str, *, special_use: str | None = None, exist_ok: bool = False, subscribed: bool = True,
    ) -> Folder:
        existing = await self.folder(name)
        if existing is not None:
            if exist_ok:
                return existing
            raise FolderError(f"{name} already exists", code="ALREADYEXISTS")
        return self._make(name, special_use=special_use, subscribed=subscribed)

    async def delete_folder(self, folder: Folder) -> None:
        self._boxes.pop(folder.id, None)
        self._changes.changed(folder.id)

    async def rename_folder(self, folder: Folder, new_name: str) -> None:
        moving = [b for b in self._boxes.values()
                  if b.folder.id == folder.id or b.folder.name.startswith(folder.name + "/")]
        names = [new_name + b.folder.name[len(folder.name):] for b in moving]
        for name in names:
            if await self.folder(name) is not None:
                raise FolderError(f"{name} already exists", code="ALREADYEXISTS")
        for box, name in zip(moving, names, strict=True):
            box.folder = dataclasses.replace(box.folder, name=name)
            self._changes.changed(box.folder.id)

    async def set_subscribed(self, folder: Folder, subscribed: bool) -> None:
        box = self._box(folder)
        box.folder = dataclasses.replace(box.folder, subscribed=subscribed)

    async def counts(self, folder: Folder) -> Counts:
        box = self._box(folder)
        rows = [row for row, _ in box.mail.values()]
        return Counts(messages=len(rows), unseen=sum("\\Seen" not in r.flags for r in rows),
                      recent=sum(r.uid >= box.folder.first_recent for r in rows))

    async def modseq(self, folder: Folder) -> int | None:
        box = self._boxes.get(folder.id)
        return None if box is None else box.folder.modseq

    def change_event(self, folder: Folder) -> asyncio.Event:
        return self._changes.event(folder.id)

    # -- \Recent -------------------------------------------------------------------------------

    async def recent_from(self, folder: Folder) -> int:
        box = self._boxes.get(folder.id)
        return folder.uidnext if box is None else box.folder.first_recent

    async def claim_recent(self, folder: Folder, uids: Sequence[int]) -> set[int]:
        box = self._boxes.get(folder.id)
        if box is None or not uids:
            return set()
        floor = box.folder.first_recent
        box.folder = dataclasses.replace(box.folder, first_recent=max(floor, max(uids) + 1))
        return {u for u in uids if u >= floor}

    # -- index entries -----------------------------------------------------------------------

    async def messages(self, folder: Folder) -> list[MailRow]:
        return [row for _, (row, _) in sorted(self._box(folder).mail.items())]

    async def message(self, folder: Folder, uid: int) -> MailRow | None:
        found = self._box(folder).mail.get(uid)
        return None if found is None else found[0]

    async def changed_since(self, folder: Folder, modseq: int) -> list[MailRow]:
        return [row for row in await self.messages(folder) if row.modseq > modseq]

    async def vanished(self, folder: Folder, known: Collection[int]) -> set[int]:
        return set(known) - set(self._box(folder).mail)

    async def expunged_since(self, folder: Folder, modseq: int) -> list[int]:
        return sorted(uid for uid, gone in self._box(folder).expunged.items() if gone > modseq)

    async def outline(self, folder: Folder) -> Outline | None:
        box = self._boxes.get(folder.id)
        if box is None:
            return None
        rows = await self.messages(folder)
        unseen = next((r.uid for r in rows if "\\Seen" not in r.flags), None)
        keywords = frozenset(f for r in rows for f in r.flags if not f.startswith("\\"))
        return Outline(modseq=box.folder.modseq, uids=array("I", (r.uid for r in rows)), first_unseen=unseen,
                       keywords=keywords)

    async def rows(self, folder: Folder, uids: Sequence[int]) -> dict[int, MailRow]:
        mail = self._box(folder).mail
        return {u: mail[u][0] for u in uids if u in mail}

    async def cached_rows(
        self, folder: Folder, uids: Sequence[int], wanted: Collection[str],
    ) -> dict[int, tuple[MailRow, Structures]]:
        cache = self._box(folder).structures
        return {u: (row, cache.get(u, Structures())) for u, row in (await self.rows(folder, uids)).items()}

    async def save_structures(self, folder: Folder, computed: dict[int, Structures]) -> None:
        cache = self._box(folder).structures
        for uid, new in computed.items():
            old = cache.get(uid, Structures())
            cache[uid] = Structures(envelope=new.envelope or old.envelope,
                                    bodystructure=new.bodystructure or old.bodystructure,
                                    headers=old.headers if new.headers is None else new.headers)

    # -- message bytes -----------------------------------------------------------------------

    async def read(self, folder: Folder, row: MailRow) -> bytes | None:
        found = self._box(folder).mail.get(row.uid)
        return None if found is None else found[1]

    async def read_many(
        self, folder: Folder, rows: Sequence[MailRow], *, header_only: bool = False
    ) -> list[bytes | None]:
        return [await self.read(folder, row) for row in rows]

    # -- changes -----------------------------------------------------------------------------

    async def deliver(
        self, folder: Folder, data: bytes, *, flags: Iterable[str] = (), internaldate: int | None = None,
    ) -> int:
        box = self._target(folder)
        uid = box.folder.uidnext
        data = maildir.to_crlf(data)
        row = MailRow(uid=uid, name=str(uid), subdir="new", size=len(data),
                      internaldate=internaldate or int(time.time()), flags=frozenset(flags),
                      modseq=box.bump(uids=1))
        box.mail[uid] = (row, data)
        self._changes.changed(folder.id)
        return uid

    async def set_flags(self, folder: Folder, changes: dict[int, set[str]]) -> int:
        return (await self._write_flags(folder, changes, None))[0]

    async def set_flags_unless_changed(
        self, folder: Folder, changes: dict[int, set[str]], unchangedsince: int
    ) -> tuple[int, set[int]]:
        return await self._write_flags(folder, changes, unchangedsince)

    async def _write_flags(
        self, folder: Folder, changes: dict[int, set[str]], unchangedsince: int | None
    ) -> tuple[int, set[int]]:
        box = self._box(folder)
        present = {u: f for u, f in changes.items() if u in box.mail}
        skipped = set()
        if unchangedsince is not None:
            skipped = {u for u in present if box.mail[u][0].modseq > unchangedsince}
        todo = {u: f for u, f in present.items() if u not in skipped}
        modseq = box.bump() if todo or unchangedsince is None else 0
        for uid, flags in todo.items():
            row, data = box.mail[uid]
            box.mail[uid] = (row._replace(flags=frozenset(flags), subdir="cur", modseq=modseq),
                             data)
        if modseq:
            self._changes.changed(folder.id)
        return modseq, skipped

    async def expunge(self, folder: Folder, uids: Iterable[int]) -> list[int]:
        box = self._box(folder)
        gone = sorted(u for u in set(uids) if u in box.mail)
        if gone:
            modseq = box.bump()
            for uid in gone:
                del box.mail[uid]
                box.structures.pop(uid, None)
                box.expunged[uid] = modseq
            self._changes.changed(folder.id)
        return gone

    async def move(self, source: Folder, uids: Iterable[int], target: Folder) -> list[tuple[int, int]]:
        src, dst = self._box(source), self._target(target)
        moving = sorted(u for u in set(uids) if u in src.mail)
        if not moving:
            return []
        first = dst.folder.uidnext
        modseq = dst.bump(uids=len(moving))
        for n, uid in enumerate(moving):
            row, data = src.mail[uid]
            moved = row._replace(uid=first + n, name=str(first + n), modseq=modseq)
            dst.mail[first + n] = (moved, data)
        await self.expunge(source, moving)
        self._changes.changed(target.id)
        return [(uid, first + n) for n, uid in enumerate(moving)]
