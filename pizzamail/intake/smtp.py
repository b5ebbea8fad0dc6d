"""SMTP intake: an aiosmtpd handler that authenticates, validates, stores and answers.

Thin by design: it never runs the agent. ``250`` is sent only after the task is committed; the
store's commit events tell the rest of the service (filing, runner, approvals) what arrived.

The session remembers which :class:`Login` authenticated (the owner or a ``[senders.NAME]``
program): the envelope sender and the From header must be that login's own address, and a sender
starts tasks only: it decides approvals only with ``approve = true`` and never mails anyone else.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import socket
import ssl
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from email.message import EmailMessage
from email.utils import getaddresses
from typing import Any

from aiosmtpd.smtp import MISSING, SMTP, AuthResult, Envelope, LoginPassword, Session

from pizzamail.approvals.service import Approvals
from pizzamail.auth import Accounts, Login, login_name, peer_text
from pizzamail.errors import PizzamailError, SmtpRefusal, Unavailable
from pizzamail.guard import Gate, TokenBucket, Visitor
from pizzamail.intake.batch import GroupCommit
from pizzamail.intake.control import record_stop
from pizzamail.intake.pace import Intake
from pizzamail.intake.tasks import Received, Stored
from pizzamail.mail.parse import ParsedMail, parse_bytes, parsed_at_once, parsed_mail
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.threads import thread_for_references

log = logging.getLogger("pizzamail.intake")


class _NoiseFilter(logging.Filter):
    """aiosmtpd 1.4 logs two warnings on every connection that say nothing to our users: AUTH
    without TLS (we allow it only on loopback, checked at start-up) and its own use of the
    deprecated ``Session.login_data``."""

    NOISE = ("auth_require_tls == False", "Session.login_data is deprecated")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(noise in message for noise in self.NOISE)


logging.getLogger("mail.log").addFilter(_NoiseFilter())


@dataclass(kw_only=True)
class IntakeHandler:
    store: Store
    blobs: BlobStore
    accounts: Accounts
    #: the agents' addresses (``bot@…``, ``research@…``); plus-addresses of them are accepted too
    agents: frozenset[str]
    domain: str
    approvals: Approvals | None = None
    """decides held actions by reply; without it, replies to approval requests are tasks"""
    intake: Intake = field(default_factory=Intake)
    """the mails being handed over now, which the service's follow-up work waits for"""
    _rates: dict[str, TokenBucket] = field(default_factory=dict)
    _group: GroupCommit = field(init=False)

    def __post_init__(self) -> None:
        self._group = GroupCommit(store=self.store, blobs=self.blobs)

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str,
        mail_options: list[str],
    ) -> str:
        try:
            login = session_login(session)
        except SmtpRefusal as exc:
            return exc.smtp_reply()
        if not login.may_send_as(address):
            return SmtpRefusal(
                550, "5.7.1", f"<{address}> may not send tasks here; send from your own address"
                f" ({login.address})"
            ).smtp_reply()
        if not self._within_rate(login):
            return SmtpRefusal(450, "4.7.1", f"sender {login.sender} may send {login.rate} mails a minute;"
                               " try again in a minute").smtp_reply()
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        self.intake.begin(envelope)
        return "250 2.1.0 OK"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str,
        rcpt_options: list[str],
    ) -> str:
        try:
            self._check_recipient(session_login(session), envelope, address)
        except SmtpRefusal as exc:
            return exc.smtp_reply()
        # another address from an approver: accepted for now, and in DATA only as the send of a
        # pending draft (RCPT comes before the message that says which draft it is)
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    def _within_rate(self, login: Login) -> bool:
        """A program of ``[senders.NAME]`` gets ``rate`` mails a minute (a runaway script must not
        flood the agent); refused ones come back, since 450 tells a mailer to retry later."""
        if not login.sender:
            return True
        return self._rates.setdefault(login.sender, TokenBucket(rate=login.rate)).take()

    def _check_recipient(self, login: Login, envelope: Envelope, address: str) -> None:
        if self.is_agent(address):
            return
        if login.sender:  # a program's mail goes to the agent only, whatever it may decide
            raise SmtpRefusal(550, "5.7.1", f"<{login.address}> may write only to the agent, not to"
                              f" <{address}> (sending a draft to others is for the owner's account)")
        if not self._may_send_draft(envelope) or self._unknown_here(address):
            raise self._not_an_agent(address)

    def _unknown_here(self, address: str) -> bool:
        """An address at the agents' own domain that is no agent: a mistyped agent (nobody else
        lives there for a draft to go to), told at once which agents there are."""
        base = _base_address(address)
        return base.rpartition("@")[2] == self.domain.lower() and not (
            self.approvals is not None and base in self.approvals.approvers)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        try:
            return await self._answer(envelope, session)
        finally:
            self.intake.end(envelope)

    async def _answer(self, envelope: Envelope, session: Session) -> str:
        raw = envelope.original_content or b""
        try:
            stored = await self._accept(raw, envelope, session_login(session))
        except PizzamailError as exc:
            return exc.smtp_reply()
        except Exception as exc:  # answered here, not by aiosmtpd, so the session resets for the next mail
            return await self.handle_exception(exc)
        if stored.duplicate:
            return "250 2.0.0 already received; not stored twice"
        if stored.noted:
            return f"250 2.0.0 recorded in thread {stored.thread_id}; no agent in To, so none runs"
        if stored.stop:
            return f"250 2.0.0 stop recorded in thread {stored.thread_id}"
        if stored.run_id is None:
            return f"250 2.0.0 decision recorded in thread {stored.thread_id}"
        # debug: the events table has it already (task.received), and in serve's log setup a line
        # costs 50 us, a twentieth of what the mail costs the server
        log.debug("task stored: thread %s run %s (%d bytes)", stored.thread_id, stored.run_id, len(raw))
        return f"250 2.0.0 stored as thread {stored.thread_id}"

    async def handle_exception(self, error: Exception) -> str:
        """aiosmtpd's hook for an error that no handler turned into a reply: the details go to the
        log, the wire gets ``451`` (try again later). Never a 5xx: a mail refused for good is lost,
        and what failed (the database held by another process, a full disk, a bug fixed by the next
        version) may well pass, while the sender's mailer keeps the mail and retries."""
        log.error("SMTP: unexpected %s", type(error).__name__, exc_info=error)
        return Unavailable("pizzamail could not take this mail just now (the reason is in its log);"
                           " try again later").smtp_reply()

    async def _accept(self, raw: bytes, envelope: Envelope, login: Login) -> Stored:
        msg, parsed = _parse(raw) if parsed_at_once(raw) else await asyncio.to_thread(_parse, raw)
        parsed = _checked_sender(parsed, envelope, login)
        if parsed.is_empty:
            raise SmtpRefusal(554, "5.6.0", "empty mail: write the task in the subject or body")
        outsiders = [r for r in envelope.rcpt_tos if not self.is_agent(r)]
        if outsiders:
            return await self._draft_sent(raw, parsed, msg, outsiders)
        decided = await self._decision(raw, parsed, msg, envelope, login)
        if decided is not None:
            return decided
        stopped = await self._stop(raw, parsed, msg, login)
        if stopped is not None:
            return stopped
        agent = addressed_agent(envelope.rcpt_tos, msg, self.agents)
        return await self._group.commit(Received(
            raw=raw, parsed=parsed, agent=agent or self._agent_for(envelope.rcpt_tos), domain=self.domain,
            runs=agent is not None))

    async def _decision(
        self, raw: bytes, parsed: ParsedMail, msg: EmailMessage, envelope: Envelope, login: Login
    ) -> Stored | None:
        """A reply to an approval request: decided and committed here, or None for a task.

        A login that may not decide is refused rather than stored as a task, so its author learns
        at once that nothing was approved (and a held action is never started twice over)."""
        action = await self.approvals.routed(msg, envelope.rcpt_tos) if self.approvals else None
        if action is None or self.approvals is None:
            return None
        if not login.approve:
            raise SmtpRefusal(550, "5.7.1", f"<{login.address}> may not decide approvals; only the"
                              f" owner can (or set approve = true in [senders.{login.sender}])")
        decided = await self.approvals.decide(raw, parsed, msg, action=action,
                                              sender=self._agent_for(envelope.rcpt_tos))
        log.info("decision on action %d: %s", action.id, "applied" if decided.applied else "no change")
        return Stored(thread_id=decided.thread_id, run_id=None, duplicate=decided.duplicate)

    async def _stop(self, raw: bytes, parsed: ParsedMail, msg: EmailMessage, login: Login) -> Stored | None:
        """An approver's "stop" in a thread: recorded here, never a task (:mod:`.control`); None
        for any other mail, and for anyone else's "stop", which is an ordinary task."""
        if self.approvals is None or not login.approve:
            return None
        thread_id = await thread_for_references(self.store, parsed.thread_refs())
        if thread_id is None or not await self.approvals.stops(msg, parsed.sender or ""):
            return None
        stored = await record_stop(self.store, self.blobs, self.approvals.composer, raw, parsed,
                                   thread_id=thread_id, bot=min(self.agents), domain=self.domain)
        log.info("stop asked in thread %d", thread_id)
        return stored

    async def _draft_sent(
        self, raw: bytes, parsed: ParsedMail, msg: EmailMessage, outsiders: list[str]
    ) -> Stored:
        """Mail to someone else is taken only as the approval of a pending draft: recorded as
        ``send`` (the release relays it), never stored or relayed otherwise."""
        action = await self.approvals.sent_draft(msg) if self.approvals else None
        if action is None or self.approvals is None:
            raise self._not_an_agent(outsiders[0], draft=True)
        decided = await self.approvals.decide(raw, parsed, msg, action=action, sender=min(self.agents),
                                              sent_to=outsiders)
        log.info("draft of action %d sent by the user: %s", action.id,
                 "approved with their edits" if decided.applied else "no change")
        return Stored(thread_id=decided.thread_id, run_id=None, duplicate=decided.duplicate)

    def _may_send_draft(self, envelope: Envelope) -> bool:
        return self.approvals is not None and (envelope.mail_from or "").lower() in self.approvals.approvers

    def _not_an_agent(self, address: str, *, draft: bool = False) -> SmtpRefusal:
        agents = ", ".join(sorted(self.agents))
        why = (" (pizzamail sends mail to others only as a pending draft_email draft, sent from"
               " Drafts)") if draft else ""
        return SmtpRefusal(550, "5.1.1", f"<{address}> is not an agent here{why}; write to {agents}")

    def is_agent(self, address: str) -> bool:
        return _base_address(address) in self.agents

    def _agent_for(self, recipients: list[str]) -> str:
        return _base_address(recipients[0]) if recipients else min(self.agents)


def addressed_agent(recipients: list[str], msg: EmailMessage, agents: frozenset[str]) -> str | None:
    """The agent a mail is for: of the agents among its recipients, the first one in To, else the
    first one not in Cc (a Bcc). None when every agent it reaches is only in Cc: the mail is then
    for the thread's history, and no agent runs on it."""
    reached = [a for a in dict.fromkeys(map(_base_address, recipients)) if a in agents]
    to, cc = (_header_addresses(msg, name) for name in ("To", "Cc"))
    in_to = [a for a in to if a in reached]
    if in_to:
        return in_to[0]
    return next((a for a in reached if a not in cc), None)


def _header_addresses(msg: EmailMessage, name: str) -> tuple[str, ...]:
    return _addresses(tuple(str(v) for v in msg.get_all(name) or []))


@functools.lru_cache(maxsize=256)
def _addresses(values: tuple[str, ...]) -> tuple[str, ...]:
    """Kept for the same To and Cc (a user's tasks mostly have one): each read by the stdlib takes
    a tenth of a small mail's parse."""
    return tuple(_base_address(addr) for _, addr in getaddresses(list(values)) if addr)


def _base_address(address: str) -> str:
    """``bot+token@x`` -> ``bot@x``, lower case."""
    local, _, domain = address.lower().partition("@")
    return f"{local.split('+', 1)[0]}@{domain}"


def _parse(raw: bytes) -> tuple[EmailMessage, ParsedMail]:
    """Parsed once, in a worker thread unless :func:`parsed_at_once`: the stdlib takes about a
    millisecond per MIME part, and a mail of thousands of parts must not hold up every other
    connection meanwhile."""
    msg = parse_bytes(raw)
    return msg, parsed_mail(msg)


def _checked_sender(parsed: ParsedMail, envelope: Envelope, login: Login) -> ParsedMail:
    """The From header must be the login's own address too. Without one, the envelope sender
    (already checked) is recorded, so the task's sender always says whose policy its run gets."""
    if parsed.sender is not None and not login.may_send_as(parsed.sender):
        raise SmtpRefusal(550, "5.7.1", f"From: <{parsed.sender}> is not your address ({login.address})")
    if parsed.sender is None and envelope.mail_from:
        return replace(parsed, sender=envelope.mail_from.lower())
    return parsed


def session_login(session: Session) -> Login:
    """Who authenticated this session (the authenticator put it there)."""
    login = session.auth_data
    if not isinstance(login, Login):  # aiosmtpd refuses MAIL before AUTH; this is the backstop
        raise SmtpRefusal(530, "5.7.0", "Authentication required")
    return login


def authenticator(accounts: Accounts) -> Callable[..., AuthResult]:
    def check(
        server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        login, user = None, b""
        if isinstance(auth_data, LoginPassword):
            login, user = accounts.smtp_login(auth_data.login, auth_data.password), auth_data.login
        if login is None:
            log.warning("SMTP login failed for user %s from %s", login_name(user), peer_text(session.peer))
            return AuthResult(success=False, handled=False)  # False: aiosmtpd sends the 535 itself
        # auth_data is what the session keeps: MAIL and DATA check against this login
        return AuthResult(success=True, auth_data=login)

    return check


@dataclass(frozen=True)
class _Credentials:
    mechanism: str
    auth_data: Any


def _later(server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any) -> AuthResult:
    # aiosmtpd calls its authenticator synchronously; the check itself waits for its turn at the
    # gate in Submission, so here the credentials are only handed on
    return AuthResult(success=False, handled=True, auth_data=_Credentials(mechanism, auth_data))


_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
PLAIN_PATH = re.compile(
    rf"<({_ATOM}(?:\.{_ATOM})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>(?:[ \t]+([^()\s][^()]*))?\Z")
"""``<local@domain>`` of plain atoms, then parameters without comments: what nearly every client
sends in MAIL and RCPT, read the same by this pattern as by the stdlib's address grammar"""

SEATS_PER_LOGIN = 32
"""logged-in SMTP connections one user may hold at once: a mail program sends and quits, so this is
plenty, and a runaway one fills only its own seats, never the owner's (nor every descriptor)"""

Seats = defaultdict[str, list["Submission"]]


class Submission(SMTP):
    """aiosmtpd's SMTP behind the gate (shared with IMAP): a connection waits there until it logs
    in (dropped with 421 when it takes too long or the room is needed), and its password is
    checked in turn with everyone else's.

    In DATA, once logged in, a line may be as long as the mail. RFC 5321 caps a line at 1,000
    bytes, and aiosmtpd answers "500 Line too long" to any longer run without CRLF. A text file with
    LF line ends, as a program sends it (``curl -T report.txt``), is one such run however short its
    lines. Everything that reads a stored mail also ends lines at a bare LF (and the Maildir copy is
    rewritten with CRLF), so such a mail is taken as it is; the end of DATA is still only CRLF.CRLF.
    Commands, and sessions that have not logged in, keep the short limit: nobody buffers megabytes
    before AUTH.

    Once logged in, a connection takes one of its user's ``SEATS_PER_LOGIN`` seats."""

    def __init__(self, handler: IntakeHandler, *, gate: Gate, seats: Seats, **kwargs: Any) -> None:
        self.gate = gate
        self.visitor: Visitor | None = None
        #: the logged-in connections of each user, oldest first (shared by the server's connections)
        self.seats = seats
        self._taken: list[Submission] | None = None
        self._check = authenticator(handler.accounts)
        super().__init__(handler, authenticator=_later, **kwargs)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self.visitor is None:  # not again after STARTTLS
            self.visitor = self.gate.admit(self._drop)

    def connection_lost(self, error: Exception | None) -> None:
        if self.visitor is not None:
            self.gate.leave(self.visitor)
        self._unseat()
        self.event_handler.intake.end(self.envelope)  # a mail left half handed over
        super().connection_lost(error)

    def _unseat(self) -> None:
        if self._taken is not None:
            self._taken.remove(self)
            self._taken = None

    def _drop(self, why: str) -> None:
        if isinstance(self.transport, asyncio.WriteTransport):
            self.transport.write(f"421 4.7.0 {why}; closing\r\n".encode())
            self.transport.close()

    async def auth_PLAIN(self, server: SMTP, args: list[str]) -> AuthResult:
        return await self._in_turn(await super().auth_PLAIN(server, args))

    async def auth_LOGIN(self, server: SMTP, args: list[str]) -> AuthResult:
        return await self._in_turn(await super().auth_LOGIN(server, args))

    async def _in_turn(self, result: AuthResult) -> AuthResult:
        given = result.auth_data
        if not isinstance(given, _Credentials) or self.visitor is None:
            return result  # the mechanism already failed (bad base64, cancelled)
        assert self.session is not None and self.envelope is not None

        def verify() -> AuthResult | None:
            checked = self._check(self, self.session, self.envelope, given.mechanism, given.auth_data)
            return checked if checked.success else None

        checked = await self.gate.check(self.visitor, verify)
        if checked is None:
            return AuthResult(success=False, handled=False)
        return self._seated(checked)

    def _seated(self, checked: AuthResult) -> AuthResult:
        """Logged in, in one of its user's seats. With every seat taken, the user's oldest connection
        is closed: a program that never closes its connections (or the owner's runaway client)
        takes no more descriptors than that, and its newest connection, the live one, still works."""
        login = checked.auth_data
        assert isinstance(login, Login)
        taken = self.seats[login.user]
        if len(taken) >= SEATS_PER_LOGIN:
            oldest = taken[0]
            oldest._unseat()
            oldest._drop(f"{login.user} has more than {SEATS_PER_LOGIN} connections open")
        taken.append(self)
        self._taken = taken
        return checked

    def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
        """aiosmtpd reads every MAIL and RCPT address with the stdlib's whole address grammar, 0.1 ms
        each (a quarter of what a mail costs a bare aiosmtpd); the plain :data:`PLAIN_PATH` is read
        by one pattern, any other address as before."""
        plain = PLAIN_PATH.match(arg)
        if plain is None or self.local_part_limit:
            return super()._getaddr(arg)
        return plain[1], plain[2] or ""

    async def challenge_auth(self, challenge: str | bytes, *args: Any, **kwargs: Any) -> Any:
        """aiosmtpd reads the answer to a 334 with the line limit and lets the reader's ValueError for
        a longer one through, where it becomes a 554 about storing mail: here it is a bad answer."""
        try:
            return await super().challenge_auth(challenge, *args, **kwargs)
        except ValueError:  # binascii.Error is one too, but aiosmtpd answers that itself
            await self.push("501 5.5.2 Answer too long; AUTH cancelled")
            return MISSING

    async def smtp_DATA(self, arg: str) -> None:
        if not (self.session and self.session.authenticated and self.data_size_limit):
            await super().smtp_DATA(arg)
            return
        reader, limit = self._reader, self.data_size_limit + 2
        reader._limit = self.line_length_limit = limit  # type: ignore[attr-defined]
        self._reader = WholeData(reader, self.data_size_limit)  # type: ignore[assignment]
        try:
            await super().smtp_DATA(arg)
        finally:
            self._reader = reader
            reader._limit = SMTP.line_length_limit  # type: ignore[attr-defined]
            del self.line_length_limit  # back to the class's RFC limit


class WholeData:
    """What aiosmtpd's DATA loop reads from, once logged in: all of a mail's lines as one (each
    line's leading dot taken off but the first's, which the loop takes off itself), then the lone
    dot that ends it. The loop reads a line at a time, 40-60 us for a small task (a tenth of what a
    mail costs a bare aiosmtpd); here one read finds the end. A mail over the size limit is read and
    refused as aiosmtpd reads it: line by line, or (found whole) as it was sent."""

    def __init__(self, reader: asyncio.StreamReader, limit: int) -> None:
        self._reader, self._limit = reader, limit
        self._whole = True
        self._end: bytes | None = None

    async def readuntil(self, separator: bytes) -> bytes:
        end, self._end = self._end, None
        if end is not None:
            return end
        if not self._whole:
            return await self._reader.readuntil(separator)
        self._whole = False
        buffer: bytearray = self._reader._buffer  # type: ignore[attr-defined]
        buffer[:0] = b"\r\n"  # the DATA command's line end: a lone dot right away ends an empty mail
        try:
            stuffed = await self._reader.readuntil(b"\r\n.\r\n")
        except asyncio.LimitOverrunError:
            del buffer[:2]
            return await self._reader.readuntil(separator)
        lines = stuffed[2:-3]
        if not lines:
            return b".\r\n"
        self._end = b".\r\n"
        if len(lines) > self._limit:  # counted as sent, so refused as too much
            return lines
        return lines[:1] + lines[1:].replace(b"\r\n.", b"\r\n")

    async def read(self, n: int = -1) -> bytes:
        return await self._reader.read(n)


async def start_smtp_server(
    *, host: str = "127.0.0.1", port: int = 0, sock: socket.socket | None = None,
    handler: IntakeHandler, max_size: int, tls: ssl.SSLContext | None = None, require_tls: bool = False,
    gate: Gate | None = None,
) -> asyncio.Server:
    """Serve SMTP submission inside the running loop (no thread), on ``host:port`` or on ``sock``,
    bound beforehand (``serve`` binds every port before it starts anything).

    With ``tls`` STARTTLS is offered; ``require_tls`` (a bind beyond loopback) makes it mandatory
    before anything else, so no password crosses a network in clear text. ``gate`` is where
    connections wait until they log in (``serve`` shares one with IMAP).
    """
    gate = gate or Gate()
    seats: Seats = defaultdict(list)

    def factory() -> SMTP:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the per-connection "AUTH without TLS" warning
            return Submission(
                handler, gate=gate, seats=seats, hostname=handler.domain, ident="pizzamail",
                data_size_limit=max_size, auth_required=True, auth_require_tls=require_tls, tls_context=tls,
                require_starttls=require_tls, enable_SMTPUTF8=True,
            )

    loop = asyncio.get_running_loop()
    if sock is not None:
        return await loop.create_server(factory, sock=sock)
    return await loop.create_server(factory, host=host, port=port)
