"""SEARCH evaluation over the selected view. Flag, size, date and set keys use the view's index
rows; header keys of fields the index caches (:mod:`pizzamail.imap.cache`: From, To, Subject and
the rest clients list) its cached lines; other header keys and text keys read the message (once,
however many keys need it, and only for the messages the other keys leave in question).

A mail is searched in the text that can be read of it: what does not decode (a damaged encoded
word, base64 or charset) is searched as it stands, never failing the command for the folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.utils import parsedate_to_datetime

from pizzamail.errors import ImapError
from pizzamail.imap import binary, cache, mime
from pizzamail.imap.searchkeys import (
    AllKey,
    AndKey,
    DateKey,
    FlagKey,
    HeaderKey,
    ModseqKey,
    NotKey,
    OrKey,
    SearchKey,
    SetKey,
    SizeKey,
    TextKey,
)
from pizzamail.imap.view import View, by_size
from pizzamail.mailbox import MailRow
from pizzamail.store.mailindex import PLACE

#: index entries read at a time
_BATCH = 2000
#: what is read of each index entry when the header keys are all answered by the cached lines: the
#: whole row (a message not cached yet is read from its file) and the lines
_WITH_LINES = frozenset({PLACE, "modseq", "headers"})
#: what a key the index answers alone reads of each entry: no file's place (a file is never read)
_INDEX_ONLY = frozenset({"modseq"})


def decode_text(raw: bytes) -> str:
    """A header value as readable text: raw UTF-8 and RFC 2047 encoded words both decoded."""
    text = raw.decode("utf-8", "replace")
    if "=?" not in text:  # no encoded word: the email package would give it back as it is
        return text
    try:
        return str(make_header(decode_header(text)))
    except (ValueError, LookupError, HeaderParseError):  # ValueError covers UnicodeError
        return text


def body_text(data: bytes) -> str:
    """The text parts of a message in the tree FETCH serves (so no deeper than it goes), each
    transfer-decoded and charset-decoded as far as that works, joined."""
    return "\n".join(_text(part) for part in _text_parts(mime.parse(data)))


def _text_parts(root: mime.Part) -> Iterator[mime.Part]:
    pending = [root]
    while pending:
        part = pending.pop()
        if part.maintype == "text":
            yield part
        pending += part.parts
        if part.message is not None:
            pending.append(part.message)


def _text(part: mime.Part) -> str:
    try:
        data = binary.content(part)
    except ImapError:  # an unknown transfer encoding or damaged base64: the raw text is what there is
        data = part.body
    charset = dict(part.params).get("charset", b"").decode("latin-1").strip()
    try:
        return data.decode(charset or "utf-8", "replace")
    except (LookupError, ValueError):  # unknown, not a text codec, or not a name at all
        return data.decode("utf-8", "replace")


class _NeedsBytes(Exception):
    """A key asked for the message's bytes: read them (off the event loop) and test again."""


class _Candidate:
    """One message under test; its header fields and text are parsed lazily, and without its
    bytes (``data`` None) a key that needs them raises :class:`_NeedsBytes`. With the index's
    cached ``lines``, its header fields are those: only for a key that reads no other field."""

    def __init__(self, row: MailRow, data: bytes | None = None, lines: bytes | None = None) -> None:
        self.row = row
        self._data = data
        self._lines = lines
        self._fields: list[tuple[bytes, bytes]] | None = None
        self._body: str | None = None

    @property
    def data(self) -> bytes:
        if self._data is None:
            raise _NeedsBytes
        return self._data

    @property
    def fields(self) -> list[tuple[bytes, bytes]]:
        if self._fields is None:
            self._fields = mime.header_fields(mime.split_header(self.data)[0])
        return self._fields

    def raw_values(self, name: bytes) -> list[bytes]:
        """The values of the field ``name`` (lower case), from the cached lines if there are any."""
        if self._data is None and self._lines is not None:
            return cache.values(self._lines, name)
        return [v for n, v in self.fields if n == name]

    @property
    def body(self) -> str:
        if self._body is None:
            self._body = body_text(self.data).casefold()
        return self._body

    def header_values(self, name: str) -> list[str]:
        return [decode_text(v).casefold() for v in self.raw_values(name.encode("ascii", "replace"))]


class Searcher:
    def __init__(self, view: View) -> None:
        self.view = view
        self._sets: dict[SetKey, set[int]] = {}

    async def run(self, key: SearchKey) -> list[int]:
        """The matching live UIDs, ascending: first by what the index says, then, for the
        messages that leaves in question, by their bytes; both a batch at a time."""
        live = [u for u in self.view.uids if u not in self.view.ghosts]
        fields = _fields_read(key)
        found: list[int] = []
        for start in range(0, len(live), _BATCH):
            batch = live[start:start + _BATCH]
            if fields == set():  # the index answers alone: key by key, as sets
                entries = await self.view.mailbox.cached_rows(self.view.folder, batch, _INDEX_ONLY)
                found += self._matching(key, [row for row, _ in entries.values()])
                continue
            pending: list[MailRow] = []
            for candidate in await self._candidates(batch, _cached_only(fields)):
                try:
                    if self.matches(key, candidate):
                        found.append(candidate.row.uid)
                except _NeedsBytes:
                    pending.append(candidate.row)
            found += await self._by_bytes(key, pending)
        return sorted(found)

    async def _candidates(self, uids: list[int], with_lines: bool) -> list[_Candidate]:
        """The live ones of ``uids``, each with the index's cached lines when ``with_lines``."""
        if not with_lines:
            return [_Candidate(row) for row in (await self.view.rows(uids)).values()]
        entries = await self.view.mailbox.cached_rows(self.view.folder, uids, _WITH_LINES)
        return [_Candidate(row, lines=cached.headers) for row, cached in entries.values()]

    async def _by_bytes(self, key: SearchKey, rows: list[MailRow]) -> list[int]:
        found: list[int] = []
        for part in by_size(rows, lambda row: row.size):
            read = await self.view.mailbox.read_many(self.view.folder, part)
            for row, data in zip(part, read, strict=True):
                # None: renamed or expunged by another session while we searched
                if self.matches(key, _Candidate(row, data or b"")):
                    found.append(row.uid)
        return found

    def matches(self, key: SearchKey, c: _Candidate) -> bool:
        match key:
            case AllKey():
                return True
            case FlagKey(flag, present):
                return (flag in self.view.flags(c.row)) == present
            case SetKey():
                return c.row.uid in self._resolved(key)
            case SizeKey(larger, size):
                actual = c.row.size
                return actual > size if larger else actual < size
            case DateKey():
                return _date_matches(key, self._day(key, c))
            case HeaderKey(name, value):
                return _header_matches(c, name, value)
            case TextKey(value, body_only):
                return _text_matches(c, value.casefold(), body_only)
            case ModseqKey(modseq):
                return c.row.modseq >= modseq
            case NotKey(inner):
                return not self.matches(inner, c)
            case OrKey(left, right):
                return self.matches(left, c) or self.matches(right, c)
            case AndKey(keys):
                return all(self.matches(k, c) for k in keys)
        raise AssertionError(key)

    def _matching(self, key: SearchKey, rows: list[MailRow]) -> set[int]:
        """The UIDs of ``rows`` that ``key`` matches, for a key the index answers alone (no header
        field, no text): :meth:`matches` of each row, made key by key over the whole batch."""
        match key:
            case AllKey():
                return {r.uid for r in rows}
            case FlagKey("\\Recent", present):
                recent = self.view.recent
                return {r.uid for r in rows if (r.uid in recent or "\\Recent" in r.flags) == present}
            case FlagKey(flag, present):
                return {r.uid for r in rows if (flag in r.flags) == present}
            case SetKey():
                return self._resolved(key).intersection(r.uid for r in rows)
            case SizeKey(larger, size):
                return {r.uid for r in rows if (r.size > size if larger else r.size < size)}
            case DateKey(sent=False):
                return {r.uid for r in rows if _date_matches(key, _internal_day(r))}
            case ModseqKey(modseq):
                return {r.uid for r in rows if r.modseq >= modseq}
            case NotKey(inner):
                return {r.uid for r in rows} - self._matching(inner, rows)
            case OrKey(left, right):
                return self._matching(left, rows) | self._matching(right, rows)
            case AndKey(keys):
                return set.intersection(*(self._matching(k, rows) for k in keys))
        raise AssertionError(key)

    def _resolved(self, key: SetKey) -> set[int]:
        found = self._sets.get(key)
        if found is None:
            found = self._sets[key] = set(self.view.resolve(key.messages, uid=key.uid, strict=False))
        return found

    def _day(self, key: DateKey, c: _Candidate) -> date | None:
        if not key.sent:
            return _internal_day(c.row)
        raw = next(iter(c.raw_values(b"date")), None)
        try:
            return parsedate_to_datetime(raw.decode("latin-1")).date() if raw else None
        except (TypeError, ValueError, IndexError, OverflowError):
            return None


def _cached_only(fields: set[bytes] | None) -> bool:
    """The header fields a key reads (:func:`_fields_read`) are all cached, and it reads no text."""
    return fields is not None and fields <= cache.FIELDS


def _fields_read(key: SearchKey) -> set[bytes] | None:
    """The header fields ``key`` reads; None when it reads the text (every field, and the body)."""
    match key:
        case HeaderKey(name, _):
            return {name.encode("ascii", "replace")}
        case DateKey(sent=True):
            return {b"date"}
        case TextKey():
            return None
        case NotKey(inner):
            return _fields_read(inner)
        case OrKey(left, right):
            return _union([_fields_read(left), _fields_read(right)])
        case AndKey(keys):
            return _union([_fields_read(k) for k in keys])
    return set()


def _union(parts: list[set[bytes] | None]) -> set[bytes] | None:
    found: set[bytes] = set()
    for part in parts:
        if part is None:
            return None
        found |= part
    return found


def _internal_day(row: MailRow) -> date:
    return datetime.fromtimestamp(row.internaldate, UTC).date()


def _date_matches(key: DateKey, day: date | None) -> bool:
    if day is None:
        return False
    if key.op == "BEFORE":
        return day < key.day
    if key.op == "ON":
        return day == key.day
    return day >= key.day


def _header_matches(c: _Candidate, name: str, value: str) -> bool:
    wanted = value.casefold()
    return any(wanted in v for v in c.header_values(name))


def _text_matches(c: _Candidate, value: str, body_only: bool) -> bool:
    if value in c.body:
        return True
    if body_only:
        return False
    return any(value in decode_text(v).casefold() for _, v in c.fields)
