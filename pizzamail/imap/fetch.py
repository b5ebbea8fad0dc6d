"""FETCH: rendering the requested items of each message, from its index entry and the stored bytes.

The header fields clients list, ENVELOPE and BODYSTRUCTURE are cached in the mail index (at
delivery, or by the first FETCH that reads the file), so a client's header listing opens no
message file. Index entries are read a batch at a time, files too, off the event loop.
"""

from __future__ import annotations

import asyncio
import functools
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, cast

from pizzamail.imap import binary, cache, mime, structure, wire
from pizzamail.imap.fetchparse import FetchAtt, Section
from pizzamail.imap.view import View, by_size
from pizzamail.mailbox import MailRow, Structures
from pizzamail.store.mailindex import PLACE

_NOTHING = Structures()
_RECENT = frozenset({"\\Recent"})

Send = Callable[[bytes], Awaitable[None]]
Flush = Callable[[], Awaitable[None]]
_CACHED = ("ENVELOPE", "BODYSTRUCTURE")
_FROM_ROW = ("UID", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "MODSEQ")
#: messages whose index entries are read together (one query; their files then by_size)
_BATCH = 256
#: messages in a long FETCH's first batch: its answer goes out while the next batches are read
_FIRST = 32
#: fetchers a session keeps set up (see Fetcher.of)
_FETCHERS_KEPT = 16
#: messages whose newly computed cache is written together (the first listing of 100,000 files
#: found on disk would otherwise hold all of it until its end)
_SAVE_EVERY = 2048


@dataclass
class _Message:
    """One message being rendered: its bytes and MIME tree, read or parsed at most once."""

    data: bytes
    _tree: mime.Part | None = None

    def tree(self) -> mime.Part:
        if self._tree is None:
            self._tree = mime.parse(self.data)
        return self._tree


_NO_FILE = _Message(b"")  # answered from the index alone
Entry = tuple[MailRow, Structures]
#: renders one item of one message
Render = Callable[[MailRow, Structures, _Message], bytes]
#: renders one item of a batch of messages (their index entries, what is cached of them, their
#: files): the values its part of the response line's format takes, a sequence each. A header
#: listing renders thousands of messages: the columns it asks for run in C (map over the batch),
#: no Python code per message, and each line is one %-format.
Column = Callable[[Sequence[MailRow], Sequence[Structures], Sequence[_Message]], list[Sequence[Any]]]
_UID, _SIZE, _DATE = attrgetter("uid"), attrgetter("size"), attrgetter("internaldate")
_FLAGS, _MODSEQ, _HEADERS = attrgetter("flags"), attrgetter("modseq"), attrgetter("headers")


@dataclass
class Fetcher:
    view: View
    atts: tuple[FetchAtt, ...]
    computed: dict[int, dict[str, bytes]] = field(default_factory=dict)
    #: the format of a response line (sequence number, each item's values, the flags this FETCH
    #: changed) and the columns that fill it, decided once per FETCH
    line: bytes = b""
    columns: list[Column] = field(default_factory=list)
    #: the lower-case field names of each HEADER.FIELDS item the cache answers
    from_cache: dict[FetchAtt, frozenset[bytes]] = field(default_factory=dict)
    #: an item needs the message's bytes whatever is cached
    always_file: bool = False
    #: the names of the items asked for
    names: frozenset[str] = frozenset()
    #: the FETCH sets \Seen (see :meth:`_may_set_seen`)
    seen: bool = False
    #: every item is answered from the message's header (see :func:`_from_header`)
    header_only: bool = False
    #: the tagged answers of a run of commands answered together (see :meth:`run`)
    ends: Ends | None = None

    @classmethod
    def of(cls, view: View, atts: tuple[FetchAtt, ...], *, uid_command: bool) -> Fetcher:
        """The fetcher of ``atts`` in ``view``, set up once per distinct item list: a client that
        fetches message after message (mbsync's pull) asks for the same items each time."""
        key = (atts, uid_command)
        found = view.fetchers.get(key)
        if found is None:
            if len(view.fetchers) >= _FETCHERS_KEPT:
                view.fetchers.clear()
            if uid_command and not any(a.name == "UID" for a in atts):
                atts = (FetchAtt("UID"), *atts)
            found = view.fetchers[key] = cls(view, atts)
        return found

    def __post_init__(self) -> None:
        self.from_cache = {a: frozenset(f.lower() for f in a.section.fields) for a in self.atts
                           if a.section is not None and cache.answers(a.section)}
        self.seen = self._may_set_seen()
        self.header_only = all(_from_header(att) for att in self.atts)
        parts = [self._column(att) for att in self.atts]
        self.columns = [column for _, column in parts]
        self.line = (b"* %d FETCH (" + b" ".join(fragment for fragment, _ in parts)
                     + (b"%s" if self.seen else b"") + b")\r\n")
        self.names = frozenset(a.name for a in self.atts)
        self.always_file = any(a.name not in (*_FROM_ROW, *_CACHED) and a not in self.from_cache
                               for a in self.atts)

    async def run(self, uids: list[int], *, send: Send, flush: Flush, ends: Ends | None = None) -> None:
        """The FETCH responses of ``uids``, batch by batch: each is written out (``flush``) as soon
        as it is made, so the client reads it while the next ones are made (waiting for 256 KB to
        gather, a 2,000-mail header listing sent its first byte after a third of its time).

        With ``ends`` (``uids`` ascending), each of its answers goes out right after the response
        of its message, or where that message would have been when it is gone."""
        self.computed, self.ends = {}, ends
        try:
            await self._run(uids, send, flush)
        finally:
            self.ends = None
        if ends is not None:
            await send(ends.rest())

    async def _run(self, uids: list[int], send: Send, flush: Flush) -> None:
        batches = _batches(uids)
        # The next batch's entries are read while this one goes out: on PostgreSQL while it renders
        # too, on SQLite (whose reads run in place) while the socket drains. Not beside a thread
        # reading this batch's files on SQLite: its read gives up the GIL at each row and waits to
        # get it back (500 messages' bodies took 11.6-12.6 ms against 9.7-10.0). The first batch is
        # awaited as it is (a task for it would cost a FETCH of one message more).
        early = not (self.always_file and self.view.mailbox.reads_in_place)
        ahead: asyncio.Future[dict[int, Entry]] | None = None
        try:
            for n, batch in enumerate(batches):
                entries = await (self._entries(batch) if ahead is None else ahead)
                more = n + 1 < len(batches)
                ahead = asyncio.ensure_future(self._entries(batches[n + 1])) if more and early else None
                await self._send_batch(entries, send)
                if more:
                    await flush()
        finally:
            if ahead is not None:
                ahead.cancel()
        await self._save_cache()

    async def _send_batch(self, entries: dict[int, Entry], send: Send) -> None:
        if len(self.computed) >= _SAVE_EVERY:
            await self._save_cache()
        marked = await self._mark_seen(entries)
        listed = list(entries.values())
        needing = self._needing_file(listed) if listed else set()
        if not needing:  # a header listing: from the index alone, one send
            await send(self._lines(listed, [_NO_FILE] * len(listed), marked))
            return
        for part in by_size(listed, lambda entry: entry[0].size):
            loaded = await self._load(part, needing)
            # None: expunged meanwhile by another session
            kept = [(entry, message) for entry, message in zip(part, loaded, strict=True)
                    if message is not None]
            if kept:
                await send(self._lines([entry for entry, _ in kept], [m for _, m in kept], marked))

    async def _entries(self, uids: list[int]) -> dict[int, Entry]:
        """The index entries of ``uids`` (expunged ones left out), with what is cached of each
        when an item can be answered from that."""
        wanted = {a.name.lower() for a in self.atts if a.name in _CACHED}  # the columns' names
        if self.from_cache:
            wanted.add("headers")
        if self.always_file and not wanted:  # message after message (mbsync): the view reads ahead
            return {u: (row, _NOTHING) for u, row in (await self.view.rows(uids)).items()}
        # A listing reads neither the files' places nor modseqs (a FLAGS listing only UIDs and
        # flags, sizes and dates): the files it needs after all (of messages whose cache is not
        # filled yet) are placed by _load
        if self.always_file:
            wanted.add(PLACE)
        if "MODSEQ" in self.names:
            wanted.add("modseq")
        return await self.view.mailbox.cached_rows(self.view.folder, uids, wanted)

    def _may_set_seen(self) -> bool:
        """BODY[...] without PEEK, RFC822 and RFC822.TEXT set \\Seen (not in a read-only view)."""
        return not self.view.readonly and any(a.sets_seen for a in self.atts)

    async def _mark_seen(self, entries: dict[int, Entry]) -> set[int]:
        if not self.seen:
            return set()
        changes = {u: {*row.flags, "\\Seen"} for u, (row, _) in entries.items() if "\\Seen" not in row.flags}
        if changes:
            modseq = await self.view.mailbox.set_flags(self.view.folder, changes)
            for uid, flags in changes.items():
                self.view.note_flags(uid, frozenset(flags), modseq)
                row, cached = entries[uid]
                entries[uid] = (row._replace(flags=frozenset(flags), subdir="cur", modseq=modseq),
                                cached)
        return set(changes)

    def _needing_file(self, entries: list[Entry]) -> set[int]:
        """The UIDs of the messages whose file the FETCH must read: all if an item needs it
        whatever is cached, else those missing a cached part it asks for."""
        if self.always_file:
            return {row.uid for row, _ in entries}
        slots = [n for n, name in enumerate(Structures._fields) if name.upper() in self.names
                 or (name == "headers" and self.from_cache)]
        cached = [c for _, c in entries]
        if not any(None in map(itemgetter(n), cached) for n in slots):  # a listing, all cached
            return set()
        return {row.uid for row, c in entries if any(c[n] is None for n in slots)}

    async def _load(self, entries: list[Entry], needing: set[int]) -> list[_Message | None]:
        """The messages of ``entries`` (None: expunged), the files of ``needing`` read together."""
        wanted = [row for row, _ in entries if row.uid in needing]
        if wanted and not wanted[0].name:  # read without their places (see _entries)
            placed = await self.view.rows([row.uid for row in wanted])
            wanted = [placed[row.uid] for row in wanted if row.uid in placed]
        read = await self.view.read(wanted, header_only=self.header_only) if wanted else []
        found = {row.uid: data for row, data in zip(wanted, read, strict=True)}
        loaded: list[_Message | None] = []
        for row, _ in entries:
            if row.uid not in found:
                loaded.append(_NO_FILE)
                continue
            data = found[row.uid]
            if data is None:
                data = await self._reread(row.uid)
            loaded.append(None if data is None else _Message(data))
        return loaded

    async def _reread(self, uid: int) -> bytes | None:
        """Another session changed the message's flags (so its file name) since we looked."""
        fresh = await self.view.mailbox.message(self.view.folder, uid)
        if fresh is None:
            return None
        [data] = await self.view.mailbox.read_many(self.view.folder, [fresh], header_only=self.header_only)
        return data

    def _lines(self, entries: list[Entry], messages: list[_Message], marked: set[int]) -> bytes:
        """The response lines of a batch: the values column by column, then one format a line."""
        if not entries:  # every message of the batch expunged meanwhile
            return b""
        rows, cached = cast(tuple[Sequence[MailRow], Sequence[Structures]], tuple(zip(*entries, strict=True)))
        values: list[Sequence[Any]] = [self._numbers(rows)]
        for column in self.columns:
            values += column(rows, cached, messages)
        if self.seen:
            values.append([self._changed(row) if row.uid in marked else b"" for row in rows])
        lines = map(self.line.__mod__, zip(*values, strict=True))
        if self.ends is not None:
            ends = self.ends
            return b"".join(ends.before(uid) + line + ends.upto(uid)
                            for uid, line in zip(map(_UID, rows), lines, strict=True))
        return b"".join(lines)

    def _numbers(self, rows: Sequence[MailRow]) -> Sequence[int]:
        """The messages' sequence numbers: a run of the numbering, unless some are left out."""
        numbering, uids = self.view.uids, list(map(_UID, rows))
        first = bisect_left(numbering, uids[0])
        if numbering[first:first + len(uids)].tolist() == uids:
            return range(first + 1, first + 1 + len(uids))
        return [bisect_left(numbering, uid) + 1 for uid in uids]

    def _changed(self, row: MailRow) -> bytes:
        """Flags this FETCH changed are reported with their new MODSEQ (RFC 7162 §3.2.4), whether
        or not the client asked for FLAGS."""
        asked = {a.name for a in self.atts}
        out = b"" if "FLAGS" in asked else b" FLAGS " + wire.flag_list(self.view.flags(row))
        if "MODSEQ" not in asked and self.view.enabled.condstore:
            out += b" MODSEQ (%d)" % row.modseq
        return out

    def _column(self, att: FetchAtt) -> tuple[bytes, Column]:
        """The fragment of the response line's format for ``att``, and its column."""
        if att.name in _SIMPLE:
            return _SIMPLE[att.name]
        if att.name == "FLAGS":
            return b"FLAGS %s", lambda rows, _, __: [self._flags(rows)]
        if att in self.from_cache and att.partial is None:
            return self._header_column(att)
        render = self._render(att)
        return b"%s", lambda rows, cached, messages: [list(map(render, rows, cached, messages))]

    def _flags(self, rows: Sequence[MailRow]) -> Sequence[bytes]:
        recent = self.view.recent
        if recent and not recent.isdisjoint(map(_UID, rows)):
            return list(map(_flag_list_recent, map(_FLAGS, rows), map(recent.__contains__, map(_UID, rows))))
        return list(map(wire.flag_list_of, map(_FLAGS, rows)))

    def _header_column(self, att: FetchAtt) -> tuple[bytes, Column]:
        """``HEADER.FIELDS`` from the cached lines: their length, and the lines."""
        section = att.section
        assert section is not None
        wanted = self.from_cache[att]

        def column(rows: Sequence[MailRow], cached: Sequence[Structures],
                   messages: Sequence[_Message]) -> list[Sequence[Any]]:
            lines = list(map(_HEADERS, cached))
            if None in lines:  # some not cached yet: their files are read
                data = [self._header_fields(section, wanted, row.uid, c, message)
                        for row, c, message in zip(rows, cached, messages, strict=True)]
            else:
                data = cache.pick_each(wanted, cast(list[bytes], lines))
            return [list(map(len, data)), data]

        label = b"BODY[" + section.wire().replace(b"%", b"%%") + b"]"
        return label + b" {%d}\r\n%s", column

    def _render(self, att: FetchAtt) -> Render:
        name = att.name
        if name == "BODY":
            return lambda row, c, m: b"BODY " + structure.body_structure(m.tree(), extended=False)
        if name in _CACHED:
            return lambda row, c, m: name.encode() + b" " + self._cached(name, row.uid, c, m)
        if name == "BODY[]":
            return self._section(att)
        if name in ("BINARY[]", "BINARY.SIZE[]"):
            return lambda row, c, m: self._binary(att, m)
        return lambda row, c, m: name.encode() + b" " + wire.literal(_rfc822(name, m.data))

    def _cached(self, name: str, uid: int, cached: Structures, message: _Message) -> bytes:
        value = cached.envelope if name == "ENVELOPE" else cached.bodystructure
        if value is None:
            if name == "ENVELOPE":
                value = structure.envelope_of_header(mime.split_header(message.data)[0])
            else:
                value = structure.body_structure(message.tree(), extended=True)
            self.computed.setdefault(uid, {})[name] = value
        return value

    def _section(self, att: FetchAtt) -> Render:
        section = att.section
        assert section is not None
        label = b"BODY[" + section.wire() + b"]"
        start, length = att.partial or (0, None)
        if att.partial is not None:
            label += b"<%d>" % start
        wanted = self.from_cache.get(att)

        def render(row: MailRow, cached: Structures, message: _Message) -> bytes:
            if wanted is not None:
                data = self._header_fields(section, wanted, row.uid, cached, message)
            else:
                data = mime.section_bytes(message.data, section, message.tree() if section.part else None)
            if length is not None:
                data = data[start:start + length]
            return label + b" " + wire.literal(data)

        return render

    def _header_fields(
        self, section: Section, wanted: frozenset[bytes], uid: int, cached: Structures, message: _Message,
    ) -> bytes:
        """From the cached lines; a message read without them has them cached now (a migrated
        home's or a folder's found on disk: their first listing fills the cache)."""
        lines = cached.headers
        if lines is None:
            lines = cache.header_lines(mime.split_header(message.data)[0])
            if lines is None:
                return mime.section_bytes(message.data, section)
            self.computed.setdefault(uid, {})["HEADERS"] = lines
        return cache.header_fields(lines, wanted)

    def _binary(self, att: FetchAtt, message: _Message) -> bytes:
        assert att.section is not None
        data = binary.decoded(message.data, att.section.part, message.tree())
        part = att.section.wire()
        if att.name == "BINARY.SIZE[]":
            return b"BINARY.SIZE[%s] %d" % (part, len(data))
        label = b"BINARY[" + part + b"]"
        if att.partial is not None:
            start, length = att.partial
            data = data[start:start + length]
            label += b"<%d>" % start
        return label + b" " + binary.literal8(data)

    async def _save_cache(self) -> None:
        if not self.computed:
            return
        computed, self.computed = self.computed, {}
        await self.view.mailbox.save_structures(self.view.folder, {
            uid: Structures(envelope=c.get("ENVELOPE"), bodystructure=c.get("BODYSTRUCTURE"),
                            headers=c.get("HEADERS")) for uid, c in computed.items()})


#: the items rendered from the index entry alone, but FLAGS (which depends on the session)
_SIMPLE: dict[str, tuple[bytes, Column]] = {
    "UID": (b"UID %d", lambda rows, _, __: [list(map(_UID, rows))]),
    "INTERNALDATE": (b"INTERNALDATE %s", lambda rows, _, __: [wire.date_times(map(_DATE, rows))]),
    "RFC822.SIZE": (b"RFC822.SIZE %d", lambda rows, _, __: [list(map(_SIZE, rows))]),
    "MODSEQ": (b"MODSEQ (%d)", lambda rows, _, __: [list(map(_MODSEQ, rows))]),
}


@dataclass
class Ends:
    """The tagged answers of commands answered together, by the UID each follows (ascending)."""

    due: list[tuple[int, bytes]]
    #: how many are out (in the responses made so far)
    sent: int = 0

    def before(self, uid: int) -> bytes:
        """The answers not out yet of the messages before ``uid`` (gone, so without a response)."""
        return self.upto(uid - 1)

    def upto(self, uid: int) -> bytes:
        """The answers not out yet of the messages up to ``uid``, its own included."""
        start = self.sent
        while self.sent < len(self.due) and self.due[self.sent][0] <= uid:
            self.sent += 1
        return b"".join(answer for _, answer in self.due[start:self.sent])

    def rest(self) -> bytes:
        return self.upto(self.due[-1][0]) if self.due else b""


@functools.lru_cache(maxsize=1024)  # a few combinations of flags, each with \Recent or not
def _flag_list_recent(flags: frozenset[str], recent: bool) -> bytes:
    """The flag list of a message seen first by this session (\\Recent) or not, in C per message."""
    return wire.flag_list_of(flags | _RECENT if recent else flags)


def _batches(uids: list[int]) -> list[list[int]]:
    """``uids`` in batches of ``_BATCH``, but for a short first one (see ``_FIRST``)."""
    first = min(_FIRST, _BATCH)
    rest = (uids[start:start + _BATCH] for start in range(first, len(uids), _BATCH))
    return [uids[:first], *rest] if uids else []


_HEADER_TEXTS = ("HEADER", "HEADER.FIELDS", "HEADER.FIELDS.NOT")
_METADATA = ("UID", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "MODSEQ", "ENVELOPE", "RFC822.HEADER")


def _from_header(att: FetchAtt) -> bool:
    if att.name in _METADATA:
        return True
    section = att.section
    return att.name == "BODY[]" and section is not None and not section.part \
        and section.text in _HEADER_TEXTS


def _rfc822(name: str, data: bytes) -> bytes:
    if name == "RFC822":
        return data
    header, body = mime.split_header(data)
    return header if name == "RFC822.HEADER" else body
