"""Webhooks, the pure part: authenticating a delivery, reading its payload, rendering the prompt.

HMAC deliveries carry ``X-Pizzamail-Timestamp`` (Unix seconds), ``X-Pizzamail-Delivery`` (an id)
and ``X-Pizzamail-Signature: sha256=<hex>`` over ``timestamp + "." + body`` keyed with the hook's
secret (``pizzamail keys set hook:NAME``). A timestamp outside :data:`REPLAY_WINDOW` is refused; a
delivery id seen before is refused by the store (see the web app). Simple senders use
``Authorization: Bearer <secret>`` instead (``auth = "bearer"``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

import jinja2
import jinja2.sandbox

REPLAY_WINDOW = 300


class Rejected(Exception):
    """A delivery refused with an HTTP status and a short reason (rendered as JSON by the app)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header value a sender computes (also used by tests and docs)."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def check_hmac(secret: str, headers: Mapping[str, str], body: bytes, *, now: float | None = None) -> str:
    """Verify a signed delivery; returns its delivery id."""
    signature = headers.get("x-pizzamail-signature", "")
    timestamp = headers.get("x-pizzamail-timestamp", "")
    delivery = headers.get("x-pizzamail-delivery", "")
    if not (signature and timestamp and delivery):
        raise Rejected(401, "missing X-Pizzamail-Signature, X-Pizzamail-Timestamp or X-Pizzamail-Delivery")
    if not hmac.compare_digest(signature, sign(secret, timestamp, body)):
        raise Rejected(401, "bad signature")
    try:
        age = (time.time() if now is None else now) - int(timestamp)
    except ValueError:
        raise Rejected(400, "X-Pizzamail-Timestamp must be Unix seconds") from None
    if abs(age) > REPLAY_WINDOW:
        raise Rejected(409, f"timestamp outside the {REPLAY_WINDOW} s replay window")
    if len(delivery) > 200:
        raise Rejected(400, "X-Pizzamail-Delivery is too long")
    return delivery


def check_bearer(secret: str, headers: Mapping[str, str]) -> None:
    given = headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {secret}".encode()):
        raise Rejected(401, "missing or wrong Authorization: Bearer secret")


def read_payload(content_type: str, body: bytes) -> Any:
    """JSON, form fields (a dict; lists for repeated names) or text."""
    kind = content_type.split(";")[0].strip().lower()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Rejected(400, "the body is not UTF-8") from None
    if kind == "application/json" or kind.endswith("+json"):
        try:
            return json.loads(text) if text.strip() else None
        except json.JSONDecodeError as exc:
            raise Rejected(400, f"malformed JSON: {exc}") from None
    if kind == "application/x-www-form-urlencoded":
        fields = parse_qs(text, keep_blank_values=True)
        return {k: v[0] if len(v) == 1 else v for k, v in fields.items()}
    return text


#: the one sandboxed environment for every trigger's prompt template (hooks, watched mailboxes): a
#: template comes from config, its variables from outside senders
TEMPLATES = jinja2.sandbox.ImmutableSandboxedEnvironment(
    undefined=jinja2.ChainableUndefined, autoescape=False)


def template_problem(source: str) -> str | None:
    try:
        TEMPLATES.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        return f"a Jinja2 template ({exc.message}, line {exc.lineno})"
    return None


def render_prompt(template: str, payload: Any, *, hook: str) -> str:
    """The task text: the hook's template given ``payload`` (default: the payload pretty-printed)."""
    pretty = payload if isinstance(payload, str) else json.dumps(payload, indent=2, ensure_ascii=False)
    if not template:
        return f"A delivery to webhook {hook!r}:\n\n{pretty}"
    try:
        return TEMPLATES.from_string(template).render(payload=payload, hook=hook, payload_text=pretty)
    except jinja2.TemplateError as exc:
        raise Rejected(422, f"the hook's prompt template failed on this payload: {exc}") from None
