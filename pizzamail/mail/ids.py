"""Message-IDs. Pure; no I/O.

pizzamail keeps a Message-ID without its angle brackets everywhere (the store, the composer's
context, a trigger's thread chain) and adds them only in a header: :func:`bracketed` on the way out,
:func:`message_ids`/:func:`bare` on the way in.
"""

from __future__ import annotations

import email.utils
import re

_MSGID = re.compile(r"<([^<>\s]+)>")


def new_message_id(domain: str, *, idstring: str | None = None) -> str:
    """A fresh, unique Message-ID at ``domain``, without angle brackets."""
    return email.utils.make_msgid(idstring=idstring, domain=domain)[1:-1]


def bracketed(message_id: str) -> str:
    """The form a header carries: ``<id>``."""
    return f"<{bare(message_id)}>"


def bare(message_id: str) -> str:
    """``<id>`` (or ``id``, as older rows kept some) as the store keeps it: ``id``."""
    return message_id.strip().strip("<>")


def message_ids(value: str) -> list[str]:
    """The bracketed ids in a header value (References, In-Reply-To), without their brackets."""
    return _MSGID.findall(value)


def first_id(value: str) -> str | None:
    ids = message_ids(value)
    return ids[0] if ids else None
