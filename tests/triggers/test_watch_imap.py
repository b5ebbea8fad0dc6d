"""ImapSession against the edges of the protocol: what a remote server may send, and when.

Exact wire behaviour (the order and packeting of IDLE's responses, a connection closed mid-IDLE, a
server that never answers) comes from :class:`Scripted`, a tiny server that says what the test
scripts: a test double for a remote's behaviour, since the thing under test is our client. Stopping
and the login with a password beyond ASCII run against our real IMAP server (``remote``).

Every wait is bounded by :data:`GENEROUS`; sessions use a reply timeout and IDLE periods far longer
than that, so a test that passes cannot have been rescued by a timer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import logging
import re
import socket
import ssl
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pizzamail.account import session as watch_imap
from pizzamail.account.session import Account, AccountError, ImapSession
from pizzamail.auth import Accounts
from pizzamail.config import parse_config
from pizzamail.secrets import SecretStore
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.triggers.watch import probe, watch_account
from tests.imap.tlstools import self_signed
from tests.triggers.watchtools import (
    Relay,
    Remote,
    all_ended,
    eventually,
    remote_server,
    watch_config,
    watching,
    workers,
)

#: the bound of every wait in these tests: far above what the behaviour under test needs
GENEROUS = 10.0
#: a reply timeout and an IDLE period no test may reach
HOUR = 3600.0

# -- a scripted remote ----------------------------------------------------------------------------

#: in a script: the server closes the connection here
CLOSE = b""
GREETING = b"* OK [CAPABILITY IMAP4rev1 IDLE AUTH=PLAIN] scripted remote ready\r\n"
EXISTS, PLUS = b"* 2 EXISTS\r\n", b"+ idling\r\n"
ANSWERS: dict[bytes, tuple[bytes, ...]] = {
    b"CAPABILITY": (b"* CAPABILITY IMAP4rev1 IDLE AUTH=PLAIN\r\n{tag} OK listed\r\n",),
    b"LOGIN": (b"{tag} OK [CAPABILITY IMAP4rev1 IDLE] logged in\r\n",),
    b"EXAMINE": (b"* 1 EXISTS\r\n* 0 RECENT\r\n* OK [UIDVALIDITY 7] ok\r\n* OK [UIDNEXT 2] ok\r\n"
                 b"* FLAGS (\\Seen)\r\n{tag} OK [READ-ONLY] examined\r\n",),
    b"IDLE": (PLUS,),
    b"DONE": (b"{tag} OK IDLE done\r\n",),
    b"UID": (b"* SEARCH 2\r\n{tag} OK searched\r\n",),
    b"LOGOUT": (b"* BYE logging out\r\n{tag} OK bye\r\n", CLOSE),
}


@dataclass
class Scripted:
    """A remote IMAP server that says exactly what the test scripts.

    ``greeting`` first (None: it never greets); then for each command, by name, the writes of its
    answer in order, each a separate send (``{tag}`` is the command's tag, :data:`CLOSE` hangs
    up); a script for two words (``UID FETCH``) comes before one for the first (``UID``). A test
    may change ``answers`` while the client is connected. A command with no script is never
    answered. A line that is no command, ``DONE`` or a SASL response (named ``+``), is answered
    with the tag of the command before it.
    """

    answers: dict[bytes, tuple[bytes, ...]]
    greeting: bytes | None = GREETING
    tls: ssl.SSLContext | None = None
    """implicit TLS with this context"""
    heard: list[bytes] = field(default_factory=list)
    """every line the client sent"""
    connections: int = 0
    """how many connections the server accepted"""
    port: int = 0
    _server: asyncio.Server | None = None
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def __aenter__(self) -> Scripted:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    def commands(self) -> list[bytes]:
        """The names of the commands heard, in order (``DONE`` included)."""
        return [_command(line)[1] for line in self.heard]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        self.connections += 1
        if self.greeting is not None:
            writer.write(self.greeting)
        last = b""
        while line := await reader.readline():
            self.heard.append(line)
            tag, name = _command(line)
            if name in (b"DONE", b"+"):
                tag = last
            last = tag
            two_words = b" ".join(line.split()[1:3]).upper()
            for chunk in self.answers.get(two_words, self.answers.get(name, ())):
                if chunk == CLOSE:
                    writer.close()
                    return
                writer.write(chunk.replace(b"{tag}", tag))
                await writer.drain()
        writer.close()


def _command(line: bytes) -> tuple[bytes, bytes]:
    """(tag, command name) of a client's line; ``DONE`` and a SASL response (``+``) have no tag."""
    words = line.split()
    if len(words) == 1:
        return b"", b"DONE" if words[0].upper() == b"DONE" else b"+"
    return (words[0], words[1].upper()) if words else (b"", b"")


def settings(port: int, **more: object) -> Account:
    values = {"host": "127.0.0.1", "port": port, "security": "none", "user": "me", **more}
    return watch_account("w", parse_config({"watches": {"w": values}}).watches["w"])


@contextlib.asynccontextmanager
async def examined(port: int, *, reply_seconds: float = HOUR) -> AsyncIterator[ImapSession]:
    """A session logged in, its folder open and a pass begun: what the watcher has before IDLE."""
    async with await ImapSession.open(settings(port), reply_seconds=reply_seconds) as session:
        await session.login("pw")
        await session.open_folder("INBOX", read_only=True)
        session.begin_pass()
        yield session


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> list[None]:
    """One entry per turn of the IDLE wait loop (each turn asks whether imaplib holds bytes)."""
    counted: list[None] = []
    buffered = ImapSession._buffered

    def counting(session: ImapSession) -> bool:
        counted.append(None)
        return buffered(session)

    monkeypatch.setattr(ImapSession, "_buffered", counting)
    return counted


# -- new mail around the IDLE continuation --------------------------------------------------------


@pytest.mark.parametrize("writes", [
    pytest.param((EXISTS, PLUS), id="EXISTS-then-plus"),
    pytest.param((EXISTS + PLUS,), id="EXISTS-then-plus-one-packet"),
    pytest.param((PLUS + EXISTS,), id="plus-then-EXISTS-one-packet"),
    pytest.param((PLUS, EXISTS), id="plus-then-EXISTS"),
])
async def test_new_mail_announced_around_the_idle_continuation_ends_the_wait(
    writes: tuple[bytes, ...]
) -> None:
    """An EXISTS before the ``+`` (allowed: our own server sends one when mail came since the last
    command), or one imaplib already buffered with the ``+`` (``select`` cannot see it)."""
    async with Scripted({**ANSWERS, b"IDLE": writes}) as remote, examined(remote.port) as session:
        async with asyncio.timeout(GENEROUS):
            await session.wait_for_change(HOUR)
        assert session.changed
        assert await session.uids_after(1) == [2]  # DONE was answered: the exchange is still in step
    assert remote.commands()[-4:] == [b"IDLE", b"DONE", b"UID", b"LOGOUT"]


async def test_new_mail_in_one_tls_record_with_the_continuation_ends_the_wait(tmp_path: Path) -> None:
    """Over TLS the bytes may also wait in the TLS layer, where ``select`` cannot see them either."""
    certificate = self_signed()
    script = {**ANSWERS, b"IDLE": (PLUS + EXISTS,)}
    async with Scripted(script, tls=certificate.server_context(tmp_path)) as remote:
        ssl_settings = settings(remote.port, security="ssl")
        async with await ImapSession.open(ssl_settings, tls=certificate.client_context(),
                                          reply_seconds=HOUR) as session:
            await session.login("pw")
            await session.open_folder("INBOX", read_only=True)
            session.begin_pass()
            async with asyncio.timeout(GENEROUS):
                await session.wait_for_change(HOUR)
            assert session.changed
    assert remote.commands()[-3:] == [b"IDLE", b"DONE", b"LOGOUT"]


async def test_a_quiet_idle_waits_without_spinning_and_ends_after_its_period_with_done(
    turns: list[None]
) -> None:
    async with Scripted(ANSWERS) as remote, examined(remote.port) as session:
        async with asyncio.timeout(GENEROUS):
            await session.wait_for_change(0.2)
        assert not session.changed
    assert len(turns) <= 3, f"{len(turns)} turns of the wait loop while nothing happened"
    assert remote.commands()[-3:] == [b"IDLE", b"DONE", b"LOGOUT"]


# -- the server going away during IDLE ------------------------------------------------------------


@pytest.mark.parametrize("writes", [
    pytest.param((PLUS, CLOSE), id="after-plus"),
    pytest.param((PLUS + b"* BYE shutting down\r\n", CLOSE), id="BYE-then-close"),
    pytest.param((CLOSE,), id="before-plus"),
])
async def test_the_server_closing_during_idle_fails_the_wait_at_once(
    writes: tuple[bytes, ...], turns: list[None]
) -> None:
    """Not a spin on a readable socket that reads nothing, and not a wait for the IDLE period."""
    async with Scripted({**ANSWERS, b"IDLE": writes}) as remote, examined(remote.port) as session:
        with pytest.raises(AccountError) as failed:
            async with asyncio.timeout(GENEROUS):
                await session.wait_for_change(HOUR)
    assert failed.value.kind == "connect"
    assert re.fullmatch(r"the connection to 127\.0\.0\.1:\d+ was lost \(.*EOF.*\)", failed.value.message)
    assert len(turns) <= 3, f"{len(turns)} turns of the wait loop on a closed connection"
    assert remote.commands()[-1] == b"IDLE"  # no DONE or LOGOUT on a dead connection


# -- a server that offers IDLE and refuses it -----------------------------------------------------

LATE_MAIL = b"Subject: Found by a poll\r\nMessage-ID: <late@example.com>\r\n\r\nafter a refused IDLE\r\n"
UIDS_NONE = (b"* SEARCH\r\n{tag} OK searched\r\n",)
UIDS_LATE = (b"* SEARCH 2\r\n{tag} OK searched\r\n",)
FETCH_LATE = (b"* 2 FETCH (UID 2 RFC822.SIZE %d BODY[]<0> {%d}\r\n%b)\r\n{tag} OK fetched\r\n"
              % (len(LATE_MAIL), len(LATE_MAIL), LATE_MAIL),)


@pytest.mark.parametrize("refusal", [b"{tag} NO IDLE not allowed\r\n", b"{tag} BAD unknown command\r\n"],
                         ids=["NO", "BAD"])
async def test_a_refused_idle_falls_back_to_polling_on_the_same_connection(
    refusal: bytes, store: Store, blobs: BlobStore, secrets: SecretStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Some proxies and gateways advertise IDLE and refuse it: the watch polls with NOOP instead of
    reconnecting in a loop, says so once, and its state is "polling"."""
    script = {**ANSWERS, b"IDLE": (refusal,), b"NOOP": (b"{tag} OK nothing new\r\n",),
              b"UID SEARCH": UIDS_NONE}
    async with Scripted(script) as remote:

        async def polls(count: int) -> bool:
            return remote.commands().count(b"NOOP") >= count

        async with asyncio.timeout(GENEROUS), watching(store, blobs, watch_config(remote), secrets,
                                                       poll_seconds=0.02, timeout=HOUR) as w:
            row = await w.until_state("polling")
            await eventually(lambda: polls(3))
            remote.answers.update({b"NOOP": (b"* 2 EXISTS\r\n{tag} OK new mail\r\n",),
                                   b"UID SEARCH": UIDS_LATE, b"UID FETCH": FETCH_LATE})
            [task] = await w.until_tasks(1)
            await eventually(lambda: polls(6))  # and it goes on polling
        assert remote.connections == 1
    assert "after a refused IDLE" in task["body"]
    assert re.fullmatch(r"127\.0\.0\.1:\d+ refused IDLE \((NO IDLE not allowed|BAD unknown command)\);"
                        r" polling every 0\.02 s instead", row["last_outcome"]), row["last_outcome"]
    assert remote.commands().count(b"IDLE") == 1 and b"DONE" not in remote.commands()
    said = [r for r in caplog.records if "refused IDLE" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING, said


# -- TCP keepalive: a connection that dies silently shows within minutes ---------------------------


#: each keepalive option the platform may have, and the value ImapSession gives it
KEEPALIVE_TIMING = {
    "TCP_KEEPIDLE": watch_imap.KEEPALIVE_IDLE, "TCP_KEEPALIVE": watch_imap.KEEPALIVE_IDLE,
    "TCP_KEEPINTVL": watch_imap.KEEPALIVE_INTERVAL, "TCP_KEEPCNT": watch_imap.KEEPALIVE_PROBES,
}


@pytest.mark.parametrize("security", ["none", "ssl"])
async def test_the_connection_has_tcp_keepalive_with_our_timing(security: str, tmp_path: Path) -> None:
    """Checked on the live socket (for implicit TLS, the one under the TLS layer)."""
    certificate = self_signed()
    tls = certificate.server_context(tmp_path) if security == "ssl" else None
    async with Scripted(ANSWERS, tls=tls) as remote:
        session = await ImapSession.open(settings(remote.port, security=security),
                                         tls=certificate.client_context(), reply_seconds=HOUR)
        async with session:
            await session.login("pw")
            sock = session._client.socket()  # the live connection's own socket
            assert isinstance(sock, ssl.SSLSocket) == (security == "ssl")
            option = socket.socket.getsockopt
            assert option(sock, socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0
            present = {name: value for name, value in KEEPALIVE_TIMING.items() if hasattr(socket, name)}
            for name, value in present.items():
                assert option(sock, socket.IPPROTO_TCP, getattr(socket, name)) == value, name
    if sys.platform == "linux":  # where all three exist: none was silently skipped
        assert set(present) >= {"TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"}


async def test_a_keepalive_timeout_reads_as_a_lost_connection_not_a_slow_answer() -> None:
    """The kernel's ETIMEDOUT (keepalive gave up) is a TimeoutError too, with an errno; the socket
    timeout's has none."""
    async with Scripted(ANSWERS) as remote, examined(remote.port) as session:
        dead = session._problem(TimeoutError(errno.ETIMEDOUT, "Connection timed out"))
        slow = session._problem(TimeoutError("timed out"))
    assert re.fullmatch(r"the connection to 127\.0\.0\.1:\d+ was lost \(Connection timed out\)", dead.message)
    assert dead.kind == "connect" and "did not answer" in slow.message


# -- a server that says nothing -------------------------------------------------------------------


@pytest.mark.parametrize("silent_at", ["greeting", "LOGIN", "EXAMINE", "IDLE"])
async def test_a_silent_server_fails_the_call_after_the_reply_timeout(silent_at: str) -> None:
    """It accepts the connection, then never greets, or never answers one command."""
    answers = {name: writes for name, writes in ANSWERS.items() if name.decode() != silent_at}
    greeting = None if silent_at == "greeting" else GREETING
    before = set(workers())
    async with Scripted(answers, greeting=greeting) as remote:
        with pytest.raises(AccountError) as failed:
            async with asyncio.timeout(GENEROUS), examined(remote.port, reply_seconds=0.5) as session:
                await session.wait_for_change(HOUR)
    assert failed.value.kind == "connect"
    assert re.fullmatch(r"127\.0\.0\.1:\d+ did not answer within 0\.5 s", failed.value.message)
    if silent_at != "greeting":
        assert remote.commands()[-1] == silent_at.encode()  # and nothing after it: no LOGOUT
    assert all_ended([t for t in workers() if t not in before])


# -- stopping during IDLE (our real server) --------------------------------------------------------


@pytest.fixture
def no_close_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The polite goodbye may take an hour before the connection is dropped: a stop that finishes
    within GENEROUS took the prompt way (DONE, LOGOUT, answered), not the timer."""
    monkeypatch.setattr(watch_imap, "CLOSE_SECONDS", HOUR)


@pytest.mark.usefixtures("no_close_fallback")
async def test_stopping_the_watchers_during_idle_sends_done_and_logout_and_leaves_no_thread(
    remote: Remote, store: Store, blobs: BlobStore, secrets: SecretStore
) -> None:
    before = set(workers())  # of earlier tests, perhaps still ending
    relay = await Relay(target=remote.port).start()
    try:
        config = watch_config(remote, port=relay.port, idle_seconds=HOUR)
        async with asyncio.timeout(GENEROUS), watching(store, blobs, config, secrets) as w:
            await w.until_state("watching")
            await eventually(relay.idling)
            [worker] = set(workers()) - before
    finally:
        await relay.close()
    assert re.search(rb"\r\n(\w+) IDLE\r\nDONE\r\n(\w+) LOGOUT\r\n$", relay.sent), bytes(relay.sent[-60:])
    assert re.search(rb"\r\n\* BYE [^\r]*\r\n\w+ OK [^\r]*\r\n$", relay.received), bytes(relay.received[-80:])
    assert all_ended([worker]), "the session's worker thread outlived the stop"
    assert set(workers()) - before == set()


@pytest.mark.usefixtures("no_close_fallback")
async def test_a_cancelled_idle_sends_done_and_the_session_goes_on(remote: Remote) -> None:
    before = set(workers())
    relay = await Relay(target=remote.port).start()
    try:
        async with examined(relay.port) as session:
            waiting = asyncio.create_task(session.wait_for_change(HOUR))
            await eventually(relay.idling)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            async with asyncio.timeout(GENEROUS):
                assert await session.uids_after(0) == []  # answered: DONE went first
            [worker] = set(workers()) - before
        assert all_ended([worker])
    finally:
        await relay.close()
    assert re.search(rb" IDLE\r\nDONE\r\n\w+ UID SEARCH UID 1:\*\r\n\w+ LOGOUT\r\n$", relay.sent), relay.sent


# -- a password beyond ASCII (our real server) -----------------------------------------------------

PASSWORD = "pässwört-ß"
WRONG = "fälsch-€"


def traces_of(password: str) -> list[str]:
    """The forms a password could leak in: as typed, UTF-8 bytes shown, and SASL PLAIN's base64."""
    utf8 = password.encode()
    return [password, repr(utf8)[2:-1], base64.b64encode(b"\0me\0" + utf8).decode()]


@pytest.fixture
async def remote_utf8(tmp_path: Path) -> AsyncIterator[Remote]:
    accounts = Accounts(user="me", password=PASSWORD, addresses=frozenset({"me@pizzamail.localhost"}))
    async with remote_server(tmp_path / "remote-utf8", accounts=accounts) as server:
        yield server


async def test_a_password_beyond_ascii_logs_in_with_sasl_plain_and_never_shows(
    remote_utf8: Remote, store: Store, blobs: BlobStore, secrets: SecretStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    relay = await Relay(target=remote_utf8.port).start()
    config = watch_config(remote_utf8, port=relay.port)
    try:
        secrets.set("watch:remote", WRONG)
        async with watching(store, blobs, config, secrets) as w:
            refused = await w.until_outcome("refused the login")
            secrets.set("watch:remote", PASSWORD)
            await w.until_outcome("connected again")
            await remote_utf8.deliver("Behind a UTF-8 password")
            [task] = await w.until_tasks(1)
    finally:
        await relay.close()
    assert "Behind a UTF-8 password" in task["body"]
    assert b"AUTHENTICATE PLAIN" in relay.sent and b" LOGIN " not in relay.sent
    with pytest.raises(AccountError) as failed:  # what `pizzamail watch test` shows
        await probe("remote", watch_config(remote_utf8).watches["remote"], WRONG, tls=None)
    shown = "\n".join([refused, failed.value.outcome, caplog.text,
                       *(str(r.msg) + str(r.args) for r in caplog.records)])
    assert "refused the login of 'me'" in failed.value.message
    for leak in traces_of(PASSWORD) + traces_of(WRONG):
        assert leak not in shown


async def test_a_password_beyond_ascii_without_auth_plain_is_a_clear_login_error() -> None:
    """imaplib's LOGIN is ASCII only: a server without AUTH=PLAIN cannot take such a password."""
    greeting = b"* OK [CAPABILITY IMAP4rev1 IDLE] no SASL here\r\n"
    answers = {**ANSWERS, b"CAPABILITY": (b"* CAPABILITY IMAP4rev1 IDLE\r\n{tag} OK listed\r\n",)}
    async with Scripted(answers, greeting=greeting) as remote:
        session = await ImapSession.open(settings(remote.port), reply_seconds=HOUR)
        async with session:
            with pytest.raises(AccountError) as failed:
                await session.login(PASSWORD)
    assert failed.value.kind == "login" and "offers no AUTH=PLAIN" in failed.value.message
    assert all(leak not in failed.value.outcome for leak in traces_of(PASSWORD))
    assert b"LOGIN" not in b"".join(remote.heard) and b"AUTHENTICATE" not in b"".join(remote.heard)


@pytest.mark.parametrize(("password", "refusal"), [
    pytest.param("secret-pw", {b"LOGIN": (b'{tag} BAD unknown arguments: LOGIN me "secret-pw"\r\n',)},
                 id="LOGIN"),
    pytest.param(PASSWORD, {b"AUTHENTICATE": (b"+ \r\n",),
                            b"+": (f"{{tag}} NO no user has the password {PASSWORD}\r\n".encode(),)},
                 id="AUTHENTICATE-PLAIN"),
])
async def test_a_refusal_that_quotes_the_password_is_not_repeated(
    password: str, refusal: dict[bytes, tuple[bytes, ...]]
) -> None:
    async with Scripted({**ANSWERS, **refusal}) as remote:
        session = await ImapSession.open(settings(remote.port), reply_seconds=HOUR)
        async with session:
            with pytest.raises(AccountError) as failed:
                await session.login(password)
    assert failed.value.kind == "login" and "***" in failed.value.message
    assert all(leak not in failed.value.outcome for leak in traces_of(password))
