"""SEARCH program parsing (pure): ``[CHARSET x] key *(SP key)`` -> a tree of search keys.

String arguments are decoded with the announced charset here, so evaluation (search.py) only
ever sees text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from pizzamail.errors import ImapError
from pizzamail.imap.reader import Reader, SequenceSet

CHARSETS = {"UTF-8": "utf-8", "US-ASCII": "ascii"}
#: NOT, OR and parentheses nest; no client needs this many, and a 64 KB line of ``NOT NOT …``
#: would otherwise exhaust Python's recursion limit
MAX_DEPTH = 100


@dataclass(frozen=True)
class AllKey:
    pass


@dataclass(frozen=True)
class FlagKey:
    flag: str
    present: bool


@dataclass(frozen=True)
class SetKey:
    messages: SequenceSet
    uid: bool


@dataclass(frozen=True)
class DateKey:
    sent: bool  # the Date: header, else the internal date
    op: str  # BEFORE, ON, SINCE
    day: date


@dataclass(frozen=True)
class SizeKey:
    larger: bool
    size: int


@dataclass(frozen=True)
class HeaderKey:
    name: str  # lower case
    value: str


@dataclass(frozen=True)
class TextKey:
    value: str
    body_only: bool


@dataclass(frozen=True)
class ModseqKey:
    """RFC 7162 ``MODSEQ [entry type] n``: changed at or after modseq ``n`` (flags are our only
    metadata, so the entry name and type narrow nothing)."""

    modseq: int


@dataclass(frozen=True)
class NotKey:
    key: SearchKey


@dataclass(frozen=True)
class OrKey:
    left: SearchKey
    right: SearchKey


@dataclass(frozen=True)
class AndKey:
    keys: tuple[SearchKey, ...]


SearchKey = (AllKey | FlagKey | SetKey | DateKey | SizeKey | HeaderKey | TextKey | ModseqKey | NotKey | OrKey
             | AndKey)

_FLAG_WORDS = {
    "ANSWERED": ("\\Answered", True), "UNANSWERED": ("\\Answered", False),
    "DELETED": ("\\Deleted", True), "UNDELETED": ("\\Deleted", False),
    "DRAFT": ("\\Draft", True), "UNDRAFT": ("\\Draft", False),
    "FLAGGED": ("\\Flagged", True), "UNFLAGGED": ("\\Flagged", False),
    "SEEN": ("\\Seen", True), "UNSEEN": ("\\Seen", False),
    "RECENT": ("\\Recent", True), "OLD": ("\\Recent", False),
}
_DATE_WORDS = {"BEFORE", "ON", "SINCE"}
_ADDRESS_WORDS = {"FROM", "TO", "CC", "BCC", "SUBJECT"}


def search_program(r: Reader) -> SearchKey:
    charset = "ascii"
    if r.take(b"CHARSET "):
        name = r.astring().decode("ascii", "replace").upper()
        if name not in CHARSETS:
            raise ImapError("unsupported charset", code="BADCHARSET (UTF-8 US-ASCII)")
        charset = CHARSETS[name]
        r.sp()
    parser = _KeyParser(r, charset)
    keys = [parser.key()]
    while r.take(b" "):
        keys.append(parser.key())
    return keys[0] if len(keys) == 1 else AndKey(tuple(keys))


class _KeyParser:
    def __init__(self, r: Reader, charset: str) -> None:
        self.r = r
        # Clients send UTF-8 without announcing it; US-ASCII is a subset, so decode both as UTF-8.
        self.charset = "utf-8" if charset == "ascii" else charset
        self.handlers = self._handlers()
        self.depth = 0

    def text(self) -> str:
        self.r.sp()
        raw = self.r.astring()
        try:
            return raw.decode(self.charset)
        except UnicodeDecodeError as exc:
            raise ImapError("search text is not valid in its charset", bad=True) from exc

    def key(self) -> SearchKey:
        if self.depth >= MAX_DEPTH:
            raise self.r.fail(f"search program nested more than {MAX_DEPTH} deep")
        self.depth += 1
        try:
            return self._key()
        finally:
            self.depth -= 1

    def _key(self) -> SearchKey:
        r = self.r
        if r.take(b"("):
            keys = [self.key()]
            while not r.take(b")"):
                r.sp()
                keys.append(self.key())
            return keys[0] if len(keys) == 1 else AndKey(tuple(keys))
        if r.peek() == b"*" or r.peek().isdigit():
            return SetKey(r.sequence_set(), uid=False)
        word = r.keyword()
        handler = self.handlers.get(word)
        if handler is not None:
            return handler(word)
        if word in _FLAG_WORDS:
            flag, present = _FLAG_WORDS[word]
            return FlagKey(flag, present)
        raise r.fail(f"unknown search key {word}")

    def _handlers(self) -> dict[str, Callable[[str], SearchKey]]:
        return {
            "ALL": lambda w: AllKey(),
            "NEW": lambda w: AndKey((FlagKey("\\Recent", True), FlagKey("\\Seen", False))),
            "KEYWORD": self._keyword, "UNKEYWORD": self._keyword,
            **dict.fromkeys(_DATE_WORDS, self._date),
            **dict.fromkeys({"SENT" + w for w in _DATE_WORDS}, self._date),
            "LARGER": self._size, "SMALLER": self._size,
            **dict.fromkeys(_ADDRESS_WORDS, lambda w: HeaderKey(w.lower(), self.text())),
            "HEADER": self._header,
            "BODY": lambda w: TextKey(self.text(), body_only=True),
            "TEXT": lambda w: TextKey(self.text(), body_only=False),
            "NOT": self._not,
            "OR": self._or,
            "UID": self._uid,
            "MODSEQ": self._modseq,
        }

    def _keyword(self, word: str) -> SearchKey:
        self.r.sp()
        return FlagKey(self.r.flag(), word == "KEYWORD")

    def _date(self, word: str) -> SearchKey:
        self.r.sp()
        sent = word.startswith("SENT")
        return DateKey(sent, word.removeprefix("SENT"), self.r.date())

    def _size(self, word: str) -> SearchKey:
        self.r.sp()
        return SizeKey(word == "LARGER", self.r.number())

    def _header(self, word: str) -> SearchKey:
        self.r.sp()
        name = self.r.astring().decode("ascii", "replace").lower()
        return HeaderKey(name, self.text())

    def _not(self, word: str) -> SearchKey:
        self.r.sp()
        return NotKey(self.key())

    def _or(self, word: str) -> SearchKey:
        self.r.sp()
        left = self.key()
        self.r.sp()
        return OrKey(left, self.key())

    def _uid(self, word: str) -> SearchKey:
        self.r.sp()
        return SetKey(self.r.sequence_set(), uid=True)

    def _modseq(self, word: str) -> SearchKey:
        self.r.sp()
        if self.r.peek() == b'"':
            self.r.quoted()  # entry name, e.g. "/flags/\\draft"
            self.r.sp()
            if self.r.keyword() not in ("PRIV", "SHARED", "ALL"):
                raise self.r.fail("entry type is priv, shared or all")
            self.r.sp()
        return ModseqKey(self.r.mod_sequence(zero_ok=True))


def uses_modseq(key: SearchKey) -> bool:
    """Whether a program mentions MODSEQ (then the result carries the highest one, §3.1.5)."""
    match key:
        case ModseqKey():
            return True
        case NotKey(inner):
            return uses_modseq(inner)
        case OrKey(left, right):
            return uses_modseq(left) or uses_modseq(right)
        case AndKey(keys):
            return any(uses_modseq(k) for k in keys)
    return False
