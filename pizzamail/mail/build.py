"""The bytes of a mail pizzamail writes itself: a task from the CLI or a trigger, a trigger's notice.
Pure; no I/O.

One text/plain part first (what the store keeps as the body and what clients show), then any
attachments. Message-IDs are given without angle brackets (:mod:`pizzamail.mail.ids`).
"""

from __future__ import annotations

import email.policy
import email.utils
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage

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

    message: EmailMessage
    message_id: str
    in_reply_to: str | None
    references: list[str]
    subject: str
    body: str

    def as_bytes(self) -> bytes:
        return self.message.as_bytes()


def build_mail(
    *, sender: str, to: str, subject: str, text: str, message_id: str, in_reply_to: str | None = None,
    references: Sequence[str] = (), date: datetime | None = None,
    headers: Sequence[tuple[str, str]] = (), attachments: Sequence[AttachedFile] = (),
) -> Outgoing:
    """A mail from ``sender`` to ``to``; ``headers`` (X-Pizzamail-Source …) follow the standard ones.
    Without ``date`` it is dated now, in local time."""
    msg = EmailMessage(policy=_POLICY)
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = email.utils.format_datetime(date) if date else email.utils.formatdate(localtime=True)
    msg["Message-ID"] = bracketed(message_id)
    if in_reply_to:
        msg["In-Reply-To"] = bracketed(in_reply_to)
    if references:
        msg["References"] = " ".join(bracketed(r) for r in references)
    for name, value in headers:
        msg[name] = value
    msg.set_content(text)
    for file in attachments:
        _attach(msg, file)
    return Outgoing(message=msg, message_id=message_id, in_reply_to=in_reply_to,
                    references=list(references), subject=subject, body=text)


def _attach(msg: EmailMessage, file: AttachedFile) -> None:
    if file.content_type == "message/rfc822":
        msg.add_attachment(parse_bytes(file.data), filename=file.filename)
        return
    maintype, _, subtype = file.content_type.partition("/")
    if maintype in ("message", "multipart") or not subtype:  # as bytes, only the other types can be sent
        maintype, subtype = "application", "octet-stream"
    msg.add_attachment(file.data, maintype=maintype, subtype=subtype, filename=file.filename)
