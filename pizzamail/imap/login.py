"""LOGIN and AUTHENTICATE PLAIN (with SASL-IR or a continuation), with throttled failures."""

from __future__ import annotations

import asyncio
import base64
import binascii

from pizzamail.errors import ImapError
from pizzamail.imap.parser import Authenticate, Command, Login
from pizzamail.imap.session import CAPABILITIES, Session, SessionEnd, State


async def login(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Login)
    return await _check(s, args.user, args.password)


async def authenticate(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Authenticate)
    if args.mechanism != "PLAIN":
        raise ImapError(f"unsupported mechanism {args.mechanism}; use PLAIN")
    response = args.initial
    if response is None:
        await s.conn.send(b"+ \r\n")
        line = await s.conn.read_line()
        if line is None:
            raise SessionEnd(b"")
        response = line.strip()
    if response == b"*":
        raise ImapError("AUTHENTICATE cancelled", bad=True)
    authzid, user, password = _plain(response)
    if authzid and authzid != user:
        raise ImapError("logging in as another user is not supported", code="AUTHORIZATIONFAILED")
    return await _check(s, user, password)


def _plain(response: bytes) -> tuple[bytes, bytes, bytes]:
    """RFC 4616: base64 of ``authzid NUL authcid NUL passwd``."""
    try:
        decoded = base64.b64decode(response, validate=True)
    except binascii.Error as exc:
        raise ImapError("invalid base64 in AUTHENTICATE PLAIN", bad=True) from exc
    parts = decoded.split(b"\x00")
    if len(parts) != 3:
        raise ImapError("AUTHENTICATE PLAIN needs authzid, user and password", bad=True)
    return parts[0], parts[1], parts[2]


async def _check(s: Session, user: bytes, password: bytes) -> bytes:
    if s.shared.accounts.check(user, password):
        s.state = State.AUTHENTICATED
        return b"[CAPABILITY " + CAPABILITIES + b"] Logged in"
    s.failed_logins += 1
    limits = s.shared.limits
    # The delay makes password guessing slow; the limit ends a guessing connection.
    await asyncio.sleep(limits.login_delay)
    if s.failed_logins >= limits.max_failed_logins:
        await s.conn.send(b"* BYE Too many failed logins\r\n")
        s.state = State.LOGOUT
    raise ImapError("Authentication failed.", code="AUTHENTICATIONFAILED")
