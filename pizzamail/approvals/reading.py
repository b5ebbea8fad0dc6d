"""Which words of a reply the user wrote themselves. Pure; no I/O.

A reply's HTML alternative is read when it has one: it is the form the user composed in (RFC 2046
puts the preferred alternative last), and the text/plain part an HTML composer adds may be missing
or a flattened rendering (Thunderbird's turns an edited arguments block into loose lines). Plain
text is read otherwise, format=flowed unwrapped.

What is never the user's own words: quoted lines (``>``) and HTML ``<blockquote>`` at any depth, the
quoted mail below an attribution ("On … wrote:") or Outlook's headers (found by
``mail-parser-reply``), a signature below the ``-- `` line (or in a client's signature element), and
hidden markup (head, style, script). Signatures without that line stay: guessing where one starts
could cut off "but not today".
"""

from __future__ import annotations

import re
from email.message import EmailMessage, MIMEPart
from html.parser import HTMLParser

from mailparser_reply import EmailReplyParser

#: languages whose attribution lines and Outlook headers are recognised
LANGUAGES = ("en", "de", "fr", "es")
#: characters a composer writes for a plain space (no-break spaces) or nothing (zero-width)
_SPACES = re.compile("[\u00a0\u2007\u202f]")
_INVISIBLE = re.compile("[\u200b\u200c\u2060\ufeff]")
_SKIPPED = frozenset({"blockquote", "head", "style", "script", "title", "template"})
_VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "wbr", "area", "base", "col", "source"})
_BLOCK = frozenset({"p", "div", "br", "li", "tr", "pre", "table", "ul", "ol", "hr", "h1", "h2", "h3",
                    "h4", "h5", "h6", "section", "article", "header", "footer", "dd", "dt"})


def reply_text(msg: EmailMessage) -> str:
    """The text the user wrote in ``msg``, quotes and signature removed."""
    part = _body_part(msg)
    if part is None:
        return ""
    text = _content(part)
    if part.get_content_subtype() == "html":
        text = html_text(text)
    elif str(part.get_param("format", "", header="content-type")).lower() == "flowed":
        text = unflow(text, delsp=str(part.get_param("delsp", "", header="content-type")).lower() == "yes")
    return own_words(text)


def unflow(text: str, *, delsp: bool = False) -> str:
    """RFC 3676: join soft-broken lines (ending in a space), undo space-stuffing; the signature
    separator ``-- `` stays a hard line. Quote depth is kept as a ``> `` prefix."""
    out: list[str] = []
    paragraph: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        depth = len(line) - len(line.lstrip(">"))
        body = line[depth:]
        body = body[1:] if body.startswith(" ") else body
        soft = body.endswith(" ") and body != "-- "
        paragraph.append(body[:-1] if soft and delsp else body)
        if not soft:
            out.append("> " * depth + "".join(paragraph))
            paragraph = []
    if paragraph:
        out.append("".join(paragraph))
    return "\n".join(out)


def html_text(markup: str) -> str:
    """An HTML reply as the text a reader sees, without quoted parts and signature elements."""
    reader = _HtmlReader()
    reader.feed(markup)
    reader.close()
    return reader.text()


def own_words(text: str) -> str:
    """The user's part of a plain-text reply (top- or bottom-posted)."""
    text = _INVISIBLE.sub("", _SPACES.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n")))
    kept: list[str] = []
    for line in text.split("\n"):
        if line == "-- ":  # RFC 3676: the signature follows, added by the client, not typed
            break
        if not line.lstrip().startswith(">"):
            kept.append(line)
    parsed = EmailReplyParser(languages=list(LANGUAGES)).read("\n".join(kept))
    for reply in parsed.replies:
        if _quotes_below(str(reply.headers or "")):
            return ""  # nothing of the user's own above the quoted mail
        # full_body: without the attribution, but with what the library would call a signature
        # ("Thanks, but change the recipient first" starts like one)
        body = str(reply.full_body).strip()
        if body:
            return body
    return ""


def _quotes_below(header: str) -> bool:
    """Whether the text below ``header`` is the quoted mail itself: Outlook's "From:/Sent:" block or
    its "Original Message" line quote without ``>``. (Below an "On … wrote:" line, the ``>`` lines
    are gone already and what is left is the user's, written under the quote.)"""
    return "\n" in header.strip() or "original message" in header.lower()


class _HtmlReader(HTMLParser):
    """Text as a browser lays it out: blocks on lines, spaces collapsed except in ``<pre>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[str] = []
        self._skipping: list[str] = []  # the tag skipped, repeated once per nested open one
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            if tag in _BLOCK and not self._skipping:
                self._parts.append("\n")
            return
        if self._skipping:
            if tag == self._skipping[0]:
                self._skipping.append(tag)
            return
        if tag in _SKIPPED or _is_signature(attrs):
            self._skipping.append(tag)
            return
        self._pre += tag == "pre"
        if tag in _BLOCK:
            self._parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self._skipping:
            if tag == self._skipping[0]:
                self._skipping.pop()
            return
        if tag == "pre":
            self._pre = max(0, self._pre - 1)
        if tag in _BLOCK:
            self._parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self._parts.append(data if self._pre else re.sub(r"[ \t\r\n\f]+", " ", data))

    def text(self) -> str:
        lines = "".join(self._parts).split("\n")
        return "\n".join(line.lstrip(" ") for line in lines).strip("\n")


def _is_signature(attrs: list[tuple[str, str | None]]) -> bool:
    """Thunderbird's ``moz-signature``, Gmail's ``gmail_signature``, Outlook's ``id="Signature"``."""
    return any(name in ("class", "id") and value and "signature" in value.lower() for name, value in attrs)


def _body_part(msg: EmailMessage) -> MIMEPart | None:
    try:
        return msg.get_body(preferencelist=("html", "plain"))
    except (KeyError, ValueError, IndexError, TypeError, LookupError):
        return None


def _content(part: MIMEPart) -> str:
    try:
        payload = part.get_payload(decode=True)
    except (ValueError, TypeError, LookupError):
        return ""
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, "replace")
    except LookupError:
        return payload.decode("utf-8", "replace")
