"""Pure parsing of approval replies: which held action a mail answers, and what it decides. No I/O.

Routing: a reply names its action by any one of the plus-address nonce (``bot+<nonce>@…``, the
request's Reply-To), the ``X-Pizzamail-Approval`` header (``<id>; nonce=<nonce>``) or In-Reply-To /
References naming the request's Message-ID. The nonce is the proof; the id alone never is.

The decision is read only from the first words the user wrote themselves: quoted lines (``>``) and
the quoted mail below an attribution line ("On … wrote:"), signatures and Outlook-style headers are
removed by ``mail-parser-reply`` first; format=flowed is unwrapped and an HTML-only reply is turned
into text before that.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from email.message import EmailMessage, MIMEPart
from typing import Any, Literal

from mailparser_reply import EmailReplyParser

from pizzamail.intake.parse import header_text, message_ids, parse_bytes

Kind = Literal["approve", "approve_always", "deny", "edit", "feedback", "retry", "skip", "ignore",
               "send", "expire"]

_APPROVAL_HEADER = re.compile(r"^\s*(\d+)\s*;\s*nonce=([A-Za-z0-9_-]+)\s*$")
_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)\n?```", re.DOTALL)
_BLOCK_TAGS = re.compile(r"<\s*(br|/p|/div|/li|/tr|/h\d|/pre|/blockquote)\b[^>]*>", re.IGNORECASE)
_QUOTE_BLOCK = re.compile(r"<blockquote\b.*?</blockquote>", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"<[^>]*>")
_WORD = re.compile(r"[a-z]+")
_APPROVE = frozenset({"approve", "approved", "yes", "ok", "okay", "y", "lgtm"})
_DENY = frozenset({"deny", "denied", "no", "n", "reject"})


@dataclass(frozen=True, kw_only=True)
class Route:
    """What a mail carries that may name a held action."""

    nonces: tuple[str, ...] = ()
    """nonces from plus-addresses and the X-Pizzamail-Approval header"""
    message_ids: tuple[str, ...] = ()
    """In-Reply-To"""


@dataclass(frozen=True, kw_only=True)
class Decision:
    kind: Kind
    note: str = ""
    """the user's words for the agent: a deny reason or the feedback"""
    arguments: dict[str, Any] | None = None
    """edited arguments (``edit`` only)"""
    error: str = ""
    """why an edited block could not be read (``edit`` with ``arguments`` None)"""
    outgoing: str | None = None
    """``send``: the blob of the draft the user sent, as it is to be relayed"""
    recipients: tuple[str, ...] = ()
    """``send``: who it was sent to (the envelope, Bcc included)"""


def approval_header(action_id: int, nonce: str) -> str:
    return f"{action_id}; nonce={nonce}"


def parse_approval_header(value: str) -> tuple[int, str] | None:
    found = _APPROVAL_HEADER.match(value)
    return (int(found.group(1)), found.group(2)) if found else None


def plus_token(address: str) -> str | None:
    """``bot+tok@x`` -> ``tok``."""
    local = address.partition("@")[0]
    _, plus, token = local.partition("+")
    return token if plus and token else None


def route(msg: EmailMessage, recipients: list[str]) -> Route:
    nonces = [t for t in (plus_token(r) for r in recipients) if t]
    parsed = parse_approval_header(header_text(msg, "X-Pizzamail-Approval"))
    if parsed is not None:
        nonces.append(parsed[1])
    # In-Reply-To only: References of a later reply in the thread still name the request, and such
    # a reply is a new task, not a decision
    ids = message_ids(header_text(msg, "In-Reply-To"))
    return Route(nonces=tuple(dict.fromkeys(nonces)), message_ids=tuple(dict.fromkeys(ids)))


def parse_message(raw: bytes) -> EmailMessage:
    return parse_bytes(raw)


def reply_text(msg: EmailMessage) -> str:
    """The text the user wrote: plain (format=flowed unwrapped) or HTML-only, quotes removed."""
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
    """An HTML reply as text; quoted ``<blockquote>`` parts (how clients quote in HTML) are dropped."""
    markup = _QUOTE_BLOCK.sub("\n", markup)
    markup = re.sub(r"<(style|script|head)\b.*?</\1>", "", markup, flags=re.IGNORECASE | re.DOTALL)
    text = html.unescape(_TAGS.sub("", _BLOCK_TAGS.sub("\n", markup)))
    return "\n".join(line.strip() for line in text.split("\n"))


def own_words(text: str) -> str:
    """Drop ``>`` quotes, then let mail-parser-reply cut attributions, forwarded headers and
    signatures; whatever is left first is what the user wrote (top- or bottom-posted)."""
    fences = _FENCE.findall(text)
    unquoted = "\n".join(line for line in text.replace("\r\n", "\n").split("\n")
                         if not line.lstrip().startswith(">"))
    parsed = EmailReplyParser(languages=["en", "de", "fr", "es"]).read(unquoted)
    for reply in parsed.replies:
        body = str(reply.body).strip()
        if body:
            # the library strips each line; a fenced block the user kept is put back verbatim
            return _restore_fences(body, fences)
    return ""


def _restore_fences(body: str, fences: list[str]) -> str:
    found = _FENCE.search(body)
    if found is None or not fences:
        return body
    return body[:found.start(1)] + fences[0] + body[found.end(1):]


def decide(text: str) -> Decision:
    """The decision a reply's own words make."""
    fenced = _FENCE.search(text)
    if fenced is not None:
        return _edited(fenced.group(1))
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return Decision(kind="feedback", note="")
    words = _WORD.findall(lines[0].lower())
    first, rest = (words[0] if words else ""), " ".join(lines[1:])
    if first in _APPROVE:
        always = len(words) > 1 and words[1] in {"always", "forever"}
        return Decision(kind="approve_always" if always else "approve")
    if first in _DENY:
        reason = lines[0].split(None, 1)[1] if len(lines[0].split(None, 1)) > 1 else ""
        reason = reason.lstrip(":,.-\u2013 ").strip()
        return Decision(kind="deny", note=" ".join(p for p in (reason, rest) if p))
    if first in {"retry", "skip"} and len(words) == 1:
        return Decision(kind="retry" if first == "retry" else "skip")
    return Decision(kind="feedback", note=text.strip())


def _edited(block: str) -> Decision:
    try:
        value = json.loads(block)
    except ValueError as exc:
        return Decision(kind="edit", error=f"the arguments block is not valid JSON ({exc})")
    if not isinstance(value, dict):
        return Decision(kind="edit", error="the arguments block must be a JSON object ({...})")
    return Decision(kind="edit", arguments=value)


def _body_part(msg: EmailMessage) -> MIMEPart | None:
    try:
        return msg.get_body(preferencelist=("plain", "html"))
    except (KeyError, ValueError, IndexError, TypeError):
        return None


def _content(part: MIMEPart) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, "replace")
    except LookupError:
        return payload.decode("utf-8", "replace")
