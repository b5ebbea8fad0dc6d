"""The attachments of a thread's mails, listed and read as text where that makes sense (documents
through :mod:`pizzamail.tools.documents`). No I/O beyond the bytes handed in: the caller reads the
stored mails."""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.mail.parse import ParsedMail, parse_mail
from pizzamail.tools.documents import Part, Reading, document_kind, read_document, text_part

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

    @property
    def readable(self) -> bool:
        """Whether :func:`attachment_text` gives its content (a document, text, an attached mail)."""
        return (document_kind(self.filename, self.content_type, self.data) is not None or self.is_text
                or (self.content_type == "message/rfc822" and bool(self.data)))

    def line(self) -> str:
        return (f"{self.index}. {self.filename} ({self.content_type}, {len(self.data)} bytes)"
                f" from the mail {self.message_subject!r}")


def attachments_of(parsed: ParsedMail, *, subject: str, start: int) -> list[Attachment]:
    """The attachments of one parsed mail, numbered from ``start``."""
    return [Attachment(index=start + n, filename=f.filename or f"attachment-{start + n}", data=f.data,
                       content_type=f.content_type, message_subject=subject)
            for n, f in enumerate(parsed.files)]


def attachment_text(attachment: Attachment, part: Part, *, limit: int, charset: str = "utf-8") -> Reading:
    """``part`` of the content as text (at most ``limit`` characters and a note on the rest), or a
    short note saying why it cannot be shown."""
    a = attachment
    kind = document_kind(a.filename, a.content_type, a.data)
    if kind is not None:
        return read_document(kind, a.filename, a.data, part, limit=limit)
    if a.is_text:
        return text_part(a.filename, a.data.decode(charset, "replace"), part, limit=limit)
    if a.content_type == "message/rfc822" and a.data:
        return text_part(a.filename, _mail_text(a.data), part, limit=limit)
    return Reading(text=f"{a.filename} is {a.content_type} ({len(a.data)} bytes);"
                        " it cannot be shown as text.")


def _mail_text(raw: bytes) -> str:
    """An attached mail as its main headers, text and the names of its own attachments."""
    parsed = parse_mail(raw)
    lines = [f"{name}: {value}" for name, value in parsed.headers]
    text = "\n".join([*lines, "", parsed.body or "(no text)"])
    if parsed.attachments:
        text += "\n\n[attachments: " + ", ".join(parsed.attachments) + "]"
    return text

