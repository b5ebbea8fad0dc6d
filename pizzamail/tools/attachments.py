"""The attachments of a thread's mails, listed and read as text where that makes sense. No I/O
beyond the bytes handed in: the caller reads the stored mails."""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage

from pizzamail.mail.parse import header_text, parse_bytes, parsed_mail

#: types whose bytes are text even though they are not text/*
_TEXTUAL = ("application/json", "application/xml", "application/csv", "application/x-yaml",
            "application/yaml", "application/javascript", "application/x-sh")


@dataclass(frozen=True, kw_only=True)
class Attachment:
    index: int
    filename: str
    content_type: str
    data: bytes
    message_subject: str

    @property
    def is_text(self) -> bool:
        t = self.content_type
        return t.startswith("text/") or t in _TEXTUAL or t.endswith(("+json", "+xml"))

    def line(self) -> str:
        return (f"{self.index}. {self.filename} ({self.content_type}, {len(self.data)} bytes)"
                f" from the mail {self.message_subject!r}")


def attachments_of(raw: bytes, *, subject: str, start: int) -> list[Attachment]:
    """The attachments of one raw mail, numbered from ``start``."""
    msg = parse_bytes(raw)
    found: list[Attachment] = []
    try:
        parts = list(msg.iter_attachments())
    except (KeyError, ValueError, TypeError):
        return []
    for part in parts:
        data = _data(part)
        name = part.get_filename() or f"attachment-{start + len(found)}"
        found.append(Attachment(index=start + len(found), filename=name, data=data,
                                content_type=part.get_content_type(), message_subject=subject))
    return found


def _data(part: EmailMessage) -> bytes:
    """The part's bytes; for an attached mail (message/rfc822, which has no transfer encoding to
    decode: ``get_payload(decode=True)`` is None) the mail itself."""
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        return payload
    if part.get_content_maintype() != "message":
        return b""
    try:
        inner = part.get_payload(0)
        return inner.as_bytes() if isinstance(inner, EmailMessage) else b""
    except (IndexError, TypeError, ValueError, LookupError):  # an empty or broken attached mail
        return b""


def attachment_text(attachment: Attachment, *, charset: str = "utf-8") -> str:
    """The content as text, or a short note saying why it cannot be shown."""
    if attachment.is_text:
        return attachment.data.decode(charset, "replace")
    if attachment.content_type == "message/rfc822" and attachment.data:
        return _mail_text(attachment.data)
    if attachment.content_type == "application/pdf":
        return (f"{attachment.filename} is a PDF; text extraction from PDFs is not available in this"
                " installation. Ask the user for a text version if you need its content.")
    return (f"{attachment.filename} is {attachment.content_type} ({len(attachment.data)} bytes);"
            " it cannot be shown as text.")


def _mail_text(raw: bytes) -> str:
    """An attached mail as its main headers, text and the names of its own attachments."""
    msg = parse_bytes(raw)
    parsed = parsed_mail(msg)
    lines = [f"{name}: {header_text(msg, name)}" for name in ("From", "To", "Cc", "Date", "Subject")
             if header_text(msg, name)]
    text = "\n".join([*lines, "", parsed.body or "(no text)"])
    if parsed.attachments:
        text += "\n\n[attachments: " + ", ".join(parsed.attachments) + "]"
    return text

