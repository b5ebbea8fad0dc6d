"""Pure parsing of an incoming mail into what a task needs. No I/O.

The stdlib parser with the modern policy never gives up on a message; header access can still
raise on malformed values, so every field is read defensively and a message we cannot understand
still yields a task whose body says what arrived.
"""

from __future__ import annotations

import email.policy
import email.utils
import re
from dataclasses import dataclass
from email.message import EmailMessage, Message, MIMEPart
from email.parser import BytesParser

_MSGID = re.compile(r"<([^<>\s]+)>")
_TAGS = re.compile(r"<[^>]*>")


@dataclass(frozen=True, kw_only=True)
class ParsedMail:
    message_id: str | None
    in_reply_to: str | None
    references: list[str]
    subject: str
    sender: str | None
    body: str
    attachments: list[str]

    @property
    def is_empty(self) -> bool:
        return not (self.subject.strip() or self.body.strip() or self.attachments)

    def thread_refs(self) -> list[str]:
        """Message-IDs that may name this mail's thread, oldest first."""
        refs = list(self.references)
        if self.in_reply_to and self.in_reply_to not in refs:
            refs.append(self.in_reply_to)
        return refs


def parse_mail(raw: bytes) -> ParsedMail:
    msg = BytesParser(policy=email.policy.default).parsebytes(raw)
    assert isinstance(msg, EmailMessage)
    return ParsedMail(
        message_id=_first_id(_header(msg, "Message-ID")),
        in_reply_to=_first_id(_header(msg, "In-Reply-To")),
        references=message_ids(_header(msg, "References")),
        subject=" ".join(_header(msg, "Subject").split()),
        sender=_address(_header(msg, "From")),
        body=_body_text(msg),
        attachments=_attachment_names(msg),
    )


def message_ids(value: str) -> list[str]:
    return _MSGID.findall(value)


def _first_id(value: str) -> str | None:
    ids = message_ids(value)
    return ids[0] if ids else None


def _header(msg: EmailMessage, name: str) -> str:
    try:
        value = msg.get(name)
    except (ValueError, IndexError, TypeError):
        # a header the modern policy cannot parse: fall back to its raw text
        value = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), None)
    return str(value) if value is not None else ""


def _address(value: str) -> str | None:
    _, addr = email.utils.parseaddr(value)
    return addr.lower() if "@" in addr else None


def _body_text(msg: EmailMessage) -> str:
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
    except (KeyError, ValueError, IndexError, TypeError):
        part = None
    if part is None:
        return ""
    text = _content(part)
    if part.get_content_subtype() == "html":
        text = re.sub(r"[ \t]+", " ", _TAGS.sub(" ", text))
    return text.strip()


def _content(part: MIMEPart) -> str:
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""


def _attachment_names(msg: EmailMessage) -> list[str]:
    names = []
    try:
        for part in msg.iter_attachments():
            names.append(part.get_filename() or part.get_content_type())
    except (KeyError, ValueError, TypeError):
        return []
    return names


def header_text(msg: Message, name: str) -> str:
    """One header as a single line of text ('' when absent); a header the modern policy cannot
    parse falls back to its raw text rather than failing the whole mail."""
    try:
        value = msg.get(name)
    except (ValueError, IndexError, TypeError):
        value = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), None)
    return " ".join(str(value).split()) if value is not None else ""
