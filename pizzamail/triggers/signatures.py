"""How a webhook delivery proves who sent it: one check per ``[hooks.NAME] auth`` scheme.

- ``hmac``, pizzamail's own: ``X-Pizzamail-Timestamp`` (Unix seconds), ``X-Pizzamail-Delivery`` (an id)
  and ``X-Pizzamail-Signature: sha256=<hex>``, the HMAC-SHA256 of ``timestamp + "." + body`` keyed with
  the secret as written. The delivery id is not signed, so an id alone cannot stop a replay: the
  signature itself is accepted once (the web app remembers it while its timestamp is in the window).
- ``standard``, Standard Webhooks (standardwebhooks.com): ``webhook-id``, ``webhook-timestamp`` and
  ``webhook-signature``, a space-separated list of ``v1,<base64>`` over ``id + "." + timestamp + "." +
  body``; one matching entry is enough (senders list two while they rotate keys). A secret written
  ``whsec_<base64>`` is those bytes, as the scheme defines; any other secret is its own UTF-8 bytes.
- ``bearer``: ``Authorization: Bearer <secret>``, for senders that cannot sign. Nothing is signed, so
  only an optional ``X-Pizzamail-Delivery`` id is remembered.

Checks that need no secret (headers present and well formed) come first; the timestamp window is
checked only once the signature holds, so an unsigned request learns nothing about this server.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from pizzamail.errors import HttpRefusal

#: seconds a signed timestamp may be behind or ahead of this server's clock
WINDOW = 300
#: ASCII digits only (int() would also read other scripts' digits), at most 12 of them
_SECONDS = re.compile(r"[0-9]{1,12}")
#: delivery ids: visible ASCII, so the bytes signed are the characters seen
_DELIVERY_ID = re.compile(r"[\x21-\x7e]{1,200}")


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """What a passed check tells the app to remember, so the same delivery is never run twice."""

    id: str
    """the sender's delivery id ('' when a bearer sender gives none)"""
    digest: str = ""
    """the hex HMAC that authenticated it ('' for bearer)"""
    signed_at: int = 0
    """its signed Unix timestamp (0 for bearer)"""


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Pizzamail-Signature`` value a sender computes (``hmac`` scheme)."""
    return "sha256=" + _hmac(secret.encode(), timestamp.encode() + b"." + body).hex()


def sign_standard(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """One ``webhook-signature`` entry, ``v1,<base64>`` (``standard`` scheme)."""
    digest = _hmac(standard_key(secret), f"{msg_id}.{timestamp}.".encode() + body)
    return "v1," + base64.b64encode(digest).decode()


def standard_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True) or secret.encode()
        except binascii.Error:
            pass  # not base64 after all: the sender most likely keys with the text as it is
    return secret.encode()


def check(scheme: str, secret: str, headers: Mapping[str, str], body: bytes, *,
          now: float | None = None) -> Delivery:
    """The delivery's identity, or :class:`HttpRefusal` (401 unsigned, 400 malformed, 409 stale)."""
    return _CHECKS[scheme](secret, headers, body, time.time() if now is None else now)


def _check_hmac(secret: str, headers: Mapping[str, str], body: bytes, now: float) -> Delivery:
    signature, stamp, delivery = (headers.get(f"x-pizzamail-{h}", "") for h in
                                  ("signature", "timestamp", "delivery"))
    if not (signature and stamp and delivery):
        raise HttpRefusal(401, "missing X-Pizzamail-Signature, X-Pizzamail-Timestamp or X-Pizzamail-Delivery")
    at = _seconds(stamp, "X-Pizzamail-Timestamp")
    _delivery_id(delivery, "X-Pizzamail-Delivery")
    digest = _hmac(secret.encode(), stamp.encode() + b"." + body)
    if not hmac.compare_digest(signature.encode(), b"sha256=" + digest.hex().encode()):
        raise HttpRefusal(401, "bad signature")
    _in_window(at, now)
    return Delivery(id=delivery, digest=digest.hex(), signed_at=at)


def _check_standard(secret: str, headers: Mapping[str, str], body: bytes, now: float) -> Delivery:
    msg_id, stamp, signatures = (headers.get(f"webhook-{h}", "") for h in ("id", "timestamp", "signature"))
    if not (msg_id and stamp and signatures):
        raise HttpRefusal(401, "missing webhook-id, webhook-timestamp or webhook-signature")
    at = _seconds(stamp, "webhook-timestamp")
    _delivery_id(msg_id, "webhook-id")
    if "." in msg_id:  # the id is followed by "." in the signed text: a dot would make it ambiguous
        raise HttpRefusal(400, "webhook-id must not contain '.'")
    digest = _hmac(standard_key(secret), f"{msg_id}.{stamp}.".encode() + body)
    if not any(hmac.compare_digest(given, digest) for given in _v1_entries(signatures)):
        raise HttpRefusal(401, "no valid v1 signature in webhook-signature")
    _in_window(at, now)
    return Delivery(id=msg_id, digest=digest.hex(), signed_at=at)


def _check_bearer(secret: str, headers: Mapping[str, str], body: bytes, now: float) -> Delivery:
    if not hmac.compare_digest(headers.get("authorization", "").encode(), f"Bearer {secret}".encode()):
        raise HttpRefusal(401, "missing or wrong Authorization: Bearer secret")
    delivery = headers.get("x-pizzamail-delivery", "")
    if delivery:
        _delivery_id(delivery, "X-Pizzamail-Delivery")
    return Delivery(id=delivery)


_CHECKS: dict[str, Callable[[str, Mapping[str, str], bytes, float], Delivery]] = {
    "hmac": _check_hmac, "standard": _check_standard, "bearer": _check_bearer}


def _v1_entries(header: str) -> Iterator[bytes]:
    """The decoded ``v1`` signatures of a ``webhook-signature`` list; other versions and junk skipped."""
    for entry in header.split():
        version, _, value = entry.partition(",")
        if version == "v1":
            try:
                yield base64.b64decode(value, validate=True)
            except binascii.Error:
                continue


def _seconds(value: str, header: str) -> int:
    if not _SECONDS.fullmatch(value):
        raise HttpRefusal(400, f"{header} must be Unix seconds (ASCII digits)")
    return int(value)


def _delivery_id(value: str, header: str) -> None:
    if not _DELIVERY_ID.fullmatch(value):
        raise HttpRefusal(400, f"{header} must be 1 to 200 visible ASCII characters")


def _in_window(at: int, now: float) -> None:
    age = int(now - at)
    if age > WINDOW:
        raise HttpRefusal(409, f"timestamp {age} s old, outside the {WINDOW} s window: a replay is not"
                               " run again (if this is a retry, sign it anew)")
    if age < -WINDOW:
        raise HttpRefusal(409, f"timestamp {-age} s in the future, outside the {WINDOW} s window:"
                               " check the sender's clock")


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()
