"""Which lines of a plain-text reply the user wrote themselves. Pure; no I/O.

What is never the user's own words: quoted lines (``>``), the quoted mail below an attribution
("On … wrote:") or Outlook's headers (found by ``mail-parser-reply``), a signature below the ``-- ``
line, and the "Sent from my iPhone" line a phone adds. Signatures without the ``-- `` line stay:
guessing where one starts could cut off "but not today".

Approvals read a decision with this (:mod:`pizzamail.approvals.reading` adds HTML, hidden text and
the forms of one reply); intake reads a follow-up's task text with it.
"""

from __future__ import annotations

import re

from mailparser_reply import EmailReplyParser

#: languages whose attribution lines and Outlook headers are recognised
LANGUAGES = ("en", "de", "fr", "es")
#: characters a composer writes for a plain space (no-break spaces) or nothing (zero-width)
_SPACES = re.compile("[\u00a0\u2007\u202f]")
#: (also direction marks and soft hyphens, which change no letter; the overrides and isolates that
#: reorder what is shown are not removed, so they make a reply unclear)
_INVISIBLE = re.compile("[\u200b\u200c\u2060\ufeff\u200e\u200f\u061c\u00ad\u034f]")
#: the first line of Outlook's header block of the quoted mail, in the languages read
_FROM = re.compile(r"^[>* ]*(?:from|von|de)[ *]*:", re.IGNORECASE)
#: the end of an attribution line ("On … wrote:"), which a client may wrap onto two lines
_ATTRIBUTION = re.compile(r"\b(?:wrote|schrieb|écrit|escribió)\b[\s\S]*:\s*$", re.IGNORECASE)
_DEVICE = re.compile(
    r"^(sent from( my)?|sent with|get outlook for|von meinem|gesendet von( meinem)?|envoyé de mon"
    r"|envoyé depuis( mon)?|enviado desde mi|inviato da( mio| dal mio)?)\b[\w .'-]{0,40}$", re.IGNORECASE)
_DEVICE_LAST = frozenset({"iphone", "ipad", "android", "ios", "phone", "smartphone", "mobile", "handy",
                          "device", "windows", "blackberry", "tablet", "mail", "outlook", "galaxy", "watch",
                          "gesendet", "móvil", "movil", "portable", "mac", "pixel", "samsung", "mobiel"})


def user_words(text: str) -> str:
    """The user's own words in a plain-text reply: quotes, signature and device line set aside."""
    return without_device_lines(own_words(text))


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
    found: list[str] = []
    for reply in parsed.replies:
        header = str(reply.headers or "").strip()
        if _quotes_below(header):
            break  # the quoted mail itself: nothing below it is the user's
        if header and not _ATTRIBUTION.search(header):  # "To: Bob" / "Cc: Alice", typed by the user
            found.append(header)
        # below an "On … wrote:" line the ">" lines are gone: what is left the user wrote between
        # them. full_body: with what the library would call a signature ("Thanks, but change the
        # recipient first" starts like one)
        found.append(str(reply.full_body).strip())
    return "\n\n".join(f for f in found if f)


def without_device_lines(text: str) -> str:
    """``text`` without the "Sent from my iPhone" lines a phone adds at its end."""
    lines = text.rstrip().split("\n")
    while lines and _is_device_line(lines[-1].strip()):
        lines.pop()
        while lines and not lines[-1].strip():
            lines.pop()
    return "\n".join(lines)


def _is_device_line(line: str) -> bool:
    if _DEVICE.match(line) is None:
        return False
    words = re.findall(r"[^\W\d_]+", line.lower())
    return bool(words) and words[-1] in _DEVICE_LAST


def _quotes_below(header: str) -> bool:
    """Whether the text below ``header`` is the quoted mail itself: Outlook's "From:/Sent:" block or
    its "Original Message" line quote without ``>``. (Below an "On … wrote:" line, the ``>`` lines
    are gone already and what is left is the user's, written between the quotes.)"""
    lines = header.split("\n")
    return "original message" in header.lower() or (len(lines) > 1 and any(map(_FROM.match, lines)))
