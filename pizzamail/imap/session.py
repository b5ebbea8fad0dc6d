"""One IMAP connection's state machine: not authenticated -> authenticated -> selected -> logout.

A command is parsed, checked against the state, dispatched through one table, and answered;
every failure is a ``PizzamailError`` that renders itself (``imap_response``), caught in one
place. In the selected state the view catches up before and after each command, which is how
changes made elsewhere (other sessions, deliveries) reach this client.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

import pizzamail
from pizzamail.auth import Accounts
from pizzamail.errors import ImapError, PizzamailError
from pizzamail.imap import wire
from pizzamail.imap.parser import Command, NoArgs, Words, parse_command, peek_tag
from pizzamail.imap.view import RecentClaims, View
from pizzamail.mailbox import Mailbox

log = logging.getLogger(__name__)

CAPABILITIES_BEFORE_LOGIN = b"IMAP4rev1 SASL-IR LITERAL+ ID ENABLE IDLE AUTH=PLAIN"
CAPABILITIES = (b"IMAP4rev1 SASL-IR LITERAL+ ID ENABLE IDLE NAMESPACE UNSELECT UIDPLUS MOVE CHILDREN"
                b" SPECIAL-USE")
# Numbers in these commands are the client's sequence numbers: no EXPUNGE may be sent meanwhile.
_NUMBERED = {"FETCH", "STORE", "SEARCH", "COPY", "MOVE"}


class State(Enum):
    NOT_AUTHENTICATED = "not authenticated"
    AUTHENTICATED = "authenticated"
    SELECTED = "selected"
    LOGOUT = "logout"


class Connection(Protocol):
    """What a session needs from its connection."""

    async def send(self, data: bytes) -> None: ...

    async def read_line(self) -> bytes | None:
        """One client line (continuation data, IDLE's DONE); None when the client is gone."""
        ...


class SessionEnd(Exception):
    """Ends the connection after sending ``bye`` (autologout, too many failed logins)."""

    def __init__(self, bye: bytes) -> None:
        super().__init__(bye.decode("ascii", "replace"))
        self.bye = bye


@dataclass(kw_only=True)
class Limits:
    """Per-connection limits; the defaults are what ``pizzamail serve`` uses."""

    #: seconds a failed login waits before answering (slows password guessing)
    login_delay: float = 1.0
    #: failed logins after which the connection is closed
    max_failed_logins: int = 3
    #: autologout after this many idle seconds (RFC 3501 §5.4: at least 30 minutes)
    idle_timeout: float = 31 * 60
    #: longest command line, literals excluded
    max_line: int = 64 * 1024
    #: largest literal (an APPENDed message)
    max_literal: int = 64 * 1024 * 1024


@dataclass(kw_only=True)
class Shared:
    """What every session of one server shares."""

    mailbox: Mailbox
    accounts: Accounts
    limits: Limits
    claims: RecentClaims = field(default_factory=RecentClaims)


Handler = Callable[["Session", Command], Awaitable[bytes]]


@dataclass(frozen=True)
class Spec:
    handler: Handler
    states: frozenset[State]


class Session:
    def __init__(self, shared: Shared, conn: Connection, commands: dict[str, Spec]) -> None:
        self.shared = shared
        self.conn = conn
        self.commands = commands
        self.state = State.NOT_AUTHENTICATED
        self.view: View | None = None
        self.failed_logins = 0

    @property
    def mailbox(self) -> Mailbox:
        return self.shared.mailbox

    def selected(self) -> View:
        assert self.view is not None, "command table lets this run only when selected"
        return self.view

    def greeting(self) -> bytes:
        return b"* OK [CAPABILITY " + CAPABILITIES_BEFORE_LOGIN + b"] pizzamail ready\r\n"

    async def handle(self, raw: bytes) -> bool:
        """Run one framed command; False when the connection should close."""
        try:
            cmd = parse_command(raw)
        except PizzamailError as exc:
            await self.conn.send(exc.imap_response(peek_tag(raw) or b"*"))
            return True
        try:
            response = await self._run(cmd)
        except SessionEnd as end:
            await self.conn.send(end.bye)
            self.state = State.LOGOUT
            return False
        await self.conn.send(response)
        return self.state is not State.LOGOUT

    async def _run(self, cmd: Command) -> bytes:
        spec = self.commands[cmd.name]
        try:
            if self.state not in spec.states:
                raise ImapError(f"{cmd.name} is not allowed in the {self.state.value} state", bad=True)
            await self.catch_up(cmd)
            text = await spec.handler(self, cmd)
            response = cmd.tag + b" OK " + text + b"\r\n"
        except PizzamailError as exc:
            response = exc.imap_response(cmd.tag)
        except SessionEnd:
            raise
        except Exception:
            log.exception("IMAP command %s failed", cmd.name)
            response = cmd.tag + b" NO [SERVERBUG] Internal error, see the pizzamail log\r\n"
        if cmd.name not in ("LOGOUT", "IDLE"):
            await self.catch_up(cmd)
        return response

    async def catch_up(self, cmd: Command) -> None:
        """Announce what changed in the selected folder since this session last looked."""
        if self.view is None:
            return
        expunge_ok = cmd.uid or cmd.name not in _NUMBERED
        for line in await self.view.refresh(expunge_ok=expunge_ok):
            await self.conn.send(line)


# -- commands valid in any state ----------------------------------------------------------------


async def capability(s: Session, cmd: Command) -> bytes:
    caps = CAPABILITIES if s.state is not State.NOT_AUTHENTICATED else CAPABILITIES_BEFORE_LOGIN
    await s.conn.send(b"* CAPABILITY " + caps + b"\r\n")
    return b"CAPABILITY completed"


async def noop(s: Session, cmd: Command) -> bytes:
    return cmd.name.encode() + b" completed"


async def logout(s: Session, cmd: Command) -> bytes:
    await s.conn.send(b"* BYE pizzamail logging out\r\n")
    s.state = State.LOGOUT
    s.view = None
    return b"LOGOUT completed"


async def ident(s: Session, cmd: Command) -> bytes:
    cmd.arg(Words)  # what the client says about itself is only of interest to a debugger
    fields = [b'"name"', b'"pizzamail"', b'"version"', wire.quoted(pizzamail.__version__.encode())]
    await s.conn.send(b"* ID (" + b" ".join(fields) + b")\r\n")
    return b"ID completed"


async def enable(s: Session, cmd: Command) -> bytes:
    cmd.arg(Words)  # nothing we support needs enabling, so nothing gets enabled
    await s.conn.send(b"* ENABLED\r\n")
    return b"ENABLE completed"


async def namespace(s: Session, cmd: Command) -> bytes:
    cmd.arg(NoArgs)
    await s.conn.send(b'* NAMESPACE (("" "/")) NIL NIL\r\n')
    return b"NAMESPACE completed"


async def starttls(s: Session, cmd: Command) -> bytes:
    raise ImapError("STARTTLS is not offered on this listener")
