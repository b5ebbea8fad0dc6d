"""AUTHENTICATE LOGIN (Apple Mail, Outlook): the two-prompt dialogue, SASL-IR and cancelling."""

from __future__ import annotations

import base64

from imaptools import connect

from pizzamail.imap import ImapServer

ME, PW = base64.b64encode(b"me"), base64.b64encode(b"pw")


async def test_authenticate_login_dialogue(server: ImapServer) -> None:
    c = await connect(server, login=False)
    try:
        await c.send(b"a AUTHENTICATE LOGIN\r\n")
        assert await c.line() == b"+ VXNlcm5hbWU6\r\n"  # "Username:"
        await c.send(ME + b"\r\n")
        assert await c.line() == b"+ UGFzc3dvcmQ6\r\n"  # "Password:"
        await c.send(PW + b"\r\n")
        assert (await c.line()).startswith(b"a OK [CAPABILITY IMAP4rev1 ")
    finally:
        await c.close()


async def test_authenticate_login_with_initial_response(server: ImapServer) -> None:
    c = await connect(server, login=False)
    try:
        await c.send(b"a AUTHENTICATE LOGIN " + ME + b"\r\n")
        assert await c.line() == b"+ UGFzc3dvcmQ6\r\n"
        await c.send(base64.b64encode(b"wrong") + b"\r\n")
        assert await c.line() == b"a NO [AUTHENTICATIONFAILED] Authentication failed.\r\n"
    finally:
        await c.close()


async def test_authenticate_login_cancel_and_bad_base64(server: ImapServer) -> None:
    c = await connect(server, login=False)
    try:
        await c.send(b"a AUTHENTICATE LOGIN\r\n")
        assert await c.line() == b"+ VXNlcm5hbWU6\r\n"
        await c.send(ME + b"\r\n")
        assert await c.line() == b"+ UGFzc3dvcmQ6\r\n"
        await c.send(b"*\r\n")
        assert await c.line() == b"a BAD AUTHENTICATE cancelled\r\n"
        assert await c.command(b"b AUTHENTICATE LOGIN !!!") == [b"b BAD invalid base64 in AUTHENTICATE\r\n"]
        assert await c.command(b"c AUTHENTICATE CRAM-MD5") == [
            b"c NO unsupported mechanism CRAM-MD5; use PLAIN or LOGIN\r\n"]
    finally:
        await c.close()


async def test_before_login_a_large_literal_is_refused_without_a_continuation(server: ImapServer) -> None:
    c = await connect(server, login=False)
    try:
        await c.send(b"a LOGIN {100000}\r\n")  # far below the fixture's max_literal (1 MiB)
        assert await c.line() == b"a NO [TOOBIG] Literal too large; before login at most 8192 bytes\r\n"
        # literals that add up count together: the second one is refused before it is sent
        await c.send(b"b LOGIN {5000}\r\n")
        assert await c.line() == b"+ Ready for literal data\r\n"
        await c.send(b"m" * 5000 + b" {5000}\r\n")
        assert await c.line() == b"b NO [TOOBIG] Literal too large; before login at most 8192 bytes\r\n"
        await c.send(b"c LOGIN {2}\r\n")
        assert await c.line() == b"+ Ready for literal data\r\n"
        await c.send(b"me pw\r\n")
        assert (await c.line()).startswith(b"c OK [CAPABILITY IMAP4rev1 ")
        await c.send(b"d NOOP {100000+}\r\n" + b"x" * 100000 + b"\r\n")  # after login: allowed
        assert await c.line() == b"d BAD unexpected extra arguments (at byte 6)\r\n"
    finally:
        await c.close()
