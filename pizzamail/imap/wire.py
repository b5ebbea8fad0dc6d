"""Wire forms of IMAP data: strings, flag lists, dates and modified UTF-7 mailbox names.

Everything here is pure and returns bytes ready to be written; nothing knows about sessions.
"""

from __future__ import annotations

import base64
import functools
import itertools
import operator
import time
from collections.abc import Iterable

NIL = b"NIL"

# ATOM-CHAR: any CHAR except atom-specials "(" ")" "{" SP CTL "%" "*" DQUOTE "\" "]"
_ATOM_SPECIALS = frozenset(b'(){ %*"\\]')
ATOM_CHARS = frozenset(c for c in range(0x21, 0x7F) if c not in _ATOM_SPECIALS)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
SYSTEM_FLAGS = ("\\Answered", "\\Flagged", "\\Deleted", "\\Seen", "\\Draft")


def quoted(value: bytes) -> bytes:
    return b'"' + value.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def literal(value: bytes) -> bytes:
    return b"{%d}\r\n" % len(value) + value


def string(value: bytes) -> bytes:
    """A quoted string when that is safe (7-bit, no CR/LF/NUL, short), else a literal."""
    if len(value) < 1024 and value.isascii() and not any(c in value for c in b"\r\n\x00"):
        return quoted(value)
    return literal(value)


def nstring(value: bytes | None) -> bytes:
    return NIL if value is None else string(value)


def astring(value: bytes) -> bytes:
    """An atom when every byte may appear in one (as Dovecot prints ``INBOX``), else a string."""
    if value and all(c in ATOM_CHARS for c in value):
        return value
    return string(value)


def flag_list(flags: Iterable[str]) -> bytes:
    """``(\\Seen $Label1)``: system flags in their usual order first, then keywords sorted."""
    return flag_list_of(frozenset(flags))


@functools.lru_cache(maxsize=1024)  # a folder's messages share a few combinations of flags
def flag_list_of(wanted: frozenset[str]) -> bytes:
    """:func:`flag_list` of a frozenset, remembered (C code only, a listing makes thousands)."""
    ordered = [f for f in SYSTEM_FLAGS if f in wanted]
    ordered += sorted(wanted - set(SYSTEM_FLAGS))
    return b"(" + " ".join(ordered).encode("utf-8", "replace") + b")"


def date_time(epoch: int) -> bytes:
    """INTERNALDATE form, in UTC: ``"17-Jul-1996 02:44:25 +0000"`` (day padded with a space)."""
    return date_times([epoch])[0]


def date_times(epochs: Iterable[int]) -> list[bytes]:
    """:func:`date_time` of each, in C (map, from tables of the day's minutes and seconds) with no
    Python code run per date: a listing renders thousands."""
    epochs = list(epochs)
    minutes = list(map(operator.floordiv, epochs, itertools.repeat(60)))
    days = map(_day, map(operator.floordiv, minutes, itertools.repeat(1440)))
    clocks = map(_CLOCK.__getitem__, map(operator.mod, minutes, itertools.repeat(1440)))
    seconds = map(_SECOND.__getitem__, map(operator.mod, epochs, itertools.repeat(60)))
    return list(map(operator.add, map(operator.add, days, clocks), seconds))


_CLOCK = tuple(b"%02d:%02d:" % divmod(minute, 60) for minute in range(1440))
_SECOND = tuple(b'%02d +0000"' % second for second in range(60))


@functools.lru_cache(maxsize=4096)  # a listing's messages come from a few days each
def _day(day: int) -> bytes:
    t = time.gmtime(day * 86_400)
    return b'"%2d-%s-%04d ' % (t.tm_mday, _MONTHS[t.tm_mon - 1].encode(), t.tm_year)


def month_number(name: str) -> int:
    """``Feb`` -> 2 (case-insensitive); ValueError for anything else."""
    lowered = [m.lower() for m in _MONTHS]
    return lowered.index(name.lower()) + 1


# -- modified UTF-7 (RFC 3501 §5.1.3) --------------------------------------------------------


def encode_mailbox(name: str) -> bytes:
    """Folder name -> modified UTF-7: printable ASCII as is, ``&`` as ``&-``, the rest in
    ``&...-`` runs of UTF-16BE in base64 with ``,`` for ``/`` and no padding."""
    out: list[bytes] = []
    pending: list[str] = []
    for ch in name:
        if 0x20 <= ord(ch) <= 0x7E:
            if pending:
                out.append(_b64_run("".join(pending)))
                pending = []
            out.append(b"&-" if ch == "&" else ch.encode("ascii"))
        else:
            pending.append(ch)
    if pending:
        out.append(_b64_run("".join(pending)))
    return b"".join(out)


def _b64_run(text: str) -> bytes:
    encoded = base64.b64encode(text.encode("utf-16-be")).rstrip(b"=").replace(b"/", b",")
    return b"&" + encoded + b"-"


def decode_mailbox(raw: bytes) -> str:
    """Modified UTF-7 -> folder name. Raises ValueError on a malformed name.

    Raw UTF-8 (sent by clients that ignore the rule) is accepted as it is when it decodes.
    """
    if not raw.isascii():
        return raw.decode("utf-8")
    text = raw.decode("ascii")
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "&":
            out.append(text[i])
            i += 1
            continue
        end = text.index("-", i)
        out.append("&" if end == i + 1 else _unb64_run(text[i + 1:end]))
        i = end + 1
    return "".join(out)


def _unb64_run(chunk: str) -> str:
    data = chunk.replace(",", "/")
    data += "=" * (-len(data) % 4)
    return base64.b64decode(data, validate=True).decode("utf-16-be")
