"""A byte-exact MIME tree of a stored message, for section fetches and BODYSTRUCTURE.

The stdlib parser re-serialises what it parses, so it cannot say which stored bytes make up part
``1.2``; here parts are slices of the stored bytes, split on boundaries (RFC 2046 §5.1.1). The
stdlib is used only for what it does well: Content-Type/Disposition parameters (incl. RFC 2231).
Header values are handled as Latin-1 text so that any 8-bit byte survives the round trip.
Nothing here raises on malformed input: a broken multipart degrades to a text part.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from email.utils import collapse_rfc2231_value

from pizzamail.imap.fetchparse import Section

MAX_DEPTH = 24  # deeper nesting is served as an opaque leaf (each level slices its body: cost ~ depth x size)
_BLANK_LINE = re.compile(rb"\r?\n\r?\n")
_DELIMITER_END = re.compile(rb"[ \t]*(?:\r?\n|\Z)")


@dataclass(kw_only=True)
class Part:
    header: bytes  # the header block including the blank line that ends it
    body: bytes
    fields: list[tuple[bytes, bytes]]  # (lower-case name, unfolded value)
    maintype: str
    subtype: str
    params: list[tuple[str, bytes]]
    parts: list[Part] = field(default_factory=list)
    message: Part | None = None  # the enclosed message of a message/rfc822 part

    def get(self, name: bytes) -> bytes | None:
        return next((v for n, v in self.fields if n == name), None)


def split_header(data: bytes) -> tuple[bytes, bytes]:
    if data.startswith((b"\r\n", b"\n")):
        cut = 2 if data.startswith(b"\r\n") else 1
        return data[:cut], data[cut:]
    m = _BLANK_LINE.search(data)
    if m is None:
        return data, b""
    return data[:m.end()], data[m.end():]


def header_blocks(header: bytes) -> list[tuple[bytes, bytes]]:
    """Fields as (lower-case name, raw bytes incl. continuation lines and line ends)."""
    blocks: list[tuple[bytes, bytes]] = []
    for line in header.splitlines(keepends=True):
        if line[:1] in (b" ", b"\t") and blocks:
            name, raw = blocks[-1]
            blocks[-1] = (name, raw + line)
        elif b":" in line:
            blocks.append((line.split(b":", 1)[0].strip().lower(), line))
    return blocks


def header_fields(header: bytes) -> list[tuple[bytes, bytes]]:
    """Fields as (lower-case name, value unfolded per RFC 5322 §2.2.3 and stripped)."""
    return [(name, field_value(raw)) for name, raw in header_blocks(header)]


def field_value(raw: bytes) -> bytes:
    """A field's value from its raw block (see :func:`header_blocks`): unfolded and stripped."""
    return raw.split(b":", 1)[1].replace(b"\r\n", b"").replace(b"\n", b"").strip()


def filter_header(header: bytes, names: tuple[bytes, ...], keep: bool) -> bytes:
    """HEADER.FIELDS (keep) / HEADER.FIELDS.NOT: the matching raw fields, then a blank line."""
    wanted = {n.lower() for n in names}
    kept = [raw for name, raw in header_blocks(header) if (name in wanted) == keep]
    return b"".join(kept) + b"\r\n"


# -- the tree ---------------------------------------------------------------------------------


def parse(data: bytes, default: tuple[str, str] = ("text", "plain"), depth: int = 0) -> Part:
    header, body = split_header(data)
    fields = header_fields(header)
    maintype, subtype, params = _content_type(fields, default)
    part = Part(header=header, body=body, fields=fields, maintype=maintype, subtype=subtype,
                params=params)
    if depth >= MAX_DEPTH:
        return part
    if maintype == "multipart":
        _add_children(part, depth)
    elif (maintype, subtype) == ("message", "rfc822"):
        part.message = parse(body, depth=depth + 1)
    return part


def _add_children(part: Part, depth: int) -> None:
    boundary = dict(part.params).get("boundary")
    chunks = split_multipart(part.body, boundary) if boundary else []
    child_default = ("message", "rfc822") if part.subtype == "digest" else ("text", "plain")
    part.parts = [parse(chunk, child_default, depth + 1) for chunk in chunks]
    if not part.parts:  # no boundary or no parts: what clients can still show is text
        part.maintype, part.subtype, part.params = "text", "plain", []


def split_multipart(body: bytes, boundary: bytes) -> list[bytes]:
    """Body parts between delimiter lines; the CRLF before a delimiter belongs to it."""
    chunks: list[bytes] = []
    start: int | None = None
    for begin, end, closing in _delimiters(body, b"--" + boundary):
        if start is not None:
            chunks.append(body[start:begin])
        if closing:
            return chunks
        start = end
    if start is not None:
        chunks.append(body[start:])
    return chunks


def _delimiters(body: bytes, dashed: bytes) -> Iterator[tuple[int, int, bool]]:
    """Each delimiter line as (start, including the line end before it; end, after its own line
    end; whether it closes). Found with ``bytes.find``, not a regex search: a regex that must
    try every line start is ~100x slower, and a deeply nested mail is searched once per level."""
    at = body.find(dashed)
    while at != -1:
        if at == 0 or body[at - 1] == 0x0A:
            closing = body.startswith(b"--", at + len(dashed))
            tail = _DELIMITER_END.match(body, at + len(dashed) + (2 if closing else 0))
            if tail is not None:
                begin = at - (2 if body[at - 2:at] == b"\r\n" else 1) if at else 0
                yield begin, tail.end(), closing
        at = body.find(dashed, at + 1)


def _content_type(
    fields: list[tuple[bytes, bytes]], default: tuple[str, str]
) -> tuple[str, str, list[tuple[str, bytes]]]:
    raw = next((v for n, v in fields if n == b"content-type"), None)
    if raw is None:
        return default[0], default[1], []
    msg = Message()
    msg["Content-Type"] = raw.decode("latin-1")
    full = msg.get_content_type()  # compat32 falls back to text/plain when malformed
    maintype, _, subtype = full.partition("/")
    return maintype, subtype, params_of(msg, "content-type")


def params_of(msg: Message, header: str) -> list[tuple[str, bytes]]:
    """Parameters after the first (the type itself), values as the bytes to put on the wire."""
    out: list[tuple[str, bytes]] = []
    for name, value in (msg.get_params(header=header) or [])[1:]:
        if isinstance(value, tuple):  # RFC 2231: decoded to text, sent as UTF-8
            out.append((name.lower(), collapse_rfc2231_value(value).encode("utf-8", "replace")))
        else:
            out.append((name.lower(), value.encode("latin-1", "replace")))
    return out


def find_part(root: Part, path: tuple[int, ...]) -> Part | None:
    """The part a section path names; ``()`` is the message itself."""
    node, as_message = root, True
    for number in path:
        kids = _kids(node, as_message)
        if not 1 <= number <= len(kids):
            return None
        node, as_message = kids[number - 1], False
    return node


def _kids(node: Part, as_message: bool) -> list[Part]:
    # The body of a non-multipart message is its part 1 (RFC 3501 §6.4.5).
    if as_message:
        return node.parts or [node]
    if node.message is not None:
        return _kids(node.message, True)
    return node.parts


def section_bytes(data: bytes, section: Section, tree: Part | None = None) -> bytes:
    """The bytes of ``section`` of the stored message ``data`` (empty when it does not exist).

    ``tree`` is ``parse(data)`` when the caller already has it.
    """
    if not section.part:
        return _message_text(data, section)
    part = find_part(tree or parse(data), section.part)
    if part is None:
        return b""
    if section.text is None:
        return part.body
    if section.text == "MIME":
        return part.header
    if part.message is None:
        return b""
    return _message_text(part.body, section)


def _message_text(message: bytes, section: Section) -> bytes:
    if section.text is None:
        return message
    header, body = split_header(message)
    if section.text == "HEADER":
        return header
    if section.text == "TEXT":
        return body
    return filter_header(header, section.fields, keep=section.text == "HEADER.FIELDS")
