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
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from pizzamail.errors import ImapError
from pizzamail.imap import wire
from pizzamail.imap.fetchparse import FetchAtt
from pizzamail.imap.reader import SequenceSet
from pizzamail.mailbox import Folder, MailIndex, MailRow

if TYPE_CHECKING:
    from pizzamail.imap.fetch import Fetcher


@dataclass
class Extensions:
    """What a session has turned on (RFC 7162): shared by the session and its views."""

    condstore: bool = False  # MODSEQ in FETCH responses about flag changes
    qresync: bool = False  # VANISHED instead of EXPUNGE, UID in every flag update


#: index entries read ahead when a command names only a few messages (see View.rows)
_AHEAD = 256
#: whole messages read ahead when one is fetched alone, and their most bytes (see View.read)
_FILES_AHEAD = 64
_FILES_AHEAD_BYTES = 4 << 20
#: bytes of message files read together (one trip to the worker thread): bounded memory
_BATCH_BYTES = 4 << 20
T = TypeVar("T")


def by_size(items: list[T], size: Callable[[T], int]) -> Iterator[list[T]]:
    """``items`` in runs of at most ``_BATCH_BYTES`` bytes, but for a single larger one."""
    part: list[T] = []
    total = 0
    for item in items:
        total += size(item)
        if part and total > _BATCH_BYTES:
            yield part
            part, total = [], size(item)
        part.append(item)
    if part:
        yield part


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
    #: the client's numbering, ghosts included: 4 bytes a message, the only per-message state
    #: kept (index entries are read per command, for the messages it names)
    uids: array[int] = field(default_factory=lambda: array("I"))
    ghosts: set[int] = field(default_factory=set)
    recent: set[int] = field(default_factory=set)
    keywords: set[str] = field(default_factory=set)
    #: the first unseen UID when the folder was opened (SELECT's UNSEEN)
    first_unseen: int | None = None
    modseq: int = 0
    #: uid -> modseq of flags this session set itself: not announced back to it
    noted: dict[int, int] = field(default_factory=dict)
    #: index entries read ahead (see :meth:`rows`; None: expunged), good while the event is not set
    _ahead: tuple[asyncio.Event, dict[int, MailRow | None]] | None = None
    #: message bytes read ahead (see :meth:`read`), good while the event is not set
    _files: tuple[asyncio.Event, dict[int, bytes | None]] | None = None
    #: the last EXISTS went out in passing (see the module's docstring) and is owed again
    exists_unheeded: bool = False
    #: set by the mailbox at the folder's next change after we last looked; while it is not
    #: set, nothing changed and a command needs no trip to the database to know that
    watch: asyncio.Event | None = None
    #: FETCH's set-up of each item list asked for lately (see ``Fetcher.of``)
    fetchers: dict[tuple[tuple[FetchAtt, ...], bool], Fetcher] = field(default_factory=dict)

    @classmethod
    async def open(cls, mailbox: MailIndex, folder: Folder, readonly: bool, enabled: Extensions) -> View:
        watch = mailbox.change_event(folder)  # before reading: no change slips by
        outline = await mailbox.outline(folder)
        if outline is None:
            raise ImapError(f"{folder.name} was deleted meanwhile", code="NONEXISTENT")
        view = cls(mailbox, folder, readonly, enabled, uids=array("I", outline.uids),
                   keywords=set(outline.keywords), first_unseen=outline.first_unseen, modseq=outline.modseq,
                   watch=watch)
        await view._take_recent(view.uids, floor=folder.first_recent)  # as read with the folder
        return view

    async def _take_recent(self, uids: Sequence[int], *, floor: int | None = None) -> None:
        """A read-write session takes \\Recent from the folder; EXAMINE only looks (RFC 3501 §6.3.2).
        ``uids`` ascend: only those from the folder's floor on are looked at (a SELECT of 100,000
        messages passes them all)."""
        if not uids:
            return
        if floor is None:
            floor = await self.mailbox.recent_from(self.folder)
        tail = uids[bisect_left(uids, floor):]
        if self.readonly:
            self.recent |= set(tail)
        elif tail:
            self.recent |= await self.mailbox.claim_recent(self.folder, tail)

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

    def live(self, uid: int) -> bool:
        """In the numbering and not expunged by this session (another's expunge may still be
        unknown: its entry is then missing when read)."""
        at = bisect_left(self.uids, uid)
        return at < len(self.uids) and self.uids[at] == uid and uid not in self.ghosts

    async def rows(self, uids: Sequence[int]) -> dict[int, MailRow]:
        """The index entries of ``uids`` (ascending), as they are now; expunged ones are missing.

        A client that fetches message after message (mbsync) would cost a query each: a request
        for a few messages reads the next ``_AHEAD`` of the numbering with them, and those are
        served until the folder changes (its change event, taken before the read, is set)."""
        if not uids:
            return {}
        ahead = self._ahead
        if ahead is not None and not ahead[0].is_set() and all(u in ahead[1] for u in uids):
            return {u: row for u in uids if (row := ahead[1][u]) is not None}
        if len(uids) >= _AHEAD:
            return await self.mailbox.rows(self.folder, uids)
        changed = self.mailbox.change_event(self.folder)
        at = bisect_left(self.uids, uids[0])
        span = sorted({*self.uids[at:at + _AHEAD], *uids})
        found = await self.mailbox.rows(self.folder, span)
        self._ahead = (changed, {u: found.get(u) for u in span})
        return {u: found[u] for u in uids if u in found}

    async def read(self, rows: list[MailRow], *, header_only: bool) -> list[bytes | None]:
        """The messages' bytes (None: renamed or expunged since ``rows`` were read).

        A whole message asked for alone (mbsync's pull: one FETCH per message) comes with the few
        after it in the numbering, read in the same trip to the worker thread and kept until asked
        for or the folder changes: one trip per ``_FILES_AHEAD`` messages, not one each."""
        if header_only or len(rows) != 1:
            return await self.mailbox.read_many(self.folder, rows, header_only=header_only)
        [row] = rows
        ahead = self._files
        if ahead is not None and not ahead[0].is_set() and row.uid in ahead[1]:
            return [ahead[1].pop(row.uid)]
        changed = self.mailbox.change_event(self.folder)
        at = bisect_right(self.uids, row.uid)
        following = list((await self.rows(self.uids[at:at + _FILES_AHEAD])).values())
        size = row.size
        for n, other in enumerate(following):
            size += other.size
            if size > _FILES_AHEAD_BYTES:
                following = following[:n]
                break
        data = await self.mailbox.read_many(self.folder, [row, *following])
        self._files = (changed, {r.uid: d for r, d in zip(following, data[1:], strict=True)})
        return data[:1]

    def flags(self, row: MailRow) -> frozenset[str]:
        return row.flags | {"\\Recent"} if row.uid in self.recent else row.flags

    def flag_line(self) -> bytes:
        return b"* FLAGS " + wire.flag_list([*wire.SYSTEM_FLAGS, *self.keywords]) + b"\r\n"

    # -- changes made by this session ---------------------------------------------------------

    def note_flags(self, uid: int, flags: frozenset[str], modseq: int) -> list[bytes]:
        """Record flags this session set; returns a ``* FLAGS`` line if a keyword is new."""
        self.noted[uid] = modseq
        new = {f for f in flags if not f.startswith("\\")} - self.keywords
        self.keywords |= new
        return [self.flag_line()] if new else []

    def note_gone(self, uids: list[int]) -> None:
        self.ghosts |= {u for u in uids if self.live(u)}

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
            self.noted = {u: m for u, m in self.noted.items() if m > modseq}
            await self._take_recent(arrived)
            await self._find_gone()
            out += keyword_line
            gone = len(self.ghosts) if expunge_ok else 0
            out += (self._expunges() if expunge_ok else []) + self._exists(before - gone, in_passing)
            out += [self.fetch_flags(row) for row in flagged if self.live(row.uid)]
        elif expunge_ok:
            out += self._expunges()
        return out

    def _apply(self, changed: list[MailRow]) -> tuple[list[MailRow], list[int], list[bytes]]:
        """Arrivals join the numbering; re-flagged messages the client knows are announced,
        unless this session set those flags itself."""
        keywords = set(self.keywords)
        flagged: list[MailRow] = []
        arrived: list[int] = []
        for row in changed:
            if self.live(row.uid):
                if self.noted.get(row.uid) != row.modseq:
                    flagged.append(row)
            elif row.uid not in self.ghosts and (not self.uids or row.uid > self.uids[-1]):
                self.uids.append(row.uid)
                arrived.append(row.uid)
            else:
                continue
            self.keywords |= {f for f in row.flags if not f.startswith("\\")}
        return flagged, arrived, [self.flag_line()] if self.keywords != keywords else []

    async def _find_gone(self) -> None:
        """Messages expunged by others."""
        live = [u for u in self.uids if u not in self.ghosts] if self.ghosts else self.uids
        self.ghosts |= await self.mailbox.vanished(self.folder, live)

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
        self.uids = array("I", (u for u in self.uids if u not in self.ghosts))
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

    def fetch_flags(self, row: MailRow, *, with_uid: bool = False, with_flags: bool = True) -> bytes:
        """The FETCH line announcing a message's flags (with MODSEQ once CONDSTORE is on)."""
        items = [b"FLAGS " + wire.flag_list(self.flags(row))] if with_flags else []
        if with_uid or self.enabled.qresync:
            items.append(b"UID %d" % row.uid)
        if self.enabled.condstore:
            items.append(b"MODSEQ (%d)" % row.modseq)
        return b"* %d FETCH (%s)\r\n" % (self.seq(row.uid), b" ".join(items))
