"""One parse of a raw mail into one value, :class:`ParsedMail`. Pure; no I/O.

The stdlib parser with the modern policy never gives up on a message; header access can still
raise on malformed values, so every field is read defensively and a message we cannot understand
still yields a task whose body says what arrived. Every stdlib parse of a mail goes through
:func:`parse_bytes`, which bounds how deep the MIME tree goes.
"""

from __future__ import annotations

import email.policy
import email.utils
import functools
import re
from collections import OrderedDict
from dataclasses import dataclass
from email.headerregistry import BaseHeader, HeaderRegistry, UnstructuredHeader
from email.message import EmailMessage, Message, MIMEPart
from email.parser import BytesParser
from typing import Any, Self

from pizzamail.mail.ids import first_id, message_ids
from pizzamail.mail.text import html_to_text

_LINE_BREAK = re.compile(r"[\r\n]")

MAX_HEADER = 16_384
"""Characters of a header value that are parsed (the rest is cut): the modern policy's parser takes
time that grows with the square of a value's words, so a 1 MB Subject would hold up everything."""
MAX_REFERENCES = 100
"""Message-IDs kept from References: the first (the thread's start) and the newest. Threading needs
no more, and each one is looked up when the mail is stored."""

MAX_DEPTH = 100
"""MIME nesting below which a part is one opaque piece of bytes. Real mail nests a few levels (a
forward of a forward of a forward is six); the stdlib's parser and everything that walks its tree
(get_body, walk, as_bytes) recurse once or more per level, so a mail 1,000 levels deep would hit
Python's recursion limit in whoever reads it."""
CLIPPED_NOTE = (f"[This mail nests its parts more than {MAX_DEPTH} levels deep; the parts below that"
                " depth were not read.]")


class _Headers(HeaderRegistry):
    """The modern policy's header factory, less its repeated work: the stdlib makes a new class for
    every header it parses (a quarter of a small mail's parse), and parses a value again at every
    read (a part's Content-Type about ten times, its From, To and Subject at least twice). Here a
    class is made once per name, and the last :data:`KEPT_HEADERS` short values parsed are given
    again (a header object is never changed once made, so one may serve every mail with that line)."""

    def __init__(self) -> None:
        super().__init__()
        self._classes: dict[str, type[BaseHeader]] = {}
        self._parsed: OrderedDict[tuple[str, str], BaseHeader] = OrderedDict()

    def __getitem__(self, name: str) -> type[BaseHeader]:
        key = name.lower()
        made = self._classes.get(key)
        if made is None:
            made = self._classes[key] = super().__getitem__(name)
        return made

    def __call__(self, name: str, value: Any) -> BaseHeader:
        if not isinstance(value, str) or len(value) > KEPT_HEADER_SIZE:
            return super().__call__(name, value)
        key = (name, value)
        header = self._parsed.get(key)
        if header is None:
            header = self._parsed[key] = super().__call__(name, value)
            if len(self._parsed) > KEPT_HEADERS:
                self._parsed.popitem(last=False)
        return header


KEPT_HEADERS = 512
"""parsed header values :class:`_Headers` keeps"""
KEPT_HEADER_SIZE = 256
"""the longest header value :class:`_Headers` keeps"""
HEADERS = _Headers()
"""the header factory of :data:`POLICY`"""
POLICY = email.policy.default.clone(header_factory=HEADERS)
"""the modern policy (``email.policy.default``), with :class:`_Headers`"""


class BoundedMessage(EmailMessage):
    """A part that knows its depth: at ``MAX_DEPTH`` its type reads as application/octet-stream,
    so the parser keeps the rest of its bytes as its payload instead of descending further."""

    depth = 0
    _type_read: tuple[object, str, str] | None = None

    def attach(self, payload: Self) -> None:  # type: ignore[override]  # as MIMEPart.attach in typeshed
        # The parser attaches a new part to its parent before it reads the part's header, so the
        # depth is known by the time the part's type decides whether to descend.
        payload.depth = self.depth + 1
        super().attach(payload)

    @property
    def clipped(self) -> bool:
        return self.depth >= MAX_DEPTH

    def get_content_type(self) -> str:
        """Kept while the part's Content-Type and default type stay the same: the modern policy
        parses the header afresh at every read, and walking a mail reads it about ten times a part
        (two thirds of a small mail's parse)."""
        if self.clipped:
            return "application/octet-stream"
        header = next((v for k, v in self.raw_items() if k.lower() == "content-type"), None)
        default = self.get_default_type()
        read = self._type_read
        if read is None or read[0] is not header or read[1] != default:
            read = self._type_read = (header, default, super().get_content_type())
        return read[2]


#: the headers a person reads, kept as text in :attr:`ParsedMail.headers`
SHOWN_HEADERS = ("From", "To", "Cc", "Date", "Subject")


@dataclass(frozen=True, kw_only=True)
class MailFile:
    """An attached part as sent: its file name (None when it gave none), its type, its decoded bytes
    (an attached mail, which has no transfer encoding, as the mail itself)."""

    filename: str | None
    content_type: str
    data: bytes


@dataclass(frozen=True, kw_only=True)
class ParsedMail:
    message_id: str | None
    in_reply_to: str | None
    references: list[str]
    subject: str
    sender: str | None
    body: str
    """the text a reader sees: the plain part, else the HTML part as text"""
    files: tuple[MailFile, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    """:data:`SHOWN_HEADERS` as text, those present"""

    @property
    def attachments(self) -> list[str]:
        """The attachments' names (their types where they have none)."""
        return [f.filename or f.content_type for f in self.files]

    def header(self, name: str) -> str:
        """One of :data:`SHOWN_HEADERS` as text ('' when absent)."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), "")

    @property
    def is_empty(self) -> bool:
        return not (self.subject.strip() or self.body.strip() or self.attachments)

    def thread_refs(self) -> list[str]:
        """Message-IDs that may name this mail's thread, oldest first."""
        refs = list(self.references)
        if self.in_reply_to and self.in_reply_to not in refs:
            refs.append(self.in_reply_to)
        return refs


def parse_bytes(raw: bytes) -> EmailMessage:
    """The stdlib's parse of a mail (modern policy), its tree at most ``MAX_DEPTH`` deep."""
    msg = BytesParser(BoundedMessage, policy=POLICY).parsebytes(raw)
    assert isinstance(msg, BoundedMessage)
    return msg


def is_clipped(msg: EmailMessage) -> bool:
    """Whether parts of ``msg`` lie beyond ``MAX_DEPTH`` (and were kept as opaque bytes)."""
    return any(isinstance(part, BoundedMessage) and part.clipped for part in msg.walk())


PARSED_AT_ONCE = 64 * 1024
"""the largest mail parsed in the event loop (a 2 KB task takes ~0.1 ms; see :func:`parsed_at_once`)"""
PARTS_AT_ONCE = 4
"""the most MIME parts of a mail parsed in the event loop (each takes the stdlib about a millisecond)"""


def parsed_at_once(raw: bytes) -> bool:
    """Whether to parse ``raw`` right in the event loop: a small mail of a few parts at most (most
    tasks) takes less than its hop to a worker thread and back, which waits for the busy loop's
    turn (and under the GIL no thread parses beside the loop anyway; it only takes the loop's
    turns). Parts are counted by their delimiter lines: one each, and one that closes."""
    return len(raw) <= PARSED_AT_ONCE and raw.count(b"\n--") <= PARTS_AT_ONCE + 1


def parse_mail(raw: bytes) -> ParsedMail:
    """Bytes to :class:`ParsedMail` (callers that also need the stdlib's tree use :func:`parsed_mail`)."""
    return parsed_mail(parse_bytes(raw))


def parsed_mail(msg: EmailMessage) -> ParsedMail:
    """The one value of a mail :func:`parse_bytes` parsed: what intake, approvals, tools and
    triggers read of it."""
    raw = _first_values(msg)
    shown = {name: _text(name, raw.get(name.lower(), "")) for name in SHOWN_HEADERS}  # each parsed once
    return ParsedMail(
        message_id=first_id(raw.get("message-id", "")),
        in_reply_to=first_id(raw.get("in-reply-to", "")),
        references=_trimmed(message_ids(raw.get("references", ""))),
        subject=shown["Subject"],
        sender=_address(shown["From"]),
        body="\n\n".join(filter(None, [_body_text(msg), CLIPPED_NOTE if is_clipped(msg) else ""])),
        files=_files(msg),
        headers=tuple((n, v) for n, v in shown.items() if v),
    )


def _trimmed(references: list[str]) -> list[str]:
    if len(references) <= MAX_REFERENCES:
        return references
    return references[:1] + references[1 - MAX_REFERENCES:]


@functools.lru_cache(maxsize=256)
def _address(value: str) -> str | None:
    """Kept for the same From (a user's mails all have one): read by the stdlib, it takes a tenth of
    a small mail's parse."""
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
    return html_to_text(text) if part.get_content_subtype() == "html" else text.strip()


def _content(part: MIMEPart) -> str:
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""


def _files(msg: EmailMessage) -> tuple[MailFile, ...]:
    try:
        return tuple(MailFile(filename=part.get_filename(), content_type=part.get_content_type(),
                              data=_data(part)) for part in msg.iter_attachments())
    except (KeyError, ValueError, TypeError):  # a MIME tree too broken to walk: its text still counts
        return ()


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


def header_text(msg: Message, name: str) -> str:
    """The first ``name`` header as a single line of text, encoded words decoded ('' when absent).
    Only its first ``MAX_HEADER`` characters are read; a value the modern policy cannot parse
    falls back to its raw text rather than failing the whole mail."""
    return _text(name, _raw_value(msg, name))


def _text(name: str, value: str) -> str:
    """:func:`header_text` of a header's raw value. An unstructured header (Subject, In-Reply-To…)
    without encoded words reads as its raw text, unparsed: the modern policy's parse of it gives
    that text back, at a tenth of a small mail's parse."""
    raw = _LINE_BREAK.sub("", value[:MAX_HEADER])
    if "=?" not in raw and issubclass(HEADERS[name], UnstructuredHeader):
        return " ".join(raw.split())
    try:
        text = str(POLICY.header_factory(name, raw)) if raw else ""
    except (ValueError, IndexError, TypeError):
        text = raw
    return " ".join(text.split())


def _raw_value(msg: Message, name: str) -> str:
    """The first ``name`` header as it arrived, unparsed ('' when absent); 8-bit bytes are read as
    UTF-8 (the parser keeps them as surrogates, which nothing downstream can store)."""
    value = next((str(v) for k, v in msg.raw_items() if k.lower() == name.lower()), "")
    return _utf8(value)


def _first_values(msg: Message) -> dict[str, str]:
    """:func:`_raw_value` of every header, by its name in lower case, read in one pass."""
    found: dict[str, str] = {}
    for name, value in msg.raw_items():
        if name.lower() not in found:
            found[name.lower()] = _utf8(str(value))
    return found


def _utf8(value: str) -> str:
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
