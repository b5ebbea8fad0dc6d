"""The mailbox ``serve`` runs: Maildir++ files, indexed in the store (:mod:`pizzamail.store.mailindex`).

The files are the message bytes; the index is what IMAP serves from. Each change writes the files
inside the index's transaction, so the two never disagree about a name, and what a crash leaves
between them is reconciled at start-up. File work (writes, fsync, renames, reads) runs in a worker
thread, off the event loop; a change, once begun, runs to its end even when its caller is cancelled,
so no rename outlives the rollback of the transaction that records it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable, Collection, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from pizzamail.errors import FolderError
from pizzamail.mailbox import maildir, spares
from pizzamail.mailbox.folders import STANDARD_FOLDERS, check_names
from pizzamail.mailbox.index import ChangeEvents
from pizzamail.mailbox.writing import Delivery
from pizzamail.store import Store, Tx
from pizzamail.store import mailindex as index
from pizzamail.store.mailindex import Counts, Folder, MailRow, NewMail, Outline, Structures

P = ParamSpec("P")
#: files found on disk indexed together at start-up
_FOUND_AT_ONCE = 5000
T = TypeVar("T")


def _whole(change: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Run ``change`` to its end even when the caller is cancelled (who then waits for the end
    before taking the cancellation): between a rename in the worker thread and the commit there
    is an await, and a cancellation there would roll back the record of a rename already done."""

    @functools.wraps(change)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        task = asyncio.ensure_future(change(*args, **kwargs))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # its failure, if any, is seen: the caller takes the cancellation
            raise

    return run


@dataclass(kw_only=True)
class Mailbox:
    root: Path
    store: Store
    #: what the index caches of a delivered message (the IMAP server's header cache; None: nothing,
    #: FETCH fills it on first read)
    describe: Callable[[bytes], Structures] | None = None
    _changes: ChangeEvents = field(default_factory=ChangeEvents)
    #: the last outline of each folder, good while the folder's modseq is the same
    _outlines: dict[int, Outline] = field(default_factory=dict)

    @property
    def reads_in_place(self) -> bool:
        return self.store.reads_in_place

    async def open(self, *, reconcile: bool = True) -> Mailbox:
        """The standard folders made; the index brought in line with the files unless another
        process keeps it (``reconcile=False``: a standby serve, whose leader files the mail)."""
        for name, special in STANDARD_FOLDERS.items():
            await self.create_folder(name, special_use=special, exist_ok=True)
        for folder in await self.folders() if reconcile else ():
            await self.reconcile(folder)
        return self

    # -- folders -----------------------------------------------------------------------------

    def path(self, folder: Folder | str) -> Path:
        return maildir.folder_path(self.root, folder if isinstance(folder, str) else folder.name)

    async def folders(self) -> list[Folder]:
        return await index.folders(self.store)

    async def folder(self, name: str) -> Folder | None:
        return await index.folder_named(self.store, "INBOX" if name.upper() == "INBOX" else name)

    @_whole
    async def create_folder(
        self, name: str, *, special_use: str | None = None, exist_ok: bool = False, subscribed: bool = True,
    ) -> Folder:
        """Make a folder. Folders pizzamail makes for itself are subscribed, so every client
        shows them; an IMAP client's CREATE passes ``subscribed=False`` and subscribes itself."""
        existing = await self.folder(name)
        if existing is not None:
            if exist_ok:
                await asyncio.to_thread(maildir.make_folder, self.path(existing), is_inbox=name == "INBOX")
                return existing
            raise FolderError(f"{name} already exists", code="ALREADYEXISTS")
        await self._check_names([name])
        try:
            await asyncio.to_thread(maildir.make_folder, self.path(name), is_inbox=name == "INBOX")
        except OSError as exc:
            raise FolderError(f"the file system refused the folder's directory: {exc.strerror}",
                              code="CANNOT") from exc
        async with self.store.write() as db:
            await index.add_folder(db, name, special_use=special_use, subscribed=subscribed)
        folder = await self.folder(name)
        assert folder is not None
        return folder

    @_whole
    async def delete_folder(self, folder: Folder) -> None:
        """Remove a folder, its messages and its files (sub-folders are left alone)."""
        async with self.store.write() as db:
            await index.delete_folder(db, folder.id)
        await asyncio.to_thread(maildir.remove_folder, self.path(folder))
        spares.forget(self.path(folder))
        self._changes.changed(folder.id)

    @_whole
    async def rename_folder(self, folder: Folder, new_name: str) -> None:
        """Rename a folder and the folders below it (``a`` -> ``b`` also moves ``a/x`` to ``b/x``)."""
        moves = [(f, new_name + f.name[len(folder.name):]) for f in await self.folders()
                 if f.id == folder.id or f.name.startswith(folder.name + "/")]
        await self._check_names([name for _, name in moves], moving={f.id for f, _ in moves})
        async with self.store.write() as db:
            for f, name in moves:
                await index.rename_folder(db, f.id, name)
            await asyncio.to_thread(self._rename_all, [(self.path(f), self.path(name)) for f, name in moves])
        for f, _ in moves:
            spares.forget(self.path(f))
            self._changes.changed(f.id)

    def _rename_all(self, moves: list[tuple[Path, Path]]) -> None:
        """Rename directories or files, all or none (the caller's transaction then rolls back): the
        index and the Maildir never disagree about a name."""
        try:
            maildir.rename_all(moves)
        except OSError as exc:
            raise FolderError(f"the file system refused the rename: {exc.strerror}", code="CANNOT") from exc

    async def _check_names(self, names: list[str], *, moving: Collection[int] = ()) -> None:
        folders = await self.folders()
        await asyncio.to_thread(check_names, self.root, names, folders, moving)

    async def set_subscribed(self, folder: Folder, subscribed: bool) -> None:
        async with self.store.write() as db:
            await index.set_subscribed(db, folder.id, subscribed)

    async def counts(self, folder: Folder) -> Counts:
        return await index.counts(self.store, folder.id, await self.recent_from(folder))

    async def modseq(self, folder: Folder) -> int | None:
        return await index.folder_modseq(self.store, folder.id)

    # -- Recent -------------------------------------------------------------------------------

    async def recent_from(self, folder: Folder) -> int:
        """The first UID of ``folder`` no session has been shown as \\Recent (RFC 3501 §2.3.2)."""
        floor = await index.first_recent(self.store, folder.id)
        return folder.uidnext if floor is None else floor

    async def claim_recent(self, folder: Folder, uids: Sequence[int]) -> set[int]:
        """Of ``uids``, the ones still recent, which from now on are recent for the caller only.

        Kept in the folder's row, so it survives restarts and dies with the folder; a write
        happens only when there is something to claim.
        """
        if not uids or max(uids) < await self.recent_from(folder):
            return set()
        async with self.store.write() as db:
            floor = await index.claim_recent(db, folder.id, max(uids))
        return set() if floor is None else {u for u in uids if u >= floor}

    # -- change notification -----------------------------------------------------------------

    def change_event(self, folder: Folder) -> asyncio.Event:
        """An event set at the next change of ``folder`` (take a fresh one after each wake-up)."""
        return self._changes.event(folder.id)

    # -- index entries -----------------------------------------------------------------------

    async def messages(self, folder: Folder) -> list[MailRow]:
        return await index.mail_in(self.store, folder.id)

    async def outline(self, folder: Folder) -> Outline | None:
        """Kept per folder: opening a folder whose modseq is still the one ``folder`` was read
        with costs no query (a session catches up from that modseq at its next command)."""
        kept = self._outlines.get(folder.id)
        if kept is not None and kept.modseq == folder.modseq:
            return kept
        fresh = await index.outline(self.store, folder.id)
        if fresh is None:
            self._outlines.pop(folder.id, None)
        else:
            self._outlines[folder.id] = fresh
        return fresh

    async def rows(self, folder: Folder, uids: Sequence[int]) -> dict[int, MailRow]:
        return await index.mail_of(self.store, folder.id, uids)

    async def cached_rows(
        self, folder: Folder, uids: Sequence[int], wanted: Collection[str],
    ) -> dict[int, tuple[MailRow, Structures]]:
        return await index.cached_mail_of(self.store, folder.id, uids, wanted)

    async def message(self, folder: Folder, uid: int) -> MailRow | None:
        return await index.mail_entry(self.store, folder.id, uid)

    async def changed_since(self, folder: Folder, modseq: int) -> list[MailRow]:
        return await index.mail_changed_since(self.store, folder.id, modseq)

    async def vanished(self, folder: Folder, known: Collection[int]) -> set[int]:
        """A count first; the UID list only when it differs (so a folder nobody expunged from
        costs one indexed count)."""
        if not known:
            return set()
        last = max(known)
        if await index.count_through(self.store, folder.id, last) >= len(known):
            return set()
        return set(known) - await index.uids_through(self.store, folder.id, last)

    async def expunged_since(self, folder: Folder, modseq: int) -> list[int]:
        return await index.expunged_since(self.store, folder.id, modseq)

    async def save_structures(self, folder: Folder, computed: dict[int, Structures]) -> None:
        async with self.store.write() as db:
            await index.save_structures(db, folder.id, computed)

    # -- message bytes -----------------------------------------------------------------------

    def file_path(self, folder: Folder, row: MailRow) -> Path:
        name = maildir.file_name(row.name, row.subdir, set(row.flags))
        return self.path(folder) / row.subdir / name

    async def read(self, folder: Folder, row: MailRow) -> bytes | None:
        [data] = await self.read_many(folder, [row])
        return data

    async def read_many(
        self, folder: Folder, rows: Sequence[MailRow], *, header_only: bool = False
    ) -> list[bytes | None]:
        # plain strings: a Path made per message was a tenth of an mbsync command's cost
        place = str(self.path(folder))
        paths = [f"{place}/{row.subdir}/{maildir.file_name(row.name, row.subdir, set(row.flags))}"
                 for row in rows]
        found = await asyncio.to_thread(maildir.read_files, paths, [row.size for row in rows],
                                        header_only=header_only)
        if header_only:
            return found
        # shorter than indexed: expunged meanwhile, its file emptied for reuse (:mod:`.spares`)
        return [None if data is not None and len(data) < row.size else data
                for data, row in zip(found, rows, strict=True)]

    # -- changes -----------------------------------------------------------------------------

    async def deliver(
        self, folder: Folder, data: bytes, *, flags: Iterable[str] = (),
        base: str | None = None, internaldate: int | None = None,
        message_ref: int | None = None,
    ) -> int:
        """Add a message: atomic file write, then its index row. Returns its UID. See
        :meth:`deliver_each`."""
        mail = Delivery(data=data, flags=frozenset(flags), base=base, internaldate=internaldate,
                        message_ref=message_ref)
        [uid] = await self.deliver_each(folder, [mail])
        return uid

    @_whole
    async def deliver_each(self, folder: Folder, mails: Sequence[Delivery]) -> list[int]:
        """Add messages: their files written in one trip to the worker thread (fsynced side by side,
        each directory once), then their index rows in one transaction. Returns their UIDs.

        With a deterministic ``base`` delivery is idempotent: a file already there (a crash
        between the rename and the commit) is indexed instead of written twice, and one that
        :meth:`reconcile` indexed at start-up, not knowing whose it was, is linked to
        ``message_ref``, which counts as filed.
        """
        named = [mail.base for mail in mails if mail.base is not None]
        known = await index.uids_named(self.store, folder.id, named) if named else {}
        fresh = [(mail, mail.base or maildir.unique_base()) for mail in mails if mail.base not in known]
        links = [(known[mail.base], mail.message_ref) for mail in mails
                 if mail.base in known and mail.message_ref is not None]
        news = await asyncio.to_thread(self._write_all, folder, fresh) if fresh else []

        async def record(db: Tx) -> list[int]:
            for uid, message_ref in links:
                await index.link_mail(db, folder.id, uid, message_ref)
            return await index.add_mail(db, folder.id, news) if news else []

        # at once: the deliveries of a busy runner (tasks, replies, the board) share commits
        added = iter(await self.store.write_at_once(record) if news or links else [])
        if news:
            self._changes.changed(folder.id)
        return [known[mail.base] if mail.base in known else next(added) for mail in mails]

    def _write_all(self, folder: Folder, fresh: list[tuple[Delivery, str]]) -> list[NewMail]:
        """The files written (except a named one already there: a crash came before its index row)
        and what the index caches of them: one trip to the worker thread, on the way of every task
        and reply to IDLE."""
        path = self.path(folder)
        mails = [(base, maildir.to_crlf(mail.data), mail.internaldate or int(time.time()), set(mail.flags))
                 for mail, base in fresh]
        there = [maildir.written(path, base, flags) if mail.base is not None else None
                 for (mail, _), (base, _, _, flags) in zip(fresh, mails, strict=True)]
        written = iter(maildir.write_all(path, [m for m, at in zip(mails, there, strict=True) if at is None]))
        return [NewMail(name=base, subdir=found or next(written), size=len(data), internaldate=stamp,
                        flags=frozenset(flags), message_ref=mail.message_ref,
                        cached=self.describe(data) if self.describe is not None else Structures())
                for (mail, _), (base, data, stamp, flags), found in zip(fresh, mails, there, strict=True)]

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

    @_whole
    async def _write_flags(
        self, folder: Folder, changes: dict[int, set[str]], unchangedsince: int | None
    ) -> tuple[int, set[int]]:
        # Rows are read and files renamed under the write lock: two sessions flagging the same
        # message at once would otherwise rename a file by a name the other one already changed.
        async with self.store.write() as db:
            current = {r.uid: r for r in await index.locked_mail(db, folder.id, changes)}
            skipped = set()
            if unchangedsince is not None:
                skipped = {u for u, r in current.items() if r.modseq > unchangedsince}
            todo = {u: frozenset(f) for u, f in changes.items() if u in current and u not in skipped}
            modseq = await index.bump_modseq(db, folder.id) if todo or unchangedsince is None else 0
            await index.write_flags(db, folder.id, modseq, {u: (f, "cur") for u, f in todo.items()})
            renames = [(self.file_path(folder, current[u]),
                        self.path(folder) / "cur" / maildir.file_name(current[u].name, "cur", set(f)))
                       for u, f in todo.items()]
            await asyncio.to_thread(maildir.rename_each, renames)
        if modseq:
            self._changes.changed(folder.id)
        return modseq, skipped

    @_whole
    async def expunge(self, folder: Folder, uids: Iterable[int]) -> list[int]:
        """Remove messages (file and index row). Returns the UIDs actually removed."""
        async with self.store.write() as db:
            # Read under the lock, like _write_flags: the file name must be the current one.
            rows = await index.locked_mail(db, folder.id, uids)
            if not rows:
                return []
            await index.forget_mail(db, folder.id, [r.uid for r in rows])
            files = [self.file_path(folder, row) for row in rows]
            await asyncio.to_thread(spares.retire, self.path(folder), files)
        self._changes.changed(folder.id)
        return [r.uid for r in rows]

    @_whole
    async def move(self, source: Folder, uids: Iterable[int], target: Folder) -> list[tuple[int, int]]:
        """Move messages by renaming their files, so that whenever a crash comes each is in one
        folder or the other: never in neither, and never in both (after a copy and a crash, a
        client sending its MOVE again would copy it twice). The index follows in the transaction
        the renames happen in; a crash before its commit leaves files that the start-up
        reconciliation indexes where they are. Returns (source UID, new UID) pairs."""
        async with self.store.write() as db:
            rows = await index.locked_mail(db, source.id, uids)
            if not rows:
                return []
            taken = set(await asyncio.to_thread(maildir.scan, self.path(target)))
            names = [row.name if row.name not in taken else maildir.unique_base() for row in rows]
            new_uids = await index.add_mail(db, target.id, [
                NewMail(name=name, subdir=row.subdir, size=row.size, internaldate=row.internaldate,
                        flags=row.flags) for row, name in zip(rows, names, strict=True)])
            moved = [(r.uid, new) for r, new in zip(rows, new_uids, strict=True)]
            await index.copy_cache(db, source.id, target.id, moved)
            await index.forget_mail(db, source.id, [r.uid for r in rows])
            await asyncio.to_thread(self._rename_all, [
                (self.file_path(source, row), self.path(target) / row.subdir
                 / maildir.file_name(name, row.subdir, set(row.flags)))
                for row, name in zip(rows, names, strict=True)])
        self._changes.changed(source.id)
        self._changes.changed(target.id)
        return [(row.uid, new) for row, new in zip(rows, new_uids, strict=True)]

    # -- reconciliation ----------------------------------------------------------------------

    async def reconcile(self, folder: Folder) -> tuple[int, int]:
        """Bring the index in line with the files (changes made by other programs, or a crash).

        Unknown files are indexed with the flags in their names; index rows whose file is gone
        are dropped; Maildir flag letters changed by another program are taken over.
        Returns (added, removed).
        """
        await asyncio.to_thread(spares.adopt, self.path(folder))
        files = await asyncio.to_thread(maildir.scan, self.path(folder))
        indexed = {r.name: r for r in await self.messages(folder)}
        gone = [r.uid for name, r in indexed.items() if name not in files]
        if gone:
            await self.expunge(folder, gone)
        unknown = sorted(set(files) - set(indexed), key=maildir.delivery_order)
        found = [(base, *files[base]) for base in unknown]
        if found:
            # one transaction for all: a folder of 20,000 files found at start-up is one commit;
            # stated and inserted a part at a time, so 100,000 of them are never all in memory
            async with self.store.write() as db:
                for start in range(0, len(found), _FOUND_AT_ONCE):
                    part = found[start:start + _FOUND_AT_ONCE]
                    new = await asyncio.to_thread(_stat_all, self.path(folder), part)
                    await index.add_mail(db, folder.id, new)
        await self._adopt_flags(folder, files, indexed)
        if found:
            self._changes.changed(folder.id)
        return len(found), len(gone)

    async def _adopt_flags(
        self, folder: Folder, files: dict[str, tuple[str, str]], indexed: dict[str, MailRow]
    ) -> None:
        changes: dict[int, tuple[frozenset[str], str]] = {}
        for base, row in indexed.items():
            if base not in files:
                continue
            subdir, name = files[base]
            on_disk = maildir.split_name(name)[1]
            system = {f for f in row.flags if f in maildir.FLAG_LETTERS}
            if subdir != row.subdir or on_disk != system:
                keywords = {f for f in row.flags if f not in maildir.FLAG_LETTERS}
                changes[row.uid] = (frozenset(on_disk | keywords), subdir)
        if not changes:
            return
        async with self.store.write() as db:
            await index.write_flags(db, folder.id, await index.bump_modseq(db, folder.id), changes)
        self._changes.changed(folder.id)


def _stat_all(folder: Path, found: list[tuple[str, str, str]]) -> list[NewMail]:
    """Index entries of files found in the folder: (base, subdir, file name) each."""
    new = []
    for base, subdir, name in found:
        st = os.stat(folder / subdir / name)
        new.append(NewMail(name=base, subdir=subdir, size=st.st_size, internaldate=int(st.st_mtime),
                           flags=frozenset(maildir.split_name(name)[1])))
    return new
