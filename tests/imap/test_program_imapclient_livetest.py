"""IMAPClient's own live test suite (``imapclient.livetest``, shipped in the IMAPClient package; it
passes against Dovecot), run unchanged against our server on loopback through its unittest API,
the way its ``main()`` sets it up.

Every test must pass, except the two that assume a server slower than 1 ms, and tests that fail
inside the client, before or after everything they ask of the server checked out (named below with
the line their traceback must show). A test the suite skips must skip for an extension we lack.
"""

from __future__ import annotations

import asyncio
import configparser
import contextlib
import imaplib
import io
import unittest
from pathlib import Path

import pytest
from imapclient import IMAPClient, livetest
from imapclient.config import parse_config_file
from imaptools import ACCOUNTS

from pizzamail.imap import ImapServer, Limits
from pizzamail.mailbox import Mailbox

pytestmark = pytest.mark.slow  # its IDLE test sleeps 10 s by design

#: tests that assume a server slower than 1 ms: they may fail, or pass on a loaded machine
SLOW_SERVER_ONLY = {
    "TestSocketTimeout.test_small_connection_timeout_fail",  # a loopback connect over 1 ms
    "TestSocketTimeout.test_small_read_timeout_fail",  # a NOOP answered in over 10 µs
}
#: test -> what its traceback must show when it fails inside the client
CLIENT_DEFECTS = {
    # IMAPClient 4 made Envelope a dataclass; its test_fetch still compares one as a sequence,
    # the last step, after the flags, MODSEQ and message bytes it checks first all matched.
    "TestWithUIDs.test_fetch": "First sequence has no length",
    "TestWithoutUIDs.test_fetch": "First sequence has no length",
}
if not hasattr(imaplib.IMAP4, "move"):
    # MOVE by sequence number goes through imaplib.IMAP4.move, which imaplib gained after
    # Python 3.11 (CPython gh-77508): the client fails before anything reaches a server.
    CLIENT_DEFECTS["TestWithoutUIDs.test_move"] = "Unknown IMAP4 command: 'move'"

#: why a test may be skipped: an extension we do not offer (or a Gmail-only test)
SKIP_REASONS = ("Server doesn't support", "test instance not configured for UID operations")


def _config(tmp_path: Path, port: int) -> object:
    ini = configparser.ConfigParser()
    ini["DEFAULT"] = {"host": "127.0.0.1", "port": str(port), "ssl": "false", "username": ACCOUNTS.user,
                      "password": ACCOUNTS.password, "timeout": "10"}
    path = tmp_path / "livetest.ini"
    with path.open("w") as f:
        ini.write(f)
    return parse_config_file(str(path))


def _logout_or_close(client: IMAPClient) -> None:
    """livetest's ``quiet_logout``, which also closes the socket when logging out fails with an
    OSError: after its read-timeout test timed out (a NOOP not answered within 1 ms, common on a
    loaded machine) the socket cannot be read, and livetest left it to the garbage collector,
    whose unclosed-socket warning then failed this test."""
    try:
        client.logout()
    except livetest.IMAPClientError:
        pass
    except OSError:
        with contextlib.suppress(OSError):
            client.shutdown()


def _suite(conf: object, monkeypatch: pytest.MonkeyPatch) -> unittest.TestSuite:
    """What ``imapclient.livetest.main()`` runs: the general tests, the socket timeout tests, and
    the message tests once with UIDs and once with sequence numbers."""
    monkeypatch.setattr(livetest, "quiet_logout", _logout_or_close)
    conf.namespace = livetest.probe_host(conf)  # type: ignore[attr-defined]
    monkeypatch.setattr(livetest.TestGeneral, "conf", conf)
    monkeypatch.setattr(livetest.TestSocketTimeout, "conf", livetest.copy.copy(conf))
    classes = [livetest.TestGeneral, livetest.TestSocketTimeout]
    for name, use_uid in (("TestWithUIDs", True), ("TestWithoutUIDs", False)):
        klass = livetest.createUidTestClass(conf, use_uid=use_uid)
        klass.__name__ = name
        classes.append(klass)
    loader = unittest.TestLoader()
    return unittest.TestSuite(loader.loadTestsFromTestCase(k) for k in classes)


def _name(test: unittest.TestCase) -> str:
    return f"{type(test).__name__}.{test._testMethodName}"


async def test_imapclient_livetest_passes(
    tmp_path: Path, mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox, accounts=ACCOUNTS,
                                    limits=Limits(login_delay=0.01))
    report = io.StringIO()

    def run() -> unittest.TestResult:  # in a thread: the server answers on this test's loop
        suite = _suite(_config(tmp_path, server.port), monkeypatch)
        return unittest.TextTestRunner(stream=report, verbosity=2).run(suite)

    try:
        result = await asyncio.to_thread(run)
    finally:
        await server.close()
    print(report.getvalue())
    failed = {_name(t): trace for t, trace in result.failures + result.errors}
    unexpected = {name: trace for name, trace in failed.items() if name not in SLOW_SERVER_ONLY
                  and CLIENT_DEFECTS.get(name, "\0") not in trace}
    assert not unexpected, "\n\n".join(f"{name}\n{trace}" for name, trace in unexpected.items())
    bad_skips = [(_name(t), why) for t, why in result.skipped if not why.startswith(SKIP_REASONS)]
    assert not bad_skips
    assert result.testsRun - len(result.skipped) >= 40  # the suite really ran
