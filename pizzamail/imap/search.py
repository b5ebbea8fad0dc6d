"""SEARCH evaluation over the selected view. Flag, size, date and set keys use the view's index
rows; header and text keys read the message (once, however many keys need it)."""

from __future__ import annotations

import email
import email.policy
from datetime import UTC, date, datetime
from email.header import decode_header, make_header
from email.utils import parsedate_to_datetime

from pizzamail.imap import mime
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
from pizzamail.imap.view import View


def decode_text(raw: bytes) -> str:
    """A header value as readable text: raw UTF-8 and RFC 2047 encoded words both decoded."""
    text = raw.decode("utf-8", "replace")
    try:
        return str(make_header(decode_header(text)))
    except (ValueError, LookupError, UnicodeError):
        return text


def body_text(data: bytes) -> str:
    """The text parts of a message, transfer-decoded and charset-decoded, joined."""
    message = email.message_from_bytes(data, policy=email.policy.compat32)
    chunks = []
    for part in message.walk():
        if part.get_content_maintype() != "text":
            continue
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            charset = part.get_content_charset() or "utf-8"
            try:
                chunks.append(payload.decode(charset, "replace"))
            except LookupError:
                chunks.append(payload.decode("utf-8", "replace"))
    return "\n".join(chunks)


class _Candidate:
    """One message under test; its bytes, header fields and text are loaded lazily."""

    def __init__(self, view: View, uid: int) -> None:
        self.view = view
        self.uid = uid
        self._data: bytes | None = None
        self._fields: list[tuple[bytes, bytes]] | None = None
        self._body: str | None = None

    @property
    def data(self) -> bytes:
        if self._data is None:
            try:
                self._data = self.view.mailbox.read(self.view.folder, self.view.rows[self.uid])
            except FileNotFoundError:
                self._data = b""  # renamed or expunged by another session while we searched
        return self._data

    @property
    def fields(self) -> list[tuple[bytes, bytes]]:
        if self._fields is None:
            self._fields = mime.header_fields(mime.split_header(self.data)[0])
        return self._fields

    @property
    def body(self) -> str:
        if self._body is None:
            self._body = body_text(self.data).casefold()
        return self._body

    def header_values(self, name: str) -> list[str]:
        wanted = name.encode("ascii", "replace")
        return [decode_text(v).casefold() for n, v in self.fields if n == wanted]


class Searcher:
    def __init__(self, view: View) -> None:
        self.view = view
        self._sets: dict[SetKey, set[int]] = {}

    def run(self, key: SearchKey) -> list[int]:
        """The matching live UIDs, ascending."""
        live = [u for u in self.view.uids if u in self.view.rows]
        return [u for u in live if self.matches(key, _Candidate(self.view, u))]

    def matches(self, key: SearchKey, c: _Candidate) -> bool:
        match key:
            case AllKey():
                return True
            case FlagKey(flag, present):
                return (flag in self.view.flags(c.uid)) == present
            case SetKey():
                return c.uid in self._resolved(key)
            case SizeKey(larger, size):
                actual = self.view.rows[c.uid].size
                return actual > size if larger else actual < size
            case DateKey():
                return _date_matches(key, self._day(key, c))
            case HeaderKey(name, value):
                return _header_matches(c, name, value)
            case TextKey(value, body_only):
                return _text_matches(c, value.casefold(), body_only)
            case ModseqKey(modseq):
                return self.view.rows[c.uid].modseq >= modseq
            case NotKey(inner):
                return not self.matches(inner, c)
            case OrKey(left, right):
                return self.matches(left, c) or self.matches(right, c)
            case AndKey(keys):
                return all(self.matches(k, c) for k in keys)
        raise AssertionError(key)

    def _resolved(self, key: SetKey) -> set[int]:
        found = self._sets.get(key)
        if found is None:
            found = self._sets[key] = set(self.view.resolve(key.messages, uid=key.uid, strict=False))
        return found

    def _day(self, key: DateKey, c: _Candidate) -> date | None:
        if not key.sent:
            return datetime.fromtimestamp(self.view.rows[c.uid].internaldate, UTC).date()
        raw = next((v for n, v in c.fields if n == b"date"), None)
        try:
            return parsedate_to_datetime(raw.decode("latin-1")).date() if raw else None
        except (TypeError, ValueError, IndexError):
            return None


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
