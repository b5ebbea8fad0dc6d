"""FETCH: rendering the requested items of each message, from its index entry and the stored bytes.

The header fields clients list, ENVELOPE and BODYSTRUCTURE are cached in the mail index (at
delivery, or by the first FETCH that reads the file), so a client's header listing opens no
message file. Index entries are read a batch at a time, files too, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pizzamail.imap import binary, cache, mime, structure, wire
from pizzamail.imap.fetchparse import FetchAtt, Section
from pizzamail.imap.view import View, by_size
from pizzamail.mailbox import MailRow, Structures

_NOTHING = Structures()

Send = Callable[[bytes], Awaitable[None]]
_CACHED = ("ENVELOPE", "BODYSTRUCTURE")
_FROM_ROW = ("UID", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "MODSEQ")
#: messages whose index entries are read together (one query; their files then by_size)
_BATCH = 256
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
#: renders one item of one message (a header listing renders thousands: decided once per FETCH)
Render = Callable[[MailRow, Structures, _Message], bytes]


@dataclass
class Fetcher:
    view: View
    atts: tuple[FetchAtt, ...]
    computed: dict[int, dict[str, bytes]] = field(default_factory=dict)
    renders: list[Render] = field(default_factory=list)
    #: the lower-case field names of each HEADER.FIELDS item the cache answers
    from_cache: dict[FetchAtt, frozenset[bytes]] = field(default_factory=dict)
    #: an item needs the message's bytes whatever is cached
    always_file: bool = False

    async def run(self, uids: list[int], *, uid_command: bool, send: Send) -> None:
        if uid_command and not any(a.name == "UID" for a in self.atts):
            self.atts = (FetchAtt("UID"), *self.atts)
        self.from_cache = {a: frozenset(f.lower() for f in a.section.fields) for a in self.atts
                           if a.section is not None and cache.answers(a.section)}
        self.renders = [self._render(att) for att in self.atts]
        self.always_file = any(a.name not in (*_FROM_ROW, *_CACHED) and a not in self.from_cache
                               for a in self.atts)
        batches = [uids[start:start + _BATCH] for start in range(0, len(uids), _BATCH)]
        # The next batch's entries are read (in the database's thread) while this one renders.
        ahead = asyncio.ensure_future(self._entries(batches[0])) if batches else None
        try:
            for n in range(len(batches)):
                assert ahead is not None
                entries = await ahead
                ahead = asyncio.ensure_future(self._entries(batches[n + 1])) if n + 1 < len(batches) else None
                await self._send_batch(entries, send)
        finally:
            if ahead is not None:
                ahead.cancel()
        await self._save_cache()

    async def _send_batch(self, entries: dict[int, Entry], send: Send) -> None:
        if len(self.computed) >= _SAVE_EVERY:
            await self._save_cache()
        marked = await self._mark_seen(entries)
        for part in by_size(list(entries.values()), lambda entry: entry[0].size):
            loaded = await self._load(part)
            await send(b"".join([self._response(row, cached, message, row.uid in marked)
                                 for (row, cached), message in zip(part, loaded, strict=True)
                                 if message is not None]))  # None: expunged meanwhile by another session

    async def _entries(self, uids: list[int]) -> dict[int, Entry]:
        """The index entries of ``uids`` (expunged ones left out), with what is cached of each
        when an item can be answered from that."""
        wanted = {a.name.lower() for a in self.atts if a.name in _CACHED}  # the columns' names
        if self.from_cache:
            wanted.add("headers")
        if wanted:
            return await self.view.mailbox.cached_rows(self.view.folder, uids, wanted)
        return {u: (row, _NOTHING) for u, row in (await self.view.rows(uids)).items()}

    async def _mark_seen(self, entries: dict[int, Entry]) -> set[int]:
        """BODY[...] without PEEK, RFC822 and RFC822.TEXT set \\Seen (not in a read-only view)."""
        if self.view.readonly or not any(a.sets_seen for a in self.atts):
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

    def _needs_file(self, cached: Structures) -> bool:
        if self.always_file:
            return True
        return (self.from_cache and cached.headers is None) or any(
            getattr(cached, att.name.lower()) is None for att in self.atts if att.name in _CACHED)

    async def _load(self, entries: list[Entry]) -> list[_Message | None]:
        """The messages of ``entries`` (None: expunged), the files needed read together."""
        wanted = [row for row, cached in entries if self._needs_file(cached)]
        read = await self.view.read(wanted, header_only=self._header_only()) if wanted else []
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
        [data] = await self.view.mailbox.read_many(self.view.folder, [fresh], header_only=self._header_only())
        return data

    def _header_only(self) -> bool:
        """Every item can be answered from the message header (a client's header listing)."""
        return all(_from_header(att) for att in self.atts)

    def _response(self, row: MailRow, cached: Structures, message: _Message, flags_changed: bool) -> bytes:
        items = [render(row, cached, message) for render in self.renders]
        # Flags this FETCH changed are reported with their new MODSEQ (RFC 7162 §3.2.4), whether
        # or not the client asked for FLAGS.
        if flags_changed:
            asked = {a.name for a in self.atts}
            for extra in ("FLAGS", "MODSEQ"):
                if extra not in asked and (extra == "FLAGS" or self.view.enabled.condstore):
                    items.append(self._render(FetchAtt(extra))(row, cached, message))
        return b"* %d FETCH (%s)\r\n" % (self.view.seq(row.uid), b" ".join(items))

    def _render(self, att: FetchAtt) -> Render:
        name = att.name
        flags = self.view.flags
        simple: dict[str, Render] = {
            "UID": lambda row, c, m: b"UID %d" % row.uid,
            "FLAGS": lambda row, c, m: b"FLAGS " + wire.flag_list(flags(row)),
            "INTERNALDATE": lambda row, c, m: b"INTERNALDATE " + wire.date_time(row.internaldate),
            "RFC822.SIZE": lambda row, c, m: b"RFC822.SIZE %d" % row.size,
            "MODSEQ": lambda row, c, m: b"MODSEQ (%d)" % row.modseq,
            "BODY": lambda row, c, m: b"BODY " + structure.body_structure(m.tree(), extended=False),
        }
        if name in simple:
            return simple[name]
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
