"""``Authentication-Results`` (RFC 8601) read into values, and what they prove of a sender. Pure; no I/O.

Anyone can write this header. Only a field whose authserv-id names the receiving server the owner
trusts is read, and of those only the topmost (the last one added, by that server): RFC 8601 §5 has
an MTA delete incoming fields that claim its own authserv-id, and a server that fails to still adds
its own above whatever a sender forged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_COMMENT = re.compile(r"\([^()]*\)")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, kw_only=True)
class MethodResult:
    """One ``method=result`` with its properties (``header.d``, ``header.from``, ``smtp.mailfrom`` …)."""

    method: str
    result: str
    props: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AuthResults:
    authserv_id: str
    results: tuple[MethodResult, ...]


def parse_authres(value: str) -> AuthResults | None:
    """One header value, comments dropped; None when it has no authserv-id."""
    text = _uncommented(value)
    head, *resinfos = _split_outside_quotes(text)
    words = head.split()
    if not words:
        return None
    results = tuple(r for r in map(_method_result, resinfos) if r is not None)
    return AuthResults(authserv_id=words[0].lower(), results=results)


def trusted(values: Iterable[str], authserv_id: str) -> AuthResults | None:
    """The topmost field of ``authserv_id`` among a mail's fields (in header order); None when the
    id is not configured (empty) or no field has it."""
    if not authserv_id:
        return None
    wanted = authserv_id.lower()
    for value in values:
        parsed = parse_authres(value)
        if parsed is not None and parsed.authserv_id == wanted:
            return parsed
    return None


def vouches_for(results: AuthResults, domain: str) -> str | None:
    """How ``results`` show mail From ``domain`` is that domain's own: ``dmarc=pass`` (for that From
    domain), or ``dkim=pass`` signed by the domain itself (``header.d``, or ``header.i`` in it); None
    when nothing passed for it."""
    domain = domain.lower()
    for r in results.results:
        if r.result != "pass":
            continue
        if r.method == "dmarc" and r.props.get("header.from", domain).lower() == domain:
            return f"dmarc=pass from {results.authserv_id}"
        signer = r.props.get("header.d", "").lower() or r.props.get("header.i", "").rpartition("@")[2].lower()
        if r.method == "dkim" and signer == domain:
            return f"dkim=pass (d={domain}) from {results.authserv_id}"
    return None


def _uncommented(value: str) -> str:
    """Without ``(comments)``, nested ones too, and unfolded."""
    text, previous = " ".join(value.split()), None
    while text != previous:
        previous, text = text, _COMMENT.sub(" ", text)
    return text


def _split_outside_quotes(text: str) -> list[str]:
    """At each ``;`` not inside a quoted string."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == ";" and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def _method_result(resinfo: str) -> MethodResult | None:
    """``dkim=pass header.d=example.com header.s=sel`` (a version after ``/`` in the method is dropped);
    None for ``none`` and anything without ``method=result``."""
    words = resinfo.split()
    if not words or "=" not in words[0]:
        return None
    method, _, result = words[0].partition("=")
    props = {}
    for word in words[1:]:
        name, equals, value = word.partition("=")
        if equals and "." in name:
            props[name.lower()] = _unquoted(value)
    return MethodResult(method=method.partition("/")[0].lower(), result=result.lower(), props=props)


def _unquoted(value: str) -> str:
    found = _QUOTED.fullmatch(value)
    return found[1] if found else value
