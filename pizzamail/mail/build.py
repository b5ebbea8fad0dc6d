"""The bytes of a mail pizzamail writes itself: a task from the CLI or a trigger, a trigger's notice,
the agents' replies. Pure; no I/O.

One text/plain part first (what the store keeps as the body and what clients show), then an HTML
alternative or attachments. Message-IDs are given without angle brackets (:mod:`pizzamail.mail.ids`).
"""

from __future__ import annotations

import base64
import binascii
import email.policy
import email.utils
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import TypedDict

from pizzamail.mail.ids import bracketed
from pizzamail.mail.parse import POLICY, parse_bytes

_POLICY = email.policy.SMTP.clone(header_factory=POLICY.header_factory)
"""SMTP's policy (CRLF) with the parser's header factory: a header class made once per name, and
the values every mail repeats (From, To, the content headers) parsed once"""


@dataclass(frozen=True, kw_only=True)
class AttachedFile:
    """A file a mail carries after its text."""

    filename: str
    content_type: str
    """``message/rfc822`` attaches ``data`` as a mail of its own (a forwarded message to mail clients)"""
    data: bytes


@dataclass(frozen=True, kw_only=True)
class Outgoing:
    """A mail built here, with the facts the store keeps of it."""

    data: bytes
    """the mail as it is filed and sent"""
    message_id: str
    in_reply_to: str | None
    references: list[str]
    subject: str
    body: str

    def as_bytes(self) -> bytes:
        return self.data


class Fields(TypedDict):
    """A mail's header fields, as :func:`text_message` and :func:`alternative_bytes` take them."""

    sender: str
    to: str
    subject: str
    message_id: str
    in_reply_to: str | None
    references: Sequence[str]
    date: datetime | None
    headers: Sequence[tuple[str, str]]


def mail_bytes(msg: EmailMessage) -> bytes:
    """``msg.as_bytes()``, each multipart given a random boundary first. Left to itself, the email
    package picks a boundary after writing the parts and compiles a new regular expression to look
    for it in them: a tenth of a run's CPU, and each such pattern pushes one out of ``re``'s cache.
    128 random bits appear in no part by chance, and nobody who writes a part can know them."""
    for part in msg.walk():
        if part.get_content_maintype() == "multipart" and part.get_boundary() is None:
            part.set_boundary(_boundary())
    return msg.as_bytes()


def _boundary() -> str:
    return f"=_{secrets.token_hex(16)}"


def build_mail(
    *, sender: str, to: str, subject: str, text: str, message_id: str, in_reply_to: str | None = None,
    references: Sequence[str] = (), date: datetime | None = None,
    headers: Sequence[tuple[str, str]] = (), attachments: Sequence[AttachedFile] = (),
) -> Outgoing:
    """A mail from ``sender`` to ``to``; ``headers`` (X-Pizzamail-Source …) follow the standard ones.
    Without ``date`` it is dated now, in local time."""
    msg = text_message(sender=sender, to=to, subject=subject, text=text, message_id=message_id,
                       in_reply_to=in_reply_to, references=references, date=date, headers=headers)
    for file in attachments:
        _attach(msg, file)
    return Outgoing(data=mail_bytes(msg), message_id=message_id, in_reply_to=in_reply_to,
                    references=list(references), subject=subject, body=text)


def text_message(
    *, sender: str, to: str, subject: str, text: str, message_id: str, in_reply_to: str | None = None,
    references: Sequence[str] = (), date: datetime | None = None, headers: Sequence[tuple[str, str]] = (),
) -> EmailMessage:
    """The header fields and text part of :func:`build_mail`, for more parts to be added."""
    msg = EmailMessage(policy=_POLICY)
    for name, value in _header_lines(sender=sender, to=to, subject=subject, message_id=message_id,
                                     in_reply_to=in_reply_to, references=references, date=date,
                                     headers=headers):
        msg[name] = value
    msg.set_content(text)
    return msg


def plain_bytes(
    *, sender: str, to: str, subject: str, text: str, message_id: str, in_reply_to: str | None = None,
    references: Sequence[str] = (), date: datetime | None = None, headers: Sequence[tuple[str, str]] = (),
) -> bytes:
    """``build_mail(...).as_bytes()`` of a mail without attachments, byte for byte, written out
    directly (a fifth of the time) when its text is ASCII lines of at most 78 characters: each
    header short and plain is written as it is, any other folded as the email package folds it,
    and the text needs no encoding. Other text: built by :func:`build_mail`."""
    lines = _seven_bit(text)
    if lines is None:
        built = build_mail(sender=sender, to=to, subject=subject, text=text, message_id=message_id,
                           in_reply_to=in_reply_to, references=references, date=date, headers=headers)
        return built.as_bytes()
    fields = _header_lines(sender=sender, to=to, subject=subject, message_id=message_id,
                           in_reply_to=in_reply_to, references=references, date=date, headers=headers)
    return b"".join([*(_folded(name, value) for name, value in fields), _PLAIN_TEXT, *lines])


def alternative_bytes(
    *, sender: str, to: str, subject: str, text: str, html: str, message_id: str,
    in_reply_to: str | None = None, references: Sequence[str] = (), date: datetime | None = None,
    headers: Sequence[tuple[str, str]] = (),
) -> bytes:
    """A mail of ``text`` and its ``html`` alternative (multipart/alternative), written out directly:
    what ``build_mail`` and ``add_alternative(html, subtype="html")`` say, in a tenth of the time (a
    reply's bytes through the email package were a sixth of a run's CPU). Every line is 7-bit:
    the mail goes through any mail server as it is."""
    fields = _header_lines(sender=sender, to=to, subject=subject, message_id=message_id,
                           in_reply_to=in_reply_to, references=references, date=date, headers=headers)
    boundary = _boundary().encode("ascii")
    delimiter = b"--" + boundary
    return b"".join([
        *(_folded(name, value) for name, value in fields),
        b'MIME-Version: 1.0\r\nContent-Type: multipart/alternative;\r\n boundary="%s"\r\n\r\n' % boundary,
        delimiter, b"\r\n", _text_part(text, b"plain"),
        b"\r\n", delimiter, b"\r\n", _text_part(html, b"html"),
        b"\r\n", delimiter, b"--\r\n",
    ])


def _text_part(text: str, subtype: bytes) -> bytes:
    """A text part's header and body: 7-bit lines as they are (as ``set_content`` writes them),
    other text quoted-printable, or base64 where that is shorter (text of few ASCII letters)."""
    head = b'Content-Type: text/%s; charset="utf-8"\r\nContent-Transfer-Encoding: ' % subtype
    lines = _seven_bit(text)
    if lines is not None:
        return b"".join([head, b"7bit\r\n\r\n", *lines])
    split = text.encode("utf-8").splitlines()
    quoted = binascii.b2a_qp(b"".join(line + b"\n" for line in split), istext=True)
    canonical = b"".join(line + b"\r\n" for line in split)  # base64 keeps text's CRLFs (RFC 2045)
    if len(quoted) <= len(canonical) * 4 // 3:
        return b"".join([head, b"quoted-printable\r\n\r\n", quoted.replace(b"\n", b"\r\n")])
    return b"".join([head, b"base64\r\n\r\n", base64.encodebytes(canonical).replace(b"\n", b"\r\n")])


def _header_lines(
    *, sender: str, to: str, subject: str, message_id: str, in_reply_to: str | None,
    references: Sequence[str], date: datetime | None, headers: Sequence[tuple[str, str]],
) -> list[tuple[str, str]]:
    """A mail's header fields in the order pizzamail writes them."""
    return [
        ("From", sender), ("To", to), ("Subject", subject),
        ("Date", email.utils.format_datetime(date) if date else email.utils.formatdate(localtime=True)),
        ("Message-ID", bracketed(message_id)),
        *([("In-Reply-To", bracketed(in_reply_to))] if in_reply_to else []),
        *([("References", " ".join(bracketed(r) for r in references))] if references else []),
        *headers,
    ]


#: the longest line the email package writes without folding or encoding it
_LINE = _POLICY.max_line_length or 78

#: what ``set_content`` of 7-bit text adds before the text, and the blank line
_PLAIN_TEXT = (b'Content-Type: text/plain; charset="utf-8"\r\nContent-Transfer-Encoding: 7bit\r\n'
               b"MIME-Version: 1.0\r\n\r\n")

#: a header value the email package writes out unchanged: printable ASCII words with single spaces
#: between, and no character that an address, a date or a Message-ID would be rewritten for
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9<>@._+=:/#,\[\]-]+(?: [A-Za-z0-9<>@._+=:/#,\[\]-]+)*")


def _folded(name: str, value: str) -> bytes:
    if len(name) + 2 + len(value) <= _LINE and _PLAIN_VALUE.fullmatch(value):
        return f"{name}: {value}\r\n".encode("ascii")
    return _POLICY.fold_binary(name, _POLICY.header_store_parse(name, value)[1])


def _seven_bit(text: str) -> list[bytes] | None:
    """The text's lines as ``set_content`` writes them in 7 bits (CRLF after each), or None when it
    would encode them (non-ASCII, or a line over 78 characters)."""
    try:
        lines = text.encode("ascii").splitlines()
    except UnicodeEncodeError:
        return None
    if any(len(line) > _LINE for line in lines):
        return None
    return [line + b"\r\n" for line in lines] or [b"\r\n"]


def _attach(msg: EmailMessage, file: AttachedFile) -> None:
    if file.content_type == "message/rfc822":
        msg.add_attachment(parse_bytes(file.data), filename=file.filename)
        return
    maintype, _, subtype = file.content_type.partition("/")
    if maintype in ("message", "multipart") or not subtype:  # as bytes, only the other types can be sent
        maintype, subtype = "application", "octet-stream"
    msg.add_attachment(file.data, maintype=maintype, subtype=subtype, filename=file.filename)
