"""The lexical layer of IMAP command parsing: a cursor over one framed command's bytes.

Pure: no I/O. Every method consumes what it recognises or raises ``ImapError(bad=True)``, which
the session turns into ``tag BAD ...`` without dropping the connection.
"""

from __future__ import annotations

import functools
import re
from calendar import timegm
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from pizzamail.errors import ImapError
from pizzamail.imap import wire

# 8-bit bytes are not ATOM-CHARs, but imaplib sends UTF-8 search words unquoted: accept them.
_ASTRING_CHARS = wire.ATOM_CHARS | {ord("]")} | set(range(0x80, 0x100))
_LIST_CHARS = _ASTRING_CHARS | {ord("%"), ord("*")}
_LITERAL = re.compile(rb"\{(\d{1,10})(\+?)\}\r?\n")
_DATE = re.compile(rb'"?(\d{1,2})-([A-Za-z]{3})-(\d{4})"?')
_DATE_TIME = re.compile(rb'"([ \d]\d)-([A-Za-z]{3})-(\d{4}) (\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)"')


_DIGITS = frozenset(b"0123456789")


@functools.lru_cache(maxsize=8)
def _span(allowed: frozenset[int]) -> Callable[[bytes, int], re.Match[bytes] | None]:
    """Matches the longest run of ``allowed`` bytes at a position: one scan in C, not a Python
    loop a byte (every command's tag, name and atoms)."""
    return re.compile(b"[" + b"".join(re.escape(bytes([c])) for c in sorted(allowed)) + b"]*").match


@dataclass(frozen=True)
class SequenceSet:
    """``1:3,7,9:*`` as ranges; ``0`` stands for ``*`` (the largest number in use)."""

    ranges: tuple[tuple[int, int], ...]

    def bounds(self, largest: int) -> list[tuple[int, int]]:
        """Ranges with ``*`` replaced and ends ordered (``5:*`` with largest 3 means 3:5)."""
        out = []
        for a, b in self.ranges:
            lo, hi = a or largest, b or largest
            out.append((min(lo, hi), max(lo, hi)))
        return out

    def contains(self, number: int, largest: int) -> bool:
        return any(lo <= number <= hi for lo, hi in self.bounds(largest))


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def fail(self, what: str) -> ImapError:
        return ImapError(f"{what} (at byte {self.pos})", bad=True)

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def peek(self, n: int = 1) -> bytes:
        return self.data[self.pos:self.pos + n]

    def take(self, token: bytes) -> bool:
        """Consume ``token`` (case-insensitive) when it is next."""
        if self.data[self.pos:self.pos + len(token)].upper() == token.upper():
            self.pos += len(token)
            return True
        return False

    def expect(self, token: bytes, what: str | None = None) -> None:
        if not self.take(token):
            raise self.fail(f"expected {what or token.decode()}")

    def sp(self) -> None:
        self.expect(b" ", "a space")

    def end(self) -> None:
        if not self.at_end():
            raise self.fail("unexpected extra arguments")

    def _run(self, allowed: frozenset[int]) -> bytes:
        found = _span(allowed)(self.data, self.pos)
        assert found is not None  # the pattern matches the empty run too
        self.pos = found.end()
        return found.group()

    def atom(self, what: str = "an atom") -> bytes:
        value = self._run(wire.ATOM_CHARS)
        if not value:
            raise self.fail(f"expected {what}")
        return value

    def keyword(self) -> str:
        """An atom read as an upper-case word (command names, FETCH and SEARCH keys)."""
        return self.atom("a keyword").decode("ascii").upper()

    def number(self) -> int:
        digits = self._run(_DIGITS)
        if not digits or len(digits) > 10:
            raise self.fail("expected a number")
        return int(digits)

    def mod_sequence(self, *, zero_ok: bool = False) -> int:
        """RFC 7162 mod-sequence-value: up to 2^63 - 1 (``zero_ok`` for mod-sequence-valzer)."""
        digits = self._run(_DIGITS)
        if not digits or len(digits) > 19 or int(digits) >= 1 << 63 or (int(digits) == 0 and not zero_ok):
            raise self.fail("expected a mod-sequence")
        return int(digits)

    def nz_number(self) -> int:
        value = self.number()
        if value == 0:
            raise self.fail("numbers start at 1")
        return value

    # -- strings -----------------------------------------------------------------------------

    def quoted(self) -> bytes:
        self.expect(b'"')
        out = bytearray()
        while self.pos < len(self.data):
            c = self.data[self.pos]
            self.pos += 1
            if c == 0x22:
                return bytes(out)
            if c == 0x5C:
                if self.peek() not in (b'"', b"\\"):
                    raise self.fail("bad escape in quoted string")
                c = self.data[self.pos]
                self.pos += 1
            elif c in (0x0D, 0x0A):
                break
            out.append(c)
        raise self.fail("unterminated quoted string")

    def literal(self) -> bytes:
        m = _LITERAL.match(self.data, self.pos)
        if m is None:
            raise self.fail("bad literal")
        size = int(m.group(1))
        start = m.end()
        if start + size > len(self.data):
            raise self.fail("literal is shorter than announced")
        self.pos = start + size
        return self.data[start:self.pos]

    def string(self) -> bytes:
        if self.peek() == b'"':
            return self.quoted()
        if self.peek() == b"{":
            return self.literal()
        raise self.fail("expected a string")

    def astring(self) -> bytes:
        if self.peek() in (b'"', b"{"):
            return self.string()
        value = self._run(_ASTRING_CHARS)
        if not value:
            raise self.fail("expected an atom or string")
        return value

    def mailbox(self) -> str:
        raw = self.astring()
        try:
            name = wire.decode_mailbox(raw)
        except ValueError as exc:
            raise self.fail("mailbox name is not valid modified UTF-7") from exc
        return "INBOX" if name.upper() == "INBOX" else name

    def list_mailbox(self) -> str:
        raw = self.string() if self.peek() in (b'"', b"{") else self._run(_LIST_CHARS)
        if not raw and self.data[self.pos - 1:self.pos] != b'"' and self.peek() != b"":
            raise self.fail("expected a mailbox pattern")
        try:
            return wire.decode_mailbox(raw)
        except ValueError as exc:
            raise self.fail("mailbox pattern is not valid modified UTF-7") from exc

    # -- structured values -------------------------------------------------------------------

    def flag(self) -> str:
        backslash = self.take(b"\\")
        name = self.atom("a flag").decode("ascii")
        if not backslash:
            return name
        canonical = {f.lower(): f for f in wire.SYSTEM_FLAGS}
        return canonical.get("\\" + name.lower(), "\\" + name)

    def flags(self) -> tuple[str, ...]:
        """``(\\Seen $x)``, or (as STORE allows) flags without the parentheses."""
        if not self.take(b"("):
            out = [self.flag()]
            while self.take(b" "):
                out.append(self.flag())
            return tuple(out)
        out = []
        while not self.take(b")"):
            if out:
                self.sp()
            out.append(self.flag())
        return tuple(out)

    def sequence_set(self) -> SequenceSet:
        ranges = [self._seq_range()]
        while self.take(b","):
            ranges.append(self._seq_range())
        return SequenceSet(tuple(ranges))

    def _seq_range(self) -> tuple[int, int]:
        first = self._seq_number()
        last = self._seq_number() if self.take(b":") else first
        return first, last

    def _seq_number(self) -> int:
        return 0 if self.take(b"*") else self.nz_number()

    def date(self) -> date:
        m = _DATE.match(self.data, self.pos)
        if m is None:
            raise self.fail("expected a date like 1-Feb-2026")
        self.pos = m.end()
        try:
            return date(int(m.group(3)), wire.month_number(m.group(2).decode()), int(m.group(1)))
        except ValueError as exc:
            raise self.fail("no such date") from exc

    def date_time(self) -> int:
        """APPEND's ``"17-Jul-1996 02:44:25 -0700"`` as a Unix time."""
        m = _DATE_TIME.match(self.data, self.pos)
        if m is None:
            raise self.fail("expected a date-time")
        self.pos = m.end()
        day, mon, year, hh, mm, ss, sign, zh, zm = (g.decode().strip() for g in m.groups())
        try:
            stamp = timegm((int(year), wire.month_number(mon), int(day), int(hh), int(mm), int(ss)))
        except ValueError as exc:
            raise self.fail("no such date-time") from exc
        offset = (int(zh) * 60 + int(zm)) * 60
        return stamp - offset if sign == "+" else stamp + offset
