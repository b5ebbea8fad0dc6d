"""Pure readers of IMAPClient's answers: untyped dicts and tuples in, typed values out.

No I/O. IMAPClient already parses the responses, quotes folder names and decodes their modified
UTF-7; what is left is picking the values pizzamail needs and trusting none of their types.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: the special-use attributes of RFC 6154 pizzamail looks for, as folder flags
SPECIAL_USES = ("\\All", "\\Archive", "\\Drafts", "\\Flagged", "\\Junk", "\\Sent", "\\Trash")


@dataclass(frozen=True, kw_only=True)
class Fetched:
    """A mail as a capped fetch (``BODY.PEEK[]<0.LIMIT>``) brought it."""

    raw: bytes
    """the mail, or only its first bytes when :attr:`cut_short`"""
    size: int | None
    """the whole mail's size as the server reported it (RFC822.SIZE), None if it did not"""
    cut_short: bool
    """a partial fetch says nothing of truncation: it just returns exactly LIMIT octets of a larger mail"""


def folder_status(answer: Mapping[bytes, object]) -> tuple[int | None, int | None, int]:
    """(UIDVALIDITY, UIDNEXT, EXISTS) from ``select_folder``; UIDNEXT is optional before IMAP4rev2."""
    return _int(answer.get(b"UIDVALIDITY")), _int(answer.get(b"UIDNEXT")), _int(answer.get(b"EXISTS")) or 0


def highest_modseq(answer: Mapping[bytes, object]) -> int | None:
    """HIGHESTMODSEQ from ``select_folder`` (CONDSTORE, RFC 7162); None without it."""
    return _int(answer.get(b"HIGHESTMODSEQ"))


def fetched_mail(answer: Mapping[int, Mapping[bytes, object]], uid: int) -> bytes | None:
    """The ``BODY[]`` of ``uid`` from ``fetch`` (``BODY[]<0>`` for a partial one); None if the server
    sent none (the mail was expunged)."""
    for key, value in answer.get(uid, {}).items():
        if key.upper().startswith(b"BODY[]") and isinstance(value, bytes):
            return value
    return None


def fetched(answer: Mapping[int, Mapping[bytes, object]], uid: int, *, limit: int) -> Fetched | None:
    """The mail and RFC822.SIZE of ``uid`` from a fetch of its first ``limit`` octets; None if expunged.

    Only an answer of the whole ``limit`` can be cut short: a size above it (some servers' sizes are
    estimates) says nothing then. Without a size, such an answer counts as cut short."""
    raw = fetched_mail(answer, uid)
    if raw is None:
        return None
    size = _int(answer.get(uid, {}).get(b"RFC822.SIZE"))
    full_length = len(raw) >= limit
    return Fetched(raw=raw, size=size, cut_short=full_length and (size is None or size > len(raw)))


def folder_names(listing: Iterable[tuple[object, object, object]]) -> list[str]:
    """The names from ``list_folders``' (flags, delimiter, name) triples."""
    return [name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
            for _, _, name in listing]


def special_folders(listing: Iterable[tuple[object, object, object]]) -> dict[str, str]:
    """Special use (``\\Sent``, ``\\Drafts``, ...) -> the first folder with it, from a listing's
    (flags, delimiter, name) triples; flags are matched without regard to case (RFC 6154 names them
    in title case, some servers do not)."""
    wanted = {use.lower(): use for use in SPECIAL_USES}
    found: dict[str, str] = {}
    for flags, _, name in listing:
        for flag in flags if isinstance(flags, tuple | list) else ():
            text = flag.decode("ascii", "replace") if isinstance(flag, bytes) else str(flag)
            use = wanted.get(text.lower())
            if use is not None and use not in found:
                found[use] = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
    return found


def folder_delimiter(listing: Iterable[tuple[object, object, object]]) -> str | None:
    """The hierarchy delimiter the server names first in a listing, None if it has no hierarchy."""
    for _, delimiter, _ in listing:
        if isinstance(delimiter, bytes) and delimiter:
            return delimiter.decode("ascii", "replace")
        if isinstance(delimiter, str) and delimiter:
            return delimiter
    return None


def appended_uid(answer: object) -> tuple[int, int] | None:
    """(UIDVALIDITY, UID) from an APPEND's ``[APPENDUID v u]`` (UIDPLUS, RFC 4315); None without it."""
    text = answer.decode("ascii", "replace") if isinstance(answer, bytes) else str(answer)
    found = re.search(r"\[APPENDUID (\d+) (\d+)\]", text, re.IGNORECASE)
    return (int(found[1]), int(found[2])) if found else None


def header_values(answer: Mapping[int, Mapping[bytes, object]]) -> dict[int, bytes]:
    """UID -> the header fields a ``BODY.PEEK[HEADER.FIELDS (...)]`` fetch brought, for each UID."""
    found: dict[int, bytes] = {}
    for uid, items in answer.items():
        for key, value in items.items():
            if key.upper().startswith(b"BODY[HEADER") and isinstance(value, bytes):
                found[uid] = value
    return found


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
