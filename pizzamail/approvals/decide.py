"""Pure parsing of approval replies: which held action a mail answers, and what it decides. No I/O.

Routing: a reply names its action by any one of the plus-address nonce (``bot+<nonce>@…``, the
request's Reply-To), the ``X-Pizzamail-Approval`` header (``<id>; nonce=<nonce>``) or In-Reply-To /
References naming the request's Message-ID. The nonce is the proof; the id alone never is.

The decision is read only from the words the user wrote themselves (:mod:`reading`), by the rule in
:mod:`words`: an approval is nothing but approval words and courtesies. A question, a condition or a
change of mind is feedback for the agent (which then asks back); a reply that says nothing readable
(empty, only quoted text, "yes no") is ``unclear``: nothing changes and the user is told why. An
edited arguments block is an approval with edits only when nothing but consent stands around it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any, Literal

from pizzamail.approvals.reading import reply_texts
from pizzamail.approvals.words import (
    ALWAYS,
    APPROVE,
    CHANGE_OF_MIND,
    DENY,
    EDIT,
    NOT_A_DENIAL,
    QUESTION,
    RETRY,
    SKIP,
    STOP,
    STRONG_APPROVE,
    Words,
)
from pizzamail.mail.ids import message_ids
from pizzamail.mail.parse import header_text
from pizzamail.mail.reply import without_device_lines

Kind = Literal["approve", "approve_always", "deny", "edit", "feedback", "retry", "skip", "ignore",
               "send", "expire", "unclear"]

NOTHING_SAID = ("your reply has no words of your own to read as a decision (quoted text never counts,"
                " nor does a courtesy alone)")
MIXED = ("your reply has only words of a decision, but they do not say one thing (a question mark or"
         " a trailing \"…\" counts as a doubt)")

DISAGREE = ("the parts of your reply do not say the same thing (its plain-text and HTML versions, or"
            " text hidden in it, would decide differently)")

_APPROVAL_HEADER = re.compile(r"^\s*(\d+)\s*;\s*nonce=([A-Za-z0-9_-]+)\s*$")
_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)\n?```", re.DOTALL)
#: a block starts a line, or follows a colon on it: a composer's plain part may run "use this:" and
#: the block into one line
_LOOSE_BLOCK = re.compile(r"(?:^|:)[ \t]*(\{)", re.MULTILINE)
_DECODER = json.JSONDecoder()
DECISION_WORDS = APPROVE | ALWAYS | DENY | RETRY | SKIP


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
    """why an edited block could not be read (``edit`` with ``arguments`` None), or why a reply
    decided nothing (``unclear``)"""
    outgoing: str | None = None
    """``send``: the blob of the draft the user sent, as it is to be relayed"""
    recipients: tuple[str, ...] = ()
    """``send``: who it was sent to (the envelope, Bcc included)"""
    sent: str = ""
    """``send`` of a draft the user's own provider already sent (IMAP mode, found in Sent): what the
    agent is told it became; the action ends ``done`` with it and pizzamail relays nothing"""


def approval_header(action_id: int, nonce: str) -> str:
    return f"{action_id}; nonce={nonce}"


def parse_approval_header(value: str) -> tuple[int, str] | None:
    found = _APPROVAL_HEADER.match(value)
    return (int(found.group(1)), found.group(2)) if found else None


def plus_token(address: str) -> str | None:
    """``bot+tok@x`` -> ``tok``; ``me+bot+tok@x`` (an agent at a plus-address of the owner's) -> ``tok``."""
    local = address.partition("@")[0]
    _, plus, token = local.rpartition("+")
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


def read_decision(msg: EmailMessage) -> Decision:
    """The decision a reply mail makes: its own words (:mod:`reading`), its sender's name set aside.

    The words are read as the reply's HTML shows them; when another form of the same reply (its
    plain-text part, or its HTML with hidden text shown) would not run the same thing, nothing runs:
    which form a person saw cannot be known, and the forms of an honest reply agree."""
    names = sender_names(msg)
    shown, *others = reply_texts(msg)
    decision = decide(shown, names=names)
    if releases(decision) and any(_differs(decide(o, names=names), decision) for o in others):
        return _unclear(DISAGREE)
    return decision


def asks_to_stop(msg: EmailMessage) -> bool:
    """Whether a reply says nothing but "stop" (or "cancel"), read like an approval: in every form
    of the reply (:func:`reading.reply_texts`), its quotes, signature, device line and the sender's
    name set aside, courtesies allowed ("stop please"), no question, no other word."""
    names = sender_names(msg)
    return all(_only_stop(text, names) for text in reply_texts(msg))


def _only_stop(text: str, names: Iterable[str]) -> bool:
    words = Words.of(without_device_lines(text.strip()), names)
    return words.only(STOP) and words.has(STOP)


def releases(decision: Decision) -> bool:
    """Whether ``decision`` lets the held call run."""
    return decision.kind in ("approve", "approve_always", "retry") or (
        decision.kind == "edit" and decision.arguments is not None)


def _differs(one: Decision, other: Decision) -> bool:
    return (one.kind, one.arguments) != (other.kind, other.arguments)


def sender_names(msg: EmailMessage) -> tuple[str, ...]:
    try:
        return tuple(a.display_name for a in getattr(msg["From"], "addresses", ()) if a.display_name)
    except (TypeError, ValueError, IndexError):  # a From the parser could not read
        return ()


def decide(text: str, *, names: Iterable[str] = ()) -> Decision:
    """The decision a reply's own words make (the rule: :mod:`words`)."""
    text = without_device_lines(text.strip())
    block, rest = arguments_block(text)
    words = Words.of(rest, names)
    if block is not None:
        return _edited(block, words, text)
    if not words.meaningful and not words.questioning:
        return _unclear(NOTHING_SAID)
    if words.only(APPROVE, ALWAYS) and words.has(APPROVE):
        return Decision(kind="approve_always" if words.has(ALWAYS) else "approve")
    for kind, vocabulary in (("retry", RETRY), ("skip", SKIP)):
        if words.only(vocabulary) and words.has(vocabulary):
            return Decision(kind=kind)  # type: ignore[arg-type]
    denial = _denial(text, words)
    if denial is not None:
        return denial
    if not words.numbers and all(w in DECISION_WORDS for w in words.meaningful):
        return _unclear(MIXED)  # "yes no", "always", "ok…": decision words that decide nothing
    return Decision(kind="feedback", note=text)


def arguments_block(text: str) -> tuple[str | None, str]:
    """An arguments block the user sent back — fenced, or (as an HTML composer leaves it) a line
    starting with ``{`` or a ``{`` after a colon — and the text around it."""
    fenced = _FENCE.search(text)
    if fenced is not None:
        return fenced.group(1), text[:fenced.start()] + "\n" + text[fenced.end():]
    loose = _LOOSE_BLOCK.search(text)
    if loose is None:
        return None, text
    start = loose.start(1)
    try:
        _, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return text[start:], text[:start]
    return text[start:end], text[:start] + "\n" + text[end:]


def _denial(text: str, words: Words) -> Decision | None:
    """``deny`` / ``no`` first, then the reason — unless it questions, takes it back or means yes."""
    first_line = text.split("\n", 1)[0]
    meaningful = words.meaningful
    if not meaningful or meaningful[0] not in DENY or any(q in first_line for q in QUESTION):
        return None
    after = meaningful[1:]
    if (after and after[0] in NOT_A_DENIAL) or any(w in STRONG_APPROVE or w in CHANGE_OF_MIND for w in after):
        return None
    said = next((w for w in re.finditer(r"[^\W\d_]+", text) if w.group().lower() in DENY), None)
    reason = text[said.end():] if said else ""
    return Decision(kind="deny", note=" ".join(reason.lstrip(":,.-\u2013\u2014! ").split()))


def _unclear(why: str) -> Decision:
    return Decision(kind="unclear", error=why)


def _edited(block: str, around: Words, text: str) -> Decision:
    """An edit when only consent stands around the block; with a question, a condition or more
    words it is feedback (the agent sees the block and can ask again with it)."""
    if not around.only(APPROVE, EDIT):
        return Decision(kind="feedback", note=text)
    try:
        value = json.loads(block, parse_constant=_no_constant, parse_float=_finite,
                           object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        return Decision(kind="edit", error=f"the arguments block is not valid JSON ({why})")
    if not isinstance(value, dict):
        return Decision(kind="edit", error="the arguments block must be a JSON object ({...})")
    return Decision(kind="edit", arguments=value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large a number")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A key given twice could be read either way (a person reads the first, JSON parsers take the
    last): the block must say one thing."""
    found = dict(pairs)
    if len(found) != len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if any(k == o for o, _ in pairs[:i]))
        raise ValueError(f"{twice!r} is given more than once")
    return found
