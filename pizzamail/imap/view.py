"""The selected mailbox as one session sees it: sequence numbers, flags, and what changed since.

Each session keeps its own numbering (RFC 3501 §2.3.1.2) and catches up from the mail index
(:class:`~pizzamail.mailbox.MailIndex`): the folder's modseq says whether anything changed at all
(one lookup per command), entries with a newer modseq are the new or re-flagged messages, and the
index says which of the known UIDs went away. So a command costs what changed, not what the folder holds.

EXPUNGE may not be announced while the client's sequence numbers are in use (during FETCH, STORE,
SEARCH and COPY by number); until it can be, a vanished message stays in the numbering as a ghost.

New mail announced in passing, inside the answer to a FETCH, STORE, SEARCH, COPY or MOVE, may go
unheeded: Thunderbird notes the count there but looks for new UIDs only when something arrives
while it idles. Such an EXISTS is said once more when the session next idles.
"""

from __future__ import annotations

import asyncio
import dataclasses
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field

from pizzamail.errors import ImapError
from pizzamail.imap import wire
from pizzamail.imap.reader import SequenceSet
from pizzamail.mailbox import Folder, MailIndex, MailRow

#: messages read together by FETCH and SEARCH: few trips to the worker thread, bounded memory
_BATCH = 256
_BATCH_BYTES = 4 << 20


@dataclass
class Extensions:
    """What a session has turned on (RFC 7162): shared by the session and its views."""

    condstore: bool = False  # MODSEQ in FETCH responses about flag changes
    qresync: bool = False  # VANISHED instead of EXPUNGE, UID in every flag update


def uid_set(uids: list[int]) -> bytes:
    """``1,2,3,7`` -> ``1:3,7`` (order kept, as COPYUID pairs source and target by position)."""
    runs: list[list[int]] = []
    for uid in uids:
        if runs and uid == runs[-1][1] + 1:
            runs[-1][1] = uid
        else:
            runs.append([uid, uid])
    return b",".join(b"%d" % a if a == b else b"%d:%d" % (a, b) for a, b in runs)


@dataclass
class View:
    mailbox: MailIndex
    folder: Folder
    readonly: bool
    enabled: Extensions = field(default_factory=Extensions)
    uids: list[int] = field(default_factory=list)  # the client's numbering, ghosts included
    rows: dict[int, MailRow] = field(default_factory=dict)  # live messages
    ghosts: set[int] = field(default_factory=set)
    recent: set[int] = field(default_factory=set)
    keywords: set[str] = field(default_factory=set)
    modseq: int = 0
    #: the last EXISTS went out in passing (see the module's docstring) and is owed again
    exists_unheeded: bool = False
    #: set by the mailbox at the folder's next change after we last looked; while it is not
    #: set, nothing changed and a command needs no trip to the database to know that
    watch: asyncio.Event | None = None

    @classmethod
    async def open(cls, mailbox: MailIndex, folder: Folder, readonly: bool, enabled: Extensions) -> View:
        view = cls(mailbox, folder, readonly, enabled, modseq=folder.modseq,
                   watch=mailbox.change_event(folder))  # before reading: no change slips by
        for row in await mailbox.messages(folder):
            view._add(row)
        await view._take_recent(view.uids)
        return view

    async def _take_recent(self, uids: list[int]) -> None:
        """A read-write session takes \\Recent from the folder; EXAMINE only looks (RFC 3501 §6.3.2)."""
        if self.readonly:
            floor = await self.mailbox.recent_from(self.folder)
            self.recent |= {u for u in uids if u >= floor}
        else:
            self.recent |= await self.mailbox.claim_recent(self.folder, uids)

    def _add(self, row: MailRow) -> None:
        self.uids.append(row.uid)
        self.rows[row.uid] = row
        self.keywords |= {f for f in row.flags if not f.startswith("\\")}

    # -- numbering ---------------------------------------------------------------------------

    @property
    def exists(self) -> int:
        return len(self.uids)

    def seq(self, uid: int) -> int:
        return bisect_left(self.uids, uid) + 1

    def resolve(self, messages: SequenceSet, *, uid: bool, strict: bool = True) -> list[int]:
        """The live UIDs a sequence set names, ascending.

        Unknown UIDs are ignored; a message number past the end is a BAD (RFC 3501 §9) when
        ``strict``, except in a range that ends in ``*``, which simply stops at the last message.
        """
        if strict and not uid:
            self._check_numbers(messages)
        if not self.uids:
            return []
        found: list[int] = []
        if uid:
            for lo, hi in messages.bounds(self.uids[-1]):
                found += self.uids[bisect_left(self.uids, lo):bisect_right(self.uids, hi)]
        else:
            for lo, hi in messages.bounds(len(self.uids)):
                found += self.uids[lo - 1:hi]
        if len(messages.ranges) > 1:
            found = sorted(set(found))
        return [u for u in found if u not in self.ghosts] if self.ghosts else found

    def _check_numbers(self, messages: SequenceSet) -> None:
        for a, b in messages.ranges:
            if a and b and max(a, b) > len(self.uids):
                raise ImapError(f"no message has the number {max(a, b)}", bad=True)

    def batches(self, uids: list[int]) -> Iterator[list[int]]:
        """``uids`` in runs whose messages are read together (one trip off the event loop each),
        of at most ``_BATCH`` messages and, but for a single larger one, ``_BATCH_BYTES`` bytes."""
        batch: list[int] = []
        size = 0
        for uid in uids:
            row = self.rows.get(uid)
            size += row.size if row is not None else 0
            if batch and (len(batch) == _BATCH or size > _BATCH_BYTES):
                yield batch
                batch, size = [], row.size if row is not None else 0
            batch.append(uid)
        if batch:
            yield batch

    def flags(self, uid: int) -> frozenset[str]:
        flags = self.rows[uid].flags
        return flags | {"\\Recent"} if uid in self.recent else flags

    def flag_line(self) -> bytes:
        return b"* FLAGS " + wire.flag_list([*wire.SYSTEM_FLAGS, *self.keywords]) + b"\r\n"

    # -- changes made by this session ---------------------------------------------------------

    def note_flags(self, uid: int, flags: frozenset[str], modseq: int) -> list[bytes]:
        """Record flags this session set; returns a ``* FLAGS`` line if a keyword is new."""
        row = self.rows[uid]
        self.rows[uid] = dataclasses.replace(row, flags=flags, subdir="cur", modseq=modseq)
        new = {f for f in flags if not f.startswith("\\")} - self.keywords
        self.keywords |= new
        return [self.flag_line()] if new else []

    def note_gone(self, uids: list[int]) -> None:
        for uid in uids:
            if self.rows.pop(uid, None) is not None:
                self.ghosts.add(uid)

    # -- catching up -------------------------------------------------------------------------

    async def refresh(self, *, expunge_ok: bool, in_passing: bool = False) -> list[bytes]:
        """Catch up with the index; returns the untagged responses that announce the changes.

        ``in_passing``: they ride along the answer to a command about particular messages.
        """
        out: list[bytes] = []
        if self.watch is not None and not self.watch.is_set():
            return self._expunges() if expunge_ok else out
        self.watch = self.mailbox.change_event(self.folder)
        modseq = await self.mailbox.modseq(self.folder)
        if modseq is not None and modseq != self.modseq:
            before = self.exists
            changed = await self.mailbox.changed_since(self.folder, self.modseq)
            self.modseq = modseq
            flagged, arrived, keyword_line = self._apply(changed)
            await self._take_recent(arrived)
            await self._find_gone()
            out += keyword_line
            gone = len(self.ghosts) if expunge_ok else 0
            out += (self._expunges() if expunge_ok else []) + self._exists(before - gone, in_passing)
            out += [self.fetch_flags(u) for u in flagged if u in self.rows]
        elif expunge_ok:
            out += self._expunges()
        return out

    def _apply(self, changed: list[MailRow]) -> tuple[list[int], list[int], list[bytes]]:
        keywords = set(self.keywords)
        flagged: list[int] = []
        arrived: list[int] = []
        for row in changed:
            known = self.rows.get(row.uid)
            if known is not None:
                if known.flags != row.flags:
                    flagged.append(row.uid)
                self.rows[row.uid] = row
            elif row.uid not in self.ghosts and (not self.uids or row.uid > self.uids[-1]):
                self._add(row)
                arrived.append(row.uid)
        for uid in flagged:
            self.keywords |= {f for f in self.rows[uid].flags if not f.startswith("\\")}
        return flagged, arrived, [self.flag_line()] if self.keywords != keywords else []

    async def _find_gone(self) -> None:
        """Messages expunged by others."""
        if self.rows:
            self.note_gone(sorted(await self.mailbox.vanished(self.folder, self.rows.keys())))

    def _expunges(self) -> list[bytes]:
        """``* n EXPUNGE`` for every ghost, highest first so no number needs adjusting; with
        QRESYNC one ``* VANISHED`` line of UIDs instead (RFC 7162 §3.2.10)."""
        if not self.ghosts:
            return []
        if self.enabled.qresync:
            lines = [b"* VANISHED " + uid_set(sorted(self.ghosts)) + b"\r\n"]
        else:
            seqs = sorted((self.seq(u) for u in self.ghosts), reverse=True)
            lines = [b"* %d EXPUNGE\r\n" % s for s in seqs]
        self.uids = [u for u in self.uids if u not in self.ghosts]
        self.recent -= self.ghosts
        self.ghosts = set()
        return lines

    def _exists(self, before: int, in_passing: bool) -> list[bytes]:
        if self.exists == before:
            return []
        self.exists_unheeded = in_passing
        return [b"* %d EXISTS\r\n" % self.exists, b"* %d RECENT\r\n" % len(self.recent)]

    def unheeded_exists(self) -> list[bytes]:
        """The EXISTS said in passing, once more (for a session that now idles)."""
        if not self.exists_unheeded:
            return []
        self.exists_unheeded = False
        return [b"* %d EXISTS\r\n" % self.exists]

    def fetch_flags(self, uid: int, *, with_uid: bool = False, with_flags: bool = True) -> bytes:
        """The FETCH line announcing a message's flags (with MODSEQ once CONDSTORE is on)."""
        items = [b"FLAGS " + wire.flag_list(self.flags(uid))] if with_flags else []
        if with_uid or self.enabled.qresync:
            items.append(b"UID %d" % uid)
        if self.enabled.condstore:
            items.append(b"MODSEQ (%d)" % self.rows[uid].modseq)
        return b"* %d FETCH (%s)\r\n" % (self.seq(uid), b" ".join(items))
