"""What the server advertises, which depends on the connection: before login it depends on
whether the channel is private (TLS or loopback) and whether STARTTLS is on offer.

Pure; the list is exactly what is implemented, so a client never tries an extension we lack.
"""

from __future__ import annotations

import ipaddress

_ALWAYS = (b"IMAP4rev1", b"SASL-IR", b"LITERAL+", b"ID", b"ENABLE", b"IDLE")
_MECHANISMS = (b"AUTH=PLAIN", b"AUTH=LOGIN")
_AFTER_LOGIN = (
    b"NAMESPACE", b"UNSELECT", b"UIDPLUS", b"MOVE", b"CHILDREN", b"SPECIAL-USE", b"CONDSTORE",
    b"QRESYNC", b"LIST-EXTENDED", b"LIST-STATUS", b"BINARY",
)

#: what ENABLE can turn on (RFC 5161); QRESYNC implies CONDSTORE
ENABLEABLE = frozenset({"CONDSTORE", "QRESYNC"})


def before_login(*, starttls: bool, plaintext_ok: bool) -> bytes:
    """RFC 3501 §6.2.3 / §7.2.1: with no private channel, LOGINDISABLED and no mechanisms."""
    words = list(_ALWAYS)
    if starttls:
        words.append(b"STARTTLS")
    words += _MECHANISMS if plaintext_ok else [b"LOGINDISABLED"]
    return b" ".join(words)


def after_login() -> bytes:
    return b" ".join(_ALWAYS + _AFTER_LOGIN)


def peer_is_loopback(peername: object) -> bool:
    """Whether a socket peer (``getpeername()``) is this machine: 127/8, ::1, ::ffff:127.x."""
    if not isinstance(peername, tuple) or not peername or not isinstance(peername[0], str):
        return False
    try:
        address = ipaddress.ip_address(peername[0].split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
