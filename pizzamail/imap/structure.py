"""ENVELOPE and BODYSTRUCTURE / BODY rendering (RFC 3501 §7.4.2) from a MIME tree.

Strings are taken from the stored header bytes as they are (unfolded, encoded words left for the
client to decode), so 8-bit bytes reach the client unchanged, as literals.
"""

from __future__ import annotations

from email.message import Message
from email.utils import getaddresses

from pizzamail.imap import wire
from pizzamail.imap.mime import Part, header_fields, params_of

_ADDRESS_FIELDS = (b"from", b"sender", b"reply-to", b"to", b"cc", b"bcc")


def envelope(fields: list[tuple[bytes, bytes]]) -> bytes:
    first: dict[bytes, bytes] = {}
    for name, value in fields:
        first.setdefault(name, value)
    addresses = {name: _addresses(first.get(name)) for name in _ADDRESS_FIELDS}
    # RFC 3501: Sender and Reply-To default to From when absent.
    for name in (b"sender", b"reply-to"):
        if addresses[name] == wire.NIL:
            addresses[name] = addresses[b"from"]
    items = [wire.nstring(first.get(b"date")), wire.nstring(first.get(b"subject"))]
    items += [addresses[name] for name in _ADDRESS_FIELDS]
    items += [wire.nstring(first.get(b"in-reply-to")), wire.nstring(first.get(b"message-id"))]
    return b"(" + b" ".join(items) + b")"


def envelope_of_header(header: bytes) -> bytes:
    return envelope(header_fields(header))


def _addresses(value: bytes | None) -> bytes:
    if not value:
        return wire.NIL
    rendered = []
    for name, address in getaddresses([value.decode("latin-1")]):
        if not address:
            continue
        mailbox, at, host = address.rpartition("@")
        if not at:
            mailbox, host = address, ""
        rendered.append(b"(" + b" ".join([
            wire.nstring(name.encode("latin-1", "replace") or None), wire.NIL,
            wire.nstring(mailbox.encode("latin-1", "replace")),
            wire.nstring(host.encode("latin-1", "replace") or None),
        ]) + b")")
    return b"(" + b"".join(rendered) + b")" if rendered else wire.NIL


def body_structure(part: Part, *, extended: bool) -> bytes:
    """BODYSTRUCTURE when ``extended``, else the shorter BODY form."""
    if part.parts:
        return _multipart(part, extended)
    return _single(part, extended)


def _multipart(part: Part, extended: bool) -> bytes:
    out = b"".join(body_structure(p, extended=extended) for p in part.parts)
    out += b" " + wire.string(part.subtype.upper().encode("latin-1", "replace"))
    if extended:
        out += b" " + _param_list(part.params) + b" " + _extension(part)
    return b"(" + out + b")"


def _single(part: Part, extended: bool) -> bytes:
    items = [
        wire.string(part.maintype.upper().encode("latin-1", "replace")),
        wire.string(part.subtype.upper().encode("latin-1", "replace")),
        _param_list(part.params),
        wire.nstring(part.get(b"content-id")),
        wire.nstring(part.get(b"content-description")),
        wire.string((part.get(b"content-transfer-encoding") or b"7BIT").upper()),
        b"%d" % len(part.body),
    ]
    if part.message is not None:
        items += [envelope(part.message.fields), body_structure(part.message, extended=extended)]
    if part.maintype == "text" or part.message is not None:
        items.append(b"%d" % _lines(part.body))
    if extended:
        items += [wire.nstring(part.get(b"content-md5")), _extension(part)]
    return b"(" + b" ".join(items) + b")"


def _extension(part: Part) -> bytes:
    """body-fld-dsp SP body-fld-lang SP body-fld-loc."""
    return b" ".join([
        _disposition(part.get(b"content-disposition")),
        wire.nstring(part.get(b"content-language")),
        wire.nstring(part.get(b"content-location")),
    ])


def _disposition(value: bytes | None) -> bytes:
    if not value:
        return wire.NIL
    msg = Message()
    msg["Content-Disposition"] = value.decode("latin-1")
    kind = value.split(b";", 1)[0].strip()
    if not kind:
        return wire.NIL
    params = params_of(msg, "content-disposition")
    return b"(" + wire.string(kind) + b" " + _param_list(params) + b")"


def _param_list(params: list[tuple[str, bytes]]) -> bytes:
    if not params:
        return wire.NIL
    items = []
    for name, value in params:
        items += [wire.string(name.upper().encode("latin-1", "replace")), wire.string(value)]
    return b"(" + b" ".join(items) + b")"


def _lines(body: bytes) -> int:
    if not body:
        return 0
    return body.count(b"\n") + (0 if body.endswith(b"\n") else 1)
