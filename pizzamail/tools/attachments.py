"""The attachments of a thread's mails, listed and read as text where that makes sense. No I/O
beyond the bytes handed in: the caller reads the stored mails."""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default

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
    msg = BytesParser(policy=default).parsebytes(raw)
    assert isinstance(msg, EmailMessage)
    found: list[Attachment] = []
    try:
        parts = list(msg.iter_attachments())
    except (KeyError, ValueError, TypeError):
        return []
    for part in parts:
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        name = part.get_filename() or f"attachment-{start + len(found)}"
        found.append(Attachment(index=start + len(found), filename=name, data=data,
                                content_type=part.get_content_type(), message_subject=subject))
    return found


def attachment_text(attachment: Attachment, *, charset: str = "utf-8") -> str:
    """The content as text, or a short note saying why it cannot be shown."""
    if attachment.is_text:
        return attachment.data.decode(charset, "replace")
    if attachment.content_type == "application/pdf":
        return (f"{attachment.filename} is a PDF; text extraction from PDFs is not available in this"
                " installation. Ask the user for a text version if you need its content.")
    return (f"{attachment.filename} is {attachment.content_type} ({len(attachment.data)} bytes);"
            " it cannot be shown as text.")
