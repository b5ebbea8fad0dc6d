"""STARTTLS and implicit TLS, and who may send a password in the clear (loopback only)."""

from __future__ import annotations

import asyncio
import base64
import imaplib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from imaptools import ACCOUNTS, READ_TIMEOUT, Client, connect
from tlstools import Certificate, self_signed

from pizzamail.imap import ImapServer, Limits
from pizzamail.imap.capabilities import peer_is_loopback
from pizzamail.mailbox import Mailbox

BEFORE = b"IMAP4rev1 SASL-IR LITERAL+ ID ENABLE IDLE"
AUTH = b" AUTH=PLAIN AUTH=LOGIN"


@pytest.fixture(scope="module")
def certificate() -> Certificate:
    return self_signed()


async def start(
    mailbox: Mailbox, tls: ssl.SSLContext | None, *, local: bool = True, tls_port: int | None = None
) -> ImapServer:
    return await ImapServer.start(
        host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS, tls=tls, tls_port=tls_port,
        limits=Limits(login_delay=0.01), is_local=lambda peer: local)


@pytest.fixture
async def tls_server(mailbox: Mailbox, certificate: Certificate, tmp_path: Path) -> AsyncIterator[ImapServer]:
    server = await start(mailbox, certificate.server_context(tmp_path), tls_port=0)
    yield server
    await server.close()


@pytest.fixture
async def remote_tls_server(
    mailbox: Mailbox, certificate: Certificate, tmp_path: Path
) -> AsyncIterator[ImapServer]:
    """A server that takes every peer for a remote one."""
    server = await start(mailbox, certificate.server_context(tmp_path), local=False)
    yield server
    await server.close()


async def upgrade(c: Client, certificate: Certificate) -> None:
    await c.writer.start_tls(certificate.client_context(), server_hostname="localhost")


async def test_starttls_transcript(tls_server: ImapServer, certificate: Certificate) -> None:
    c = await connect(tls_server, login=False)
    try:
        assert await c.command(b"a CAPABILITY") == [
            b"* CAPABILITY " + BEFORE + b" STARTTLS" + AUTH + b"\r\n", b"a OK CAPABILITY completed\r\n"]
        assert await c.command(b"b STARTTLS") == [b"b OK Begin TLS negotiation now\r\n"]
        await upgrade(c, certificate)
        assert await c.command(b"c CAPABILITY") == [
            b"* CAPABILITY " + BEFORE + AUTH + b"\r\n", b"c OK CAPABILITY completed\r\n"]
        assert await c.command(b"d STARTTLS") == [b"d BAD TLS is already active\r\n"]
        assert (await c.command(b"e LOGIN me pw"))[-1].startswith(b"e OK [CAPABILITY")
        assert await c.command(b"f STARTTLS") == [
            b"f BAD STARTTLS is not allowed in the authenticated state\r\n"]
    finally:
        await c.close()


async def test_commands_pipelined_after_starttls_are_discarded(
    tls_server: ImapServer, certificate: Certificate
) -> None:
    c = await connect(tls_server, login=False)
    try:
        # A man in the middle appends a command in the clear; it must not run inside TLS.
        await c.send(b"a STARTTLS\r\nb LOGIN me pw\r\n")
        assert await c.line() == b"a OK Begin TLS negotiation now\r\n"
        await upgrade(c, certificate)
        assert await c.command(b"c NOOP") == [b"c OK NOOP completed\r\n"]
        assert await c.command(b"d SELECT INBOX") == [
            b"d BAD SELECT is not allowed in the not authenticated state\r\n"]
    finally:
        await c.close()


async def test_no_tls_configured(server: ImapServer) -> None:
    c = await connect(server, login=False)
    try:
        assert b"STARTTLS" not in (await c.command(b"a CAPABILITY"))[0]
        assert await c.command(b"b STARTTLS") == [b"b NO STARTTLS is not offered on this listener\r\n"]
    finally:
        await c.close()
    assert server.tls_port is None


async def test_remote_peer_without_tls_gets_logindisabled(mailbox: Mailbox) -> None:
    server = await start(mailbox, None, local=False)
    c = await connect(server, login=False)
    try:
        assert await c.command(b"a CAPABILITY") == [
            b"* CAPABILITY " + BEFORE + b" LOGINDISABLED\r\n", b"a OK CAPABILITY completed\r\n"]
        assert await c.command(b"b LOGIN me pw") == [
            b"b NO [PRIVACYREQUIRED] use STARTTLS or the TLS port before sending a password\r\n"]
        token = base64.b64encode(b"\x00me\x00pw")
        assert await c.command(b"c AUTHENTICATE PLAIN " + token) == [
            b"c NO [PRIVACYREQUIRED] use STARTTLS or the TLS port before sending a password\r\n"]
    finally:
        await c.close()
        await server.close()


async def test_remote_peer_may_log_in_after_starttls(
    remote_tls_server: ImapServer, certificate: Certificate
) -> None:
    c = await connect(remote_tls_server, login=False)
    try:
        assert await c.command(b"a CAPABILITY") == [
            b"* CAPABILITY " + BEFORE + b" STARTTLS LOGINDISABLED\r\n", b"a OK CAPABILITY completed\r\n"]
        await c.command(b"b STARTTLS")
        await upgrade(c, certificate)
        assert (await c.command(b"c CAPABILITY"))[0] == b"* CAPABILITY " + BEFORE + AUTH + b"\r\n"
        assert (await c.command(b"d LOGIN me pw"))[-1].startswith(b"d OK [CAPABILITY")
    finally:
        await c.close()


def _imaplib_starttls(port: int, context: ssl.SSLContext) -> None:
    with imaplib.IMAP4("127.0.0.1", port) as m:
        assert "STARTTLS" in m.capabilities
        assert m.starttls(context)[0] == "OK"
        assert "STARTTLS" not in m.capabilities  # imaplib asked again after the handshake
        assert m.login("me", "pw")[0] == "OK"
        assert m.select("INBOX")[0] == "OK"
        assert m.logout()[0] == "BYE"


def _imaplib_implicit(port: int, context: ssl.SSLContext) -> None:
    with imaplib.IMAP4_SSL("127.0.0.1", port, ssl_context=context) as m:
        assert "STARTTLS" not in m.capabilities and "AUTH=PLAIN" in m.capabilities
        assert m.login("me", "pw")[0] == "OK"
        assert m.select("INBOX")[0] == "OK"
        assert m.logout()[0] == "BYE"


async def test_imaplib_starttls_and_implicit_tls(
    tls_server: ImapServer, certificate: Certificate, sample: list[bytes]
) -> None:
    assert tls_server.tls_port not in (None, 0, tls_server.port)
    await asyncio.to_thread(_imaplib_starttls, tls_server.port, certificate.client_context())
    assert tls_server.tls_port is not None
    await asyncio.to_thread(_imaplib_implicit, tls_server.tls_port, certificate.client_context())


async def test_failed_handshake_ends_only_that_connection(tls_server: ImapServer) -> None:
    c = await connect(tls_server, login=False)
    await c.send(b"a STARTTLS\r\n")
    assert await c.line() == b"a OK Begin TLS negotiation now\r\n"
    await c.send(b"this is not a TLS client hello\r\n" * 4)
    assert await asyncio.wait_for(c.reader.read(), READ_TIMEOUT) == b""
    await c.close()
    other = await connect(tls_server)
    assert await other.command(b"n NOOP") == [b"n OK NOOP completed\r\n"]
    await other.close()


@pytest.mark.parametrize(("peer", "local"), [
    (("127.0.0.1", 5000), True),
    (("127.8.9.1", 5000), True),
    (("::1", 5000, 0, 0), True),
    (("::ffff:127.0.0.1", 5000, 0, 0), True),
    (("192.168.1.20", 5000), False),
    (("::ffff:10.0.0.1", 5000, 0, 0), False),
    (("fe80::1%eth0", 5000, 0, 2), False),
    ("/run/socket", False),
    (None, False),
])
def test_peer_is_loopback(peer: object, local: bool) -> None:
    assert peer_is_loopback(peer) is local
