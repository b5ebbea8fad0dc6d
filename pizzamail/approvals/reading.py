"""Which words of a reply the user wrote themselves. Pure; no I/O.

A reply is read as its HTML shows it when it has one: that is the form the user composed in (RFC
2046 puts the preferred alternative last), and the text/plain part an HTML composer adds may be a
flattened rendering. Plain text is read otherwise, format=flowed unwrapped. Every text part of the
body counts (a client splits the text around an inline image); a file — an attachment, or any part
with a file name — and an attached mail never do. The other forms of the same reply (its plain part,
its HTML with hidden text shown) are read too: :func:`decide.read_decision` runs nothing they do not
all decide.

What is never the user's own words: what :mod:`pizzamail.mail.reply` sets aside in any plain-text
reply (quoted lines, the quoted mail below an attribution or Outlook's headers, a signature below the
``-- `` line), and in HTML a ``<blockquote>`` at any depth, a client's signature element and markup
that is not shown (:mod:`markup`).
"""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage, MIMEPart

from pizzamail.approvals.markup import html_seen
from pizzamail.mail.reply import own_words, unflow

#: MIME levels a reply's body may have (clients use three or four), and parts in all
_DEEPEST, _MOST_PARTS = 24, 200


def reply_texts(msg: EmailMessage) -> tuple[str, ...]:
    """The user's own words in each form a reader may see them, quotes and signature removed: first
    as the HTML shows them (the text when there is no HTML), then with what the HTML hides shown,
    then as the plain-text alternative (its signature, when the HTML marks one, set aside). Each
    distinct form once; a decision runs only when they all make it (:func:`decide.read_decision`)."""
    try:
        seen = _rendering(msg, prefer="html", hidden=False)
        shown = _rendering(msg, prefer="html", hidden=True)
        plain = _rendering(msg, prefer="plain", hidden=False)
    except _Unreadable:
        return ("",)
    own = {text: own_words(text) for text in dict.fromkeys((seen.text, shown.text, plain.text))}
    return tuple(dict.fromkeys([own[seen.text], own[shown.text],
                                _without_signature(own[plain.text], seen.signatures)]))


def reply_text(msg: EmailMessage) -> str:
    """The text the user wrote in ``msg`` as a reader of its HTML sees it (see :func:`reply_texts`)."""
    return reply_texts(msg)[0]


def _without_signature(text: str, signatures: tuple[str, ...]) -> str:
    """``text`` without its last lines when they are one of ``signatures`` (Outlook marks its
    signature in the HTML part only; its plain part has it as more lines)."""
    lines = text.split("\n")
    wanted = {" ".join(s.split()) for s in signatures if s.strip()}
    for start in range(len(lines) - 1, 0, -1):
        if " ".join(" ".join(lines[start:]).split()) in wanted:
            return "\n".join(lines[:start]).rstrip()
    return text


@dataclass(frozen=True, kw_only=True)
class _Rendering:
    text: str
    signatures: tuple[str, ...] = ()


class _Unreadable(Exception):
    """A body nested deeper, or in more parts, than any reply a person writes: read as nothing
    (never in part), in bounded time."""


def _rendering(msg: EmailMessage, *, prefer: str, hidden: bool) -> _Rendering:
    """Every text part of the body in order (a client splits the text around an inline image),
    each ``multipart/alternative`` read in its ``prefer`` form."""
    read = [_part_text(part, hidden=hidden) for part in _text_parts(msg, prefer, 0, [0])]
    return _Rendering(text="\n\n".join(r.text for r in read),
                      signatures=tuple(s for r in read for s in r.signatures))


def _part_text(part: MIMEPart, *, hidden: bool) -> _Rendering:
    text = _content(part)
    if part.get_content_subtype() == "html":
        seen = html_seen(text, hidden=hidden)
        return _Rendering(text=seen.text, signatures=seen.signatures)
    if _param(part, "format") == "flowed":
        return _Rendering(text=unflow(text, delsp=_param(part, "delsp") == "yes"))
    return _Rendering(text=text)


def _param(part: MIMEPart, name: str) -> str:
    return str(part.get_param(name, "", header="content-type")).lower()


def _text_parts(part: MIMEPart, prefer: str, depth: int, visited: list[int]) -> list[MIMEPart]:
    """The parts a reader sees as the body: never a file (an attachment, or any part with a file
    name, however it is shown), never an attached mail (``message/rfc822``). ``visited`` counts
    the parts looked at."""
    visited[0] += 1
    if depth > _DEEPEST or visited[0] > _MOST_PARTS:
        raise _Unreadable
    if _is_file(part):
        return []
    maintype, subtype = part.get_content_maintype(), part.get_content_subtype()
    if maintype == "text":
        return [part] if subtype in ("plain", "html") else []
    if maintype != "multipart" or not part.is_multipart():
        return []
    found = (_text_parts(child, prefer, depth + 1, visited) for child in part.iter_parts())
    children = [parts for parts in found if parts]
    if subtype == "alternative":  # RFC 2046: the last is the richest
        preferred = [c for c in children if any(p.get_content_subtype() == prefer for p in c)]
        children = (preferred or children)[-1:]
    elif subtype == "related":  # the root, with what it shows inline
        children = children[:1]
    return [p for parts in children for p in parts]


def _is_file(part: MIMEPart) -> bool:
    try:
        return part.is_attachment() or part.get_filename() is not None
    except (ValueError, TypeError, LookupError):
        return True


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
