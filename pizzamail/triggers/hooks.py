"""Webhooks, the pure part: reading a delivery's payload and rendering its prompt (checking who sent
it is :mod:`pizzamail.triggers.signatures`).

Both are bounded, because the payload comes from outside: JSON deeper than :data:`MAX_DEPTH` is
refused before it is parsed, and a prompt is rendered only up to a length limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs

from pizzamail.errors import HttpRefusal
from pizzamail.when.templates import TEMPLATES

#: deepest JSON nesting accepted (real payloads nest a handful of levels; Python's parser and printer
#: recurse once per level, so a payload 100,000 levels deep must be refused before they see it)
MAX_DEPTH = 64
#: what opens or closes a level, or a string (whose brackets do not count) begins or ends; an escape
#: is matched whole, so an escaped quote does not end a string (one pass, no backtracking)
_JSON_MARKS = re.compile(r'\\.|["\[\]{}]', re.DOTALL)
#: lone UTF-16 surrogates: JSON may spell them ("\ud800"), but no mail can carry them
_SURROGATES = re.compile("[\ud800-\udfff]")


def read_payload(content_type: str, body: bytes) -> Any:
    """JSON, form fields (a dict; lists for repeated names) or text."""
    kind = content_type.split(";")[0].strip().lower()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise HttpRefusal(400, "the body is not UTF-8") from None
    if kind == "application/json" or kind.endswith("+json"):
        return read_json(text)
    if kind == "application/x-www-form-urlencoded":
        fields = parse_qs(text, keep_blank_values=True)
        return {k: v[0] if len(v) == 1 else v for k, v in fields.items()}
    return text


def read_json(text: str) -> Any:
    if not text.strip():
        return None
    if json_depth(text) > MAX_DEPTH:
        raise HttpRefusal(400, f"malformed JSON: nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise HttpRefusal(400, f"malformed JSON: {exc.msg} at {where}") from None
    except ValueError:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise HttpRefusal(400, "malformed JSON: a number too long to read") from None


def json_depth(text: str, *, stop: int = MAX_DEPTH) -> int:
    """How deep ``text`` nests, counted without parsing it (at most ``stop + 1``: enough to refuse)."""
    depth = deepest = 0
    in_string = False
    for mark in _JSON_MARKS.finditer(text):
        char = mark.group()
        if char == '"':
            in_string = not in_string
        elif in_string or len(char) == 2:
            continue
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > stop:
                break
        else:  # never below 0: a stray closer must not make room for more openers
            depth = max(depth - 1, 0)
    return deepest


def render_prompt(template: str, payload: Any, *, hook: str, limit: int) -> str:
    """The task text: the hook's template given ``payload`` (default: the payload pretty-printed).

    A payload whose pretty form would pass ``limit`` characters is shown compact (about its own size);
    a rendering past ``limit`` is refused (413), and so is a template failing on this payload (422).
    """
    shown = payload if isinstance(payload, str) else _pretty(payload, limit)
    if not template:
        return _text(f"A delivery to webhook {hook!r}:\n\n{shown}")
    try:
        parts = TEMPLATES.from_string(template).generate(payload=payload, hook=hook, payload_text=shown)
        text = _joined(parts, limit)
    except Exception as exc:  # any error (1 / 0, "a" + 1 …): the template runs on someone else's data
        raise HttpRefusal(422, "the hook's prompt template cannot render this payload",
                          detail=f"the prompt template failed: {type(exc).__name__}: {exc}") from None
    if text is None:
        raise HttpRefusal(413, f"the prompt rendered from this payload is longer than {limit} characters")
    return _text(text)


def _pretty(payload: Any, limit: int) -> str:
    # indentation grows with depth: 60 levels turn each "0," of a list into a 124-character line
    pretty = _joined(json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(payload), limit)
    return pretty if pretty is not None else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _joined(parts: Iterable[str], limit: int) -> str | None:
    """The parts joined, or None once they pass ``limit`` characters (the rest is never made)."""
    kept, size = [], 0
    for part in parts:
        size += len(part)
        if size > limit:
            return None
        kept.append(part)
    return "".join(kept)


def _text(text: str) -> str:
    return _SURROGATES.sub("\ufffd", text)
