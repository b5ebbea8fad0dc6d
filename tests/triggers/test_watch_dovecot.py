"""Watched remote mailboxes with Dovecot as the remote: somebody else's IMAP server, over loopback.

A private Dovecot (:mod:`tests.dovecot`) serves a Maildir of its own; mail arrives the way a
delivery agent brings it (a file renamed into ``new/``), and Dovecot tells the watcher in IDLE. Each
test waits on pizzamail's store or on the wire with a bounded poll, never with fixed sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import imaplib
import logging
import re
from collections.abc import AsyncIterator, Iterator

import pytest

from pizzamail.secrets import SecretStore
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from tests.dovecot import PASSWORD, Dovecot, running, unavailable
from tests.programs import needs
from tests.triggers.watchtools import Relay, eventually, mail, watch_config, watching

pytestmark = needs(unavailable())

#: an IDLE period no test may reach: only Dovecot's push can end the wait in time
HOUR = 3600.0


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with running() as server:
        yield server


@contextlib.asynccontextmanager
async def explained(dovecot: Dovecot, relay: Relay | None = None) -> AsyncIterator[None]:
    """A failure inside comes with the end of Dovecot's log and of the traffic the relay saw."""
    try:
        yield
    except BaseException as exc:
        exc.add_note(f"Dovecot's log ends:\n{dovecot.log()}")
        if relay is not None:
            exc.add_note(f"the watcher sent, at last: {bytes(relay.sent[-600:])!r}")
            exc.add_note(f"Dovecot sent, at last: {bytes(relay.received[-1200:])!r}")
        raise


def flags_on_dovecot(server: Dovecot) -> list[set[str]]:
    """Each INBOX mail's flags as Dovecot reports them, asked read-only over plain imaplib."""
    with imaplib.IMAP4("127.0.0.1", server.port, timeout=10) as imap:
        imap.login("me", PASSWORD)
        imap.select("INBOX", readonly=True)
        _, lines = imap.fetch("1:*", "(FLAGS)")
    found = [re.search(rb"FLAGS \(([^)]*)\)", line) for line in lines if isinstance(line, bytes)]
    return [set(m[1].decode().split()) for m in found if m is not None]


async def test_mail_delivered_to_dovecot_becomes_exactly_one_task_pushed_by_idle(
    dovecot: Dovecot, store: Store, blobs: BlobStore, secrets: SecretStore
) -> None:
    dovecot.deliver(mail("Backlog", "already there"), "1.backlog")
    relay = await Relay(target=dovecot.port).start()
    try:
        config = watch_config(relay, idle_seconds=HOUR)
        async with watching(store, blobs, config, secrets) as w, explained(dovecot, relay):
            await w.until_state("watching")
            await eventually(relay.idling)
            dovecot.deliver(mail("Invoice 42 overdue", "Please pay invoice 42 by Friday."), "2.invoice")
            [task] = await w.until_tasks(1)
            dovecot.deliver(mail("Lunch?", "Lunch on Tuesday?"), "3.lunch")  # a barrier for duplicates
            tasks = await w.until_tasks(2)
    finally:
        await relay.close()
    assert "Subject: Invoice 42 overdue" in task["body"] and "Please pay invoice 42" in task["body"]
    assert [t["body"].count("Please pay invoice 42 by Friday.") for t in tasks] == [1, 0]
    assert all("already there" not in t["body"] for t in tasks)
    handled = await store.fetchall("SELECT uid FROM watched_mail ORDER BY uid")
    assert [r["uid"] for r in handled] == [2, 3]
    # Dovecot announced the mail in IDLE ("+ idling", then "* 2 EXISTS"), and the watcher said DONE
    assert re.search(rb"\r\n\+ [^\r]*\r\n(\* [^\r]*\r\n)*\* 2 EXISTS\r\n", relay.received), relay.received
    assert re.search(rb"\w+ EXAMINE \"INBOX\"\r\n\w+ UID SEARCH [^\r]*\r\n\w+ IDLE\r\nDONE\r\n", relay.sent)


@pytest.mark.parametrize(("read_only", "seen"), [(True, set()), (False, {"\\Seen"})],
                         ids=["read-only", "marks-seen"])
async def test_the_seen_flag_on_dovecot_follows_read_only(
    dovecot: Dovecot, store: Store, blobs: BlobStore, secrets: SecretStore, read_only: bool, seen: set[str]
) -> None:
    config = watch_config(dovecot, read_only=read_only)
    async with watching(store, blobs, config, secrets) as w, explained(dovecot):
        await w.until_state("watching")
        dovecot.deliver(mail("Unread until told otherwise", "hello"), "1.mail")
        await w.until_tasks(1)
        dovecot.deliver(mail("Barrier", "the first mail is long done once this one is"), "2.barrier")
        await w.until_tasks(2)

        async def both_settled() -> list[set[str]] | None:
            flags = await asyncio.to_thread(flags_on_dovecot, dovecot)
            return flags if all(seen <= f for f in flags) else None

        if seen:
            await eventually(both_settled)  # STORE comes right after the task is stored
    flags = await asyncio.to_thread(flags_on_dovecot, dovecot)
    assert [f & {"\\Seen"} for f in flags] == [seen, seen]


async def test_a_dovecot_restart_is_reconnected_without_duplicates(
    dovecot: Dovecot, store: Store, blobs: BlobStore, secrets: SecretStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pizzamail.triggers")
    async with watching(store, blobs, watch_config(dovecot), secrets) as w, explained(dovecot):
        await w.until_state("watching")
        dovecot.deliver(mail("Before the restart", "one"), "1.before")
        await w.until_tasks(1)
        await asyncio.to_thread(dovecot.stop)
        await w.until_state("retrying")  # the outcome changes with each failed retry: the log keeps all
        dovecot.deliver(mail("During the restart", "two"), "2.during")
        await asyncio.to_thread(dovecot.start)  # the same port, the same Maildir and UIDVALIDITY
        await w.until_tasks(2)
        dovecot.deliver(mail("After the restart", "three"), "3.after")
        tasks = await w.until_tasks(3)
    bodies = [t["body"] for t in tasks]
    assert ["Before the restart" in b for b in bodies] == [True, False, False]
    assert ["During the restart" in b for b in bodies] == [False, True, False]
    assert ["After the restart" in b for b in bodies] == [False, False, True]
    handled = await store.fetchall("SELECT uidvalidity, uid FROM watched_mail ORDER BY uid")
    assert [r["uid"] for r in handled] == [1, 2, 3] and len({r["uidvalidity"] for r in handled}) == 1
    assert f"the connection to 127.0.0.1:{dovecot.port} was lost" in caplog.text
    assert "connected again" in caplog.text
