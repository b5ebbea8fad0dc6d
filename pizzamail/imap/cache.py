"""What the mail index caches of a message so that a header listing never opens its file: the raw
lines of the header fields clients list, ENVELOPE and BODYSTRUCTURE.

The cached lines are the fields' blocks exactly as :func:`mime.header_blocks` cuts them from the
file, in the file's order, repeats included; ``HEADER.FIELDS`` over them is therefore byte for byte
what it is over the whole header, as long as every requested field is one of the cached ones.
"""

from __future__ import annotations

from pizzamail.imap import mime, structure
from pizzamail.imap.fetchparse import Section
from pizzamail.mailbox import Structures

FIELDS = frozenset({b"from", b"to", b"cc", b"subject", b"date", b"message-id", b"references",
                    b"in-reply-to", b"content-type"})


def describe(data: bytes) -> Structures:
    """Everything cached of the message ``data`` (its wire form), computed at delivery."""
    header = mime.split_header(data)[0]
    return Structures(headers=header_lines(header), envelope=structure.envelope_of_header(header),
                      bodystructure=structure.body_structure(mime.parse(data), extended=True))


def header_lines(header: bytes) -> bytes | None:
    """The blocks of the cached fields, in order; None when a cached field's block begins with
    blank space (a header that starts with a continuation line): cut from the rest it would read
    as a continuation of the block before it."""
    kept = [raw for name, raw in mime.header_blocks(header) if name in FIELDS]
    if any(raw[:1] in (b" ", b"\t") for raw in kept):
        return None
    return b"".join(kept)


def answers(section: Section | None) -> bool:
    """The cached lines answer this section: ``HEADER.FIELDS`` of the message, cached fields only."""
    return (section is not None and not section.part and section.text == "HEADER.FIELDS"
            and all(f.lower() in FIELDS for f in section.fields))


def header_fields(lines: bytes, section: Section) -> bytes:
    """``HEADER.FIELDS (...)`` answered from the cached lines (see :func:`answers`)."""
    return mime.filter_header(lines, section.fields, keep=True)
