"""FETCH: rendering the requested items of each message, straight from the stored bytes.

ENVELOPE and BODYSTRUCTURE are computed once per message and cached in the mail index (in their
wire form), so a client that re-syncs headers does not make us re-parse every message. Message
files are read a batch at a time, off the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pizzamail.imap import binary, mime, structure, wire
from pizzamail.imap.fetchparse import FetchAtt
from pizzamail.imap.view import View
from pizzamail.mailbox import Structures

Send = Callable[[bytes], Awaitable[None]]
_CACHED = ("ENVELOPE", "BODYSTRUCTURE")


@dataclass
class _Message:
    """One message being rendered: its bytes and MIME tree, read or parsed at most once."""

    data: bytes
    _tree: mime.Part | None = None

    def tree(self) -> mime.Part:
        if self._tree is None:
            self._tree = mime.parse(self.data)
        return self._tree


@dataclass
class Fetcher:
    view: View
    atts: tuple[FetchAtt, ...]
    cache: dict[int, dict[str, bytes]] = field(default_factory=dict)
    computed: dict[tuple[int, str], bytes] = field(default_factory=dict)

    async def run(self, uids: list[int], *, uid_command: bool, send: Send) -> None:
        if uid_command and not any(a.name == "UID" for a in self.atts):
            self.atts = (FetchAtt("UID"), *self.atts)
        marked = await self._mark_seen(uids)
        await self._load_cache(uids)
        for batch in self.view.batches(uids):
            for uid, message in zip(batch, await self._load(batch), strict=True):
                if uid not in self.view.rows or message is None:
                    continue  # expunged meanwhile by another session
                await send(self._response(uid, message, uid in marked))
        await self._save_cache()

    async def _mark_seen(self, uids: list[int]) -> set[int]:
        """BODY[...] without PEEK, RFC822 and RFC822.TEXT set \\Seen (not in a read-only view)."""
        if self.view.readonly or not any(a.sets_seen for a in self.atts):
            return set()
        rows = self.view.rows
        changes = {u: {*rows[u].flags, "\\Seen"} for u in uids if "\\Seen" not in rows[u].flags}
        if changes:
            modseq = await self.view.mailbox.set_flags(self.view.folder, changes)
            for uid, flags in changes.items():
                self.view.note_flags(uid, frozenset(flags), modseq)
        return set(changes)

    async def _load_cache(self, uids: list[int]) -> None:
        if not uids or not any(a.name in _CACHED for a in self.atts):
            return
        found = await self.view.mailbox.structures(self.view.folder, uids[0], uids[-1])
        for uid, cached in found.items():
            entry = {"ENVELOPE": cached.envelope, "BODYSTRUCTURE": cached.bodystructure}
            self.cache[uid] = {k: v for k, v in entry.items() if v is not None}

    def _needs_file(self, uid: int) -> bool:
        cached = self.cache.get(uid, {})
        for att in self.atts:
            if att.name in _CACHED and att.name not in cached:
                return True
            if att.name not in ("UID", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "MODSEQ", *_CACHED):
                return True
        return False

    async def _load(self, uids: list[int]) -> list[_Message | None]:
        """The messages of ``uids`` (None: expunged), their files read together."""
        rows = self.view.rows
        wanted = [u for u in uids if u in rows and self._needs_file(u)]
        read = await self.view.mailbox.read_many(self.view.folder, [rows[u] for u in wanted],
                                                  header_only=self._header_only())
        found = dict(zip(wanted, read, strict=True))
        loaded: list[_Message | None] = []
        for uid in uids:
            data = found.get(uid, b"" if uid in rows else None)  # b"": answered from the index
            if uid in found and data is None:
                data = await self._reread(uid)
            loaded.append(None if data is None else _Message(data))
        return loaded

    async def _reread(self, uid: int) -> bytes | None:
        """Another session changed the message's flags (so its file name) since we last looked."""
        fresh = await self.view.mailbox.message(self.view.folder, uid)
        if fresh is None:
            return None
        self.view.rows[uid] = fresh
        [data] = await self.view.mailbox.read_many(self.view.folder, [fresh], header_only=self._header_only())
        return data

    def _header_only(self) -> bool:
        """Every item can be answered from the message header (a client's header listing)."""
        return all(_from_header(att) for att in self.atts)

    def _response(self, uid: int, message: _Message, flags_changed: bool) -> bytes:
        items = [self._item(att, uid, message) for att in self.atts]
        # Flags this FETCH changed are reported with their new MODSEQ (RFC 7162 §3.2.4), whether
        # or not the client asked for FLAGS.
        asked = {a.name for a in self.atts}
        for extra in ("FLAGS", "MODSEQ") if flags_changed else ():
            if extra not in asked and (extra == "FLAGS" or self.view.enabled.condstore):
                items.append(self._item(FetchAtt(extra), uid, message))
        return b"* %d FETCH (%s)\r\n" % (self.view.seq(uid), b" ".join(items))

    def _item(self, att: FetchAtt, uid: int, message: _Message) -> bytes:
        row = self.view.rows[uid]
        name = att.name
        if name == "UID":
            return b"UID %d" % uid
        if name == "FLAGS":
            return b"FLAGS " + wire.flag_list(self.view.flags(uid))
        if name == "INTERNALDATE":
            return b"INTERNALDATE " + wire.date_time(row.internaldate)
        if name == "RFC822.SIZE":
            return b"RFC822.SIZE %d" % row.size
        if name == "MODSEQ":
            return b"MODSEQ (%d)" % row.modseq
        if name in _CACHED:
            return name.encode() + b" " + self._cached(name, uid, message)
        if name == "BODY":
            return b"BODY " + structure.body_structure(message.tree(), extended=False)
        if name == "BODY[]":
            return self._section(att, message)
        if name in ("BINARY[]", "BINARY.SIZE[]"):
            return self._binary(att, message)
        return name.encode() + b" " + wire.literal(_rfc822(name, message.data))

    def _cached(self, name: str, uid: int, message: _Message) -> bytes:
        value = self.cache.get(uid, {}).get(name)
        if value is None:
            if name == "ENVELOPE":
                value = structure.envelope_of_header(mime.split_header(message.data)[0])
            else:
                value = structure.body_structure(message.tree(), extended=True)
            self.computed[uid, name] = value
        return value

    def _section(self, att: FetchAtt, message: _Message) -> bytes:
        assert att.section is not None
        tree = message.tree() if att.section.part else None
        data = mime.section_bytes(message.data, att.section, tree)
        label = b"BODY[" + att.section.wire() + b"]"
        if att.partial is not None:
            start, length = att.partial
            data = data[start:start + length]
            label += b"<%d>" % start
        return label + b" " + wire.literal(data)

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
        get = self.computed.get
        computed = {uid: Structures(envelope=get((uid, "ENVELOPE")),
                                    bodystructure=get((uid, "BODYSTRUCTURE"))) for uid, _ in self.computed}
        await self.view.mailbox.save_structures(self.view.folder, computed)


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
