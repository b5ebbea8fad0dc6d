"""Before login: STARTTLS, LOGIN and AUTHENTICATE PLAIN/LOGIN (with SASL-IR or continuations),
with throttled failures. A password is accepted only over TLS or from this machine."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import ssl

from pizzamail.auth import login_name
from pizzamail.errors import ImapError
from pizzamail.imap.parser import Authenticate, Command, Login
from pizzamail.imap.session import ANSWERED, Session, SessionEnd, State, ok

log = logging.getLogger("pizzamail.imap")

_USERNAME_PROMPT = base64.b64encode(b"Username:")
_PASSWORD_PROMPT = base64.b64encode(b"Password:")


async def starttls(s: Session, cmd: Command) -> bytes:
    """RFC 3501 §6.2.1: answer OK in the clear, then handshake; the client asks CAPABILITY again."""
    context = s.shared.tls
    if context is None:
        raise ImapError("STARTTLS is not offered on this listener")
    if s.conn.secure:
        raise ImapError("TLS is already active", bad=True)
    await s.conn.send(ok(cmd, b"Begin TLS negotiation now"))
    try:
        await s.conn.start_tls(context, s.shared.limits.tls_handshake_timeout)
    except (ssl.SSLError, ConnectionError, TimeoutError) as exc:
        raise SessionEnd(b"") from exc  # no channel left to say anything on
    return ANSWERED


def _require_privacy(s: Session) -> None:
    if not s.plaintext_ok:
        raise ImapError("use STARTTLS or the TLS port before sending a password", code="PRIVACYREQUIRED")


async def login(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Login)
    _require_privacy(s)
    return await _check(s, args.user, args.password)


async def authenticate(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Authenticate)
    if args.mechanism not in ("PLAIN", "LOGIN"):
        raise ImapError(f"unsupported mechanism {args.mechanism}; use PLAIN or LOGIN")
    _require_privacy(s)
    if args.mechanism == "LOGIN":
        user = _b64(args.initial if args.initial is not None else await _challenge(s, _USERNAME_PROMPT))
        password = _b64(await _challenge(s, _PASSWORD_PROMPT))
        return await _check(s, user, password)
    response = args.initial if args.initial is not None else await _challenge(s, b"")
    authzid, user, password = _plain(response)
    if authzid and authzid != user:
        raise ImapError("logging in as another user is not supported", code="AUTHORIZATIONFAILED")
    return await _check(s, user, password)


async def _challenge(s: Session, prompt: bytes) -> bytes:
    """Send one SASL challenge and return the client's answer (still base64)."""
    await s.conn.send(b"+ " + prompt + b"\r\n")
    line = await s.conn.read_line()
    if line is None:
        raise SessionEnd(b"")
    answer = line.strip()
    if answer == b"*":
        raise ImapError("AUTHENTICATE cancelled", bad=True)
    return answer


def _b64(data: bytes) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error as exc:
        raise ImapError("invalid base64 in AUTHENTICATE", bad=True) from exc


def _plain(response: bytes) -> tuple[bytes, bytes, bytes]:
    """RFC 4616: base64 of ``authzid NUL authcid NUL passwd``."""
    parts = _b64(response).split(b"\x00")
    if len(parts) != 3:
        raise ImapError("AUTHENTICATE PLAIN needs authzid, user and password", bad=True)
    return parts[0], parts[1], parts[2]


async def _check(s: Session, user: bytes, password: bytes) -> bytes:
    # the gate orders and rates the checks of every connection, SMTP's too
    if await s.shared.gate.check(s.conn.visitor, lambda: s.shared.accounts.check(user, password) or None):
        s.state = State.AUTHENTICATED
        s.shared.on_login(s.conn)
        return b"[CAPABILITY " + s.capabilities() + b"] Logged in"
    s.failed_logins += 1
    log.warning("IMAP login failed for user %s from %s", login_name(user), s.conn.peer)
    limits = s.shared.limits
    # The delay slows a guessing connection further; the limit ends it.
    await asyncio.sleep(limits.login_delay)
    if s.failed_logins >= limits.max_failed_logins:
        await s.conn.send(b"* BYE Too many failed logins\r\n")
        s.state = State.LOGOUT
    raise ImapError("Authentication failed.", code="AUTHENTICATIONFAILED")
