"""BINARY (RFC 3516): a part's content with its Content-Transfer-Encoding undone, so a client
gets an attachment's bytes without decoding base64 itself."""

from __future__ import annotations

import base64
import binascii
import quopri

from pizzamail.errors import ImapError
from pizzamail.imap import mime

_IDENTITY = {b"7bit", b"8bit", b"binary", b""}


def decoded(data: bytes, path: tuple[int, ...], tree: mime.Part) -> bytes:
    """The decoded content of part ``path`` (``()``: the message's own body, after its header).

    A part that does not exist is empty, as for BODY; an encoding we do not know is
    ``NO [UNKNOWN-CTE]`` (RFC 3516 §4.3)."""
    part = mime.find_part(tree, path) if path else tree
    if part is None:
        return b""
    body = content(part)
    return part.header + body if not path else body


def content(part: mime.Part) -> bytes:
    """A part's body with its Content-Transfer-Encoding undone (``NO [UNKNOWN-CTE]`` when that
    cannot be done)."""
    encoding = (part.get(b"content-transfer-encoding") or b"").strip().lower()
    if part.parts or part.message is not None or encoding in _IDENTITY:
        return part.body
    if encoding == b"base64":
        return _base64(part.body)
    if encoding == b"quoted-printable":
        return quopri.decodestring(part.body)
    raise ImapError("unknown Content-Transfer-Encoding", code="UNKNOWN-CTE")


def _base64(body: bytes) -> bytes:
    try:
        # strict: a character outside base64 means damage, not something to skip silently
        return base64.b64decode(b"".join(body.split()), validate=True)
    except binascii.Error as exc:
        raise ImapError("the part's base64 is damaged", code="UNKNOWN-CTE") from exc


def literal8(value: bytes) -> bytes:
    """A NUL in the data needs RFC 3516's ``~{n}`` literal; anything else goes as a literal."""
    prefix = b"~" if b"\x00" in value else b""
    return prefix + b"{%d}\r\n" % len(value) + value
