"""What the mail index caches of a message so that a header listing never opens its file: the raw
lines of the header fields clients list, ENVELOPE and BODYSTRUCTURE.

The cached lines are the fields' blocks exactly as :func:`mime.header_blocks` cuts them from the
file (with their names), in the file's order, repeats included; ``HEADER.FIELDS`` over them is
therefore byte for byte what it is over the whole header, as long as every requested field is one
of the cached ones.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Callable, Iterable

from pizzamail.imap import mime, structure
from pizzamail.imap.fetchparse import Section
from pizzamail.mailbox import Structures

#: every field a common client names when it lists a folder, so that its listing opens no file:
#: Thunderbird (From To Cc Bcc Subject Date Message-ID Priority X-Priority References Newsgroups
#: In-Reply-To Content-Type Reply-To), mutt and NeoMutt (... Sender Content-Description Lines
#: List-Post X-Label X-Original-To), K-9 Mail (... X-K9mail-Identity Chat-Version), iOS Mail (a
#: subset). A listing naming any other is read from the files: Roundcube's, which names 21 and
#: among them Return-Path and Content-Transfer-Encoding, in nearly every mail: cached, they would
#: cost every listing a scan of each (0.5 ms in 9 for 2,000 mails). Changing the set needs a
#: migration that forgets the cached lines (as 030 did).
FIELDS = frozenset({
    b"from", b"to", b"cc", b"bcc", b"subject", b"date", b"message-id", b"references", b"in-reply-to",
    b"content-type", b"reply-to", b"sender", b"priority", b"x-priority", b"newsgroups",
    b"content-description", b"lines", b"list-post", b"x-label", b"x-original-to", b"x-k9mail-identity",
    b"chat-version",
})


def describe(data: bytes) -> Structures:
    """Everything cached of the message ``data`` (its wire form), computed at delivery."""
    header = mime.split_header(data)[0]
    return Structures(headers=header_lines(header), envelope=structure.envelope_of_header(header),
                      bodystructure=structure.body_structure(mime.parse(data), extended=True))


def header_lines(header: bytes) -> bytes | None:
    """The blocks of the cached fields in the file's order, each as ``NUL name NUL raw`` (name
    lower-case, raw with its continuation lines and line ends), so that answering needs no
    parsing; None when the header holds a NUL byte, which would break that framing (such a
    message is answered from its file)."""
    if b"\0" in header:
        return None
    return b"".join(b"\0" + name + b"\0" + raw for name, raw in mime.header_blocks(header) if name in FIELDS)


def answers(section: Section | None) -> bool:
    """The cached lines answer this section: ``HEADER.FIELDS`` of the message, cached fields only."""
    return (section is not None and not section.part and section.text == "HEADER.FIELDS"
            and all(f.lower() in FIELDS for f in section.fields))


def header_fields(lines: bytes, wanted: frozenset[bytes]) -> bytes:
    """``HEADER.FIELDS`` of the lower-case names ``wanted`` (see :func:`answers`), from the
    cached lines: what :func:`mime.filter_header` gives over the whole header."""
    return b"".join(_blocks(wanted)(lines)) + b"\r\n"


def values(lines: bytes, name: bytes) -> list[bytes]:
    """The values of the cached field ``name`` (lower case), every occurrence in the file's order,
    as :func:`mime.header_fields` gives them: what a SEARCH of it needs."""
    return [mime.field_value(raw) for raw in _blocks(frozenset({name}))(lines)]


def pick_each(wanted: frozenset[bytes], each: Iterable[bytes]) -> list[bytes]:
    """:func:`header_fields` of each message's cached lines, in C (map) with no Python code run
    per message: a listing picks thousands."""
    return list(map(operator.add, map(b"".join, map(_blocks(wanted), each)), itertools.repeat(b"\r\n")))


@functools.lru_cache(maxsize=64)
def _blocks(wanted: frozenset[bytes]) -> Callable[[bytes], list[bytes]]:
    """Cached lines -> the raw lines of the fields ``wanted``, in their order: one scan in C a
    message. A NUL, a wanted name and a NUL start a wanted block (a raw part holds no NUL, and
    starts with its field's name and a colon, so it is never taken for a name); the scan finds the
    NULs by their own fast search and reads no other block's raw part: 8 % less than consuming
    every block, as the format before migration 031 (``name NUL raw NUL``) made it."""
    names = b"|".join(re.escape(name) for name in sorted(wanted)) or b"(?!)"
    return re.compile(b"\0(?:" + names + b")\0([^\0]*)").findall
