"""One IMAP connection's state machine: not authenticated -> authenticated -> selected -> logout.

A command is parsed, checked against the state, dispatched through one table, and answered;
every failure is a ``PizzamailError`` that renders itself (``imap_response``), caught in one
place. In the selected state the view catches up before and after each command, which is how
changes made elsewhere (other sessions, deliveries) reach this client.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

import pizzamail
from pizzamail.auth import Accounts
from pizzamail.errors import ImapError, PizzamailError, Unavailable, transient
from pizzamail.guard import Gate, Visitor
from pizzamail.imap import capabilities, wire
from pizzamail.imap.parser import Command, NoArgs, Words, parse_command, peek_tag
from pizzamail.imap.view import Extensions, View
from pizzamail.mailbox import MailIndex

log = logging.getLogger(__name__)

#: what a handler returns when it has already sent its tagged response itself (STARTTLS must
#: answer before its handshake, not after)
ANSWERED = b""
# Numbers in these commands are the client's sequence numbers: no EXPUNGE may be sent meanwhile.
_NUMBERED = {"FETCH", "STORE", "SEARCH", "COPY", "MOVE"}


class State(Enum):
    NOT_AUTHENTICATED = "not authenticated"
    AUTHENTICATED = "authenticated"
    SELECTED = "selected"
    LOGOUT = "logout"


class Connection(Protocol):
    """What a session needs from its connection."""

    #: the channel is encrypted (implicit TLS, or STARTTLS done)
    secure: bool
    #: the peer is this machine, so a plain-text password never crosses a network
    local: bool
    #: its place at the gate, where its password checks wait their turn
    visitor: Visitor
    #: the client's address and port, for the log
    peer: str

    async def send(self, data: bytes) -> None:
        """Queue a response; it goes out at the latest before the next read."""
        ...

    async def flush(self) -> None:
        """Write out what is queued now (IDLE pushes, which no read follows)."""
        ...

    async def start_tls(self, context: ssl.SSLContext, handshake_timeout: float) -> None:
        """Upgrade to TLS; whatever the client sent before the handshake is discarded."""
        ...

    async def read_line(self) -> bytes | None:
        """One client line (continuation data, IDLE's DONE); None when the client is gone."""
        ...

    def waiting_line(self) -> bytes | None:
        """The client's next command when it is here already, one whole line announcing no
        literal (still to be read: :meth:`read_line` gives it without waiting)."""
        ...


class SessionEnd(Exception):
    """Ends the connection after sending ``bye`` (autologout, too many failed logins)."""

    def __init__(self, bye: bytes) -> None:
        super().__init__(bye.decode("ascii", "replace"))
        self.bye = bye


@dataclass(kw_only=True)
class Limits:
    """Per-connection limits; the defaults are what ``pizzamail serve`` uses."""

    #: seconds a failed login waits before answering (slows one connection's guessing; the
    #: gate limits everyone's together)
    login_delay: float = 1.0
    #: failed logins after which the connection is closed
    max_failed_logins: int = 3
    #: autologout after this many idle seconds once logged in (RFC 3501 §5.4: at least 30
    #: minutes; before login the gate's much shorter deadline applies)
    idle_timeout: float = 31 * 60
    #: longest command line, literals excluded
    max_line: int = 64 * 1024
    #: the literals of one command together (an APPENDed message)
    max_literal: int = 64 * 1024 * 1024
    #: the same before login, where nothing larger than a user name or password is needed: an
    #: unknown client must not make us hold megabytes
    max_literal_before_login: int = 8 * 1024
    #: seconds a TLS handshake (implicit or after STARTTLS) may take
    tls_handshake_timeout: float = 30.0
    #: logged-in connections served at once; one more logging in closes the oldest (a phone and a
    #: few desktops need a handful each, so this only stops a runaway client of the owner's from
    #: exhausting descriptors, and its newest connection, the live one, still works).
    #: Connections before login wait at the gate, not here.
    max_connections: int = 256


@dataclass(kw_only=True)
class Shared:
    """What every session of one server shares."""

    mailbox: MailIndex
    accounts: Accounts
    limits: Limits
    #: the server's certificate and key; None means no STARTTLS and no implicit TLS
    tls: ssl.SSLContext | None = None
    #: connections before login and their password checks (shared with SMTP in ``serve``)
    gate: Gate = field(default_factory=Gate)
    #: told of each connection that has just logged in (the server makes room for it)
    on_login: Callable[[Connection], None] = lambda conn: None


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
        self.enabled = Extensions()

    @property
    def mailbox(self) -> MailIndex:
        return self.shared.mailbox

    def selected(self) -> View:
        assert self.view is not None, "command table lets this run only when selected"
        return self.view

    @property
    def plaintext_ok(self) -> bool:
        """Passwords may be sent: the channel is encrypted or never leaves this machine."""
        return self.conn.secure or self.conn.local

    @property
    def starttls_offered(self) -> bool:
        return self.shared.tls is not None and not self.conn.secure

    def capabilities(self) -> bytes:
        if self.state is State.NOT_AUTHENTICATED:
            return capabilities.before_login(starttls=self.starttls_offered, plaintext_ok=self.plaintext_ok)
        return capabilities.after_login()

    def literal_limit(self) -> tuple[int, bytes]:
        """How many literal bytes a command may carry now, and the refusal of more."""
        limits = self.shared.limits
        if self.state is State.NOT_AUTHENTICATED:
            most = limits.max_literal_before_login
            return most, b"Literal too large; before login at most %d bytes" % most
        return limits.max_literal, b"Literal too large"

    def greeting(self) -> bytes:
        return b"* OK [CAPABILITY " + self.capabilities() + b"] pizzamail ready\r\n"

    async def use_condstore(self) -> None:
        """A CONDSTORE enabling command ran (RFC 7162 §3.1): from now on MODSEQ is reported, and
        a session that already has a folder open learns where its modseq stands."""
        if self.enabled.condstore:
            return
        self.enabled.condstore = True
        if self.view is not None:
            await self.conn.send(b"* OK [HIGHESTMODSEQ %d] Highest\r\n" % self.view.modseq)

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
            if cmd.name != "IDLE":  # IDLE announces after "+ idling", where every client listens
                await self.catch_up(cmd)
            text = await spec.handler(self, cmd)
            response = ok(cmd, text) if text is not ANSWERED else b""
        except SessionEnd:
            raise
        except Exception as exc:
            response = refusal(cmd, exc)
        if cmd.name not in ("LOGOUT", "IDLE"):
            await self.catch_up(cmd)
        return response

    async def catch_up(self, cmd: Command) -> None:
        """Announce what changed in the selected folder since this session last looked."""
        if self.view is None:
            return
        about_messages = cmd.name.removeprefix("UID ") in _NUMBERED
        lines = await self.view.refresh(expunge_ok=cmd.uid or not about_messages, in_passing=about_messages)
        for line in lines:
            await self.conn.send(line)


def ok(cmd: Command, text: bytes) -> bytes:
    """The tagged answer of ``cmd``, done."""
    return cmd.tag + b" OK " + text + b"\r\n"


def refusal(cmd: Command, exc: Exception, *, logged: bool = False) -> bytes:
    """The tagged answer of ``cmd``, which failed with ``exc`` (an unexpected one is logged,
    unless it was ``logged`` already: commands answered together fail together)."""
    if isinstance(exc, PizzamailError):
        return exc.imap_response(cmd.tag)
    if not logged:
        log.error("IMAP command %s failed", cmd.name, exc_info=exc)
    if transient(exc):  # held by another process
        return Unavailable().imap_response(cmd.tag)
    return cmd.tag + b" NO [SERVERBUG] Internal error, see the pizzamail log\r\n"


# -- commands valid in any state ----------------------------------------------------------------


async def capability(s: Session, cmd: Command) -> bytes:
    await s.conn.send(b"* CAPABILITY " + s.capabilities() + b"\r\n")
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
    """RFC 5161: unknown names are ignored; ``* ENABLED`` lists what this command turned on."""
    wanted = [w.decode("ascii", "replace") for w in cmd.arg(Words).words if w is not None]
    turned_on: list[str] = []
    for name in dict.fromkeys(w for w in wanted if w in capabilities.ENABLEABLE):
        if name == "QRESYNC" and not s.enabled.qresync:
            s.enabled.qresync = True
            turned_on.append(name)
        elif name == "CONDSTORE" and not s.enabled.condstore:
            turned_on.append(name)
        await s.use_condstore()  # QRESYNC implies CONDSTORE
    await s.conn.send(b" ".join([b"* ENABLED", *(n.encode() for n in turned_on)]) + b"\r\n")
    return b"ENABLE completed"


async def namespace(s: Session, cmd: Command) -> bytes:
    cmd.arg(NoArgs)
    await s.conn.send(b'* NAMESPACE (("" "/")) NIL NIL\r\n')
    return b"NAMESPACE completed"
