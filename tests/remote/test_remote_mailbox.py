"""RemoteMailbox against Dovecot as the user's own server: what pizzamail writes appears to every
other client of the account, exactly once, also across a crash between an APPEND and its record."""

from __future__ import annotations

import imaplib
import re
from collections.abc import AsyncIterator, Iterator

import pytest

import pizzamail.remote.box as remote_box
from pizzamail.config import ImapAccountSettings
from pizzamail.remote.box import RemoteMailbox
from pizzamail.store import Store
from tests.dovecot import PASSWORD, Dovecot, running, unavailable
from tests.programs import needs

pytestmark = needs(unavailable())


class Crash(BaseException):
    """Stands in for kill -9: nothing after it runs, nothing catches it."""


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with running(special_use=True, drafts="Brouillons") as server:
        yield server


def settings(dovecot: Dovecot) -> ImapAccountSettings:
    return ImapAccountSettings(host="127.0.0.1", port=dovecot.port, security="none", user="me@example.com")


async def opened(store: Store, dovecot: Dovecot) -> RemoteMailbox:
    """A RemoteMailbox as a service (re)started on ``store`` has it."""
    return await RemoteMailbox(store=store, settings=settings(dovecot), password=PASSWORD).open()


@pytest.fixture
async def remote(dovecot: Dovecot, store: Store) -> AsyncIterator[RemoteMailbox]:
    async with await opened(store, dovecot) as box:
        yield box


def mail(message_id: str, subject: str, *, in_reply_to: str = "") -> bytes:
    thread = f"In-Reply-To: {in_reply_to}\r\nReferences: {in_reply_to}\r\n" if in_reply_to else ""
    return (f"From: pizzamail <me+bot@example.com>\r\nTo: me@example.com\r\nSubject: {subject}\r\n"
            f"Message-ID: {message_id}\r\n{thread}\r\nbody of {subject}\r\n").encode()


def another_client(server: Dovecot, folder: str) -> list[tuple[str, str]]:
    """(Subject, In-Reply-To) of each mail in ``folder``, as a second client of the account sees it."""
    with imaplib.IMAP4("127.0.0.1", server.port, timeout=10) as imap:
        imap.login("me@example.com", PASSWORD)
        imap.select(f'"{folder}"', readonly=True)
        _, found = imap.uid("FETCH", "1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT IN-REPLY-TO)])")
        seen = []
        for part in found:
            if isinstance(part, tuple):
                text = bytes(part[1]).decode()
                subject = re.search(r"Subject: (.*)", text)
                reply = re.search(r"In-Reply-To: (.*)", text)
                seen.append((subject[1].strip() if subject else "", reply[1].strip() if reply else ""))
        return sorted(seen)


def append_by_hand(server: Dovecot, folder: str, data: bytes) -> None:
    """The user (or another program) puts a mail of their own into the folder."""
    with imaplib.IMAP4("127.0.0.1", server.port, timeout=10) as imap:
        imap.login("me@example.com", PASSWORD)
        imap.append(f'"{folder}"', None, None, data)


async def test_delivered_mail_is_seen_by_another_client_once(dovecot: Dovecot, remote: RemoteMailbox) -> None:
    inbox = await remote.folder("INBOX")
    assert inbox is not None
    reply = mail("<reply.1@example.com>", "Re: Invoice", in_reply_to="<task.1@example.com>")
    uid = await remote.deliver(inbox, reply, base="reply.1")
    assert await remote.deliver(inbox, reply, base="reply.1") == uid  # named, so delivered once
    assert another_client(dovecot, "INBOX") == [("Re: Invoice", "<task.1@example.com>")]
    action = await remote.folder("Action") or await remote.create_folder("Action")
    await remote.deliver(action, mail("<request.1@example.com>", "Approve?"), base="approval.1")
    assert another_client(dovecot, "pizzamail/Action") == [("Approve?", "")]
    assert [(m.name, m.uid) for m in await remote.messages(inbox)] == [("reply.1", uid)]


async def test_a_crash_between_append_and_record_never_makes_a_second_copy(
    dovecot: Dovecot, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise Crash()

    first = RemoteMailbox(store=store, settings=settings(dovecot), password=PASSWORD)
    async with await first.open():
        activity = await first.create_folder("Activity")
        with monkeypatch.context() as crashing:
            crashing.setattr(remote_box, "place", crash)  # the APPEND is done, its UID not written down
            with pytest.raises(Crash):
                await first.deliver(activity, mail("<status.7@example.com>", "Running"), base="status.7")
    assert another_client(dovecot, "pizzamail/Activity") == [("Running", "")]
    async with await opened(store, dovecot) as again:
        activity = await again.folder("Activity")
        assert activity is not None
        uid = await again.deliver(activity, mail("<status.7@example.com>", "Running"), base="status.7")
        assert [(m.name, m.uid) for m in await again.messages(activity)] == [("status.7", uid)]
    assert another_client(dovecot, "pizzamail/Activity") == [("Running", "")]


async def test_a_crash_before_the_append_delivers_it_once_later(
    dovecot: Dovecot, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def crash(*args: object, **kwargs: object) -> None:
        raise Crash()

    first = RemoteMailbox(store=store, settings=settings(dovecot), password=PASSWORD)
    async with await first.open():
        inbox = await first.folder("INBOX")
        assert inbox is not None
        monkeypatch.setattr(first, "_append_once", crash)  # written down, never APPENDed
        with pytest.raises(Crash):
            await first.deliver(inbox, mail("<reply.2@example.com>", "Done"), base="reply.2")
    async with await opened(store, dovecot) as again:
        inbox = await again.folder("INBOX")
        assert inbox is not None
        assert await again.messages(inbox) == []
        await again.deliver(inbox, mail("<reply.2@example.com>", "Done"), base="reply.2")
    assert another_client(dovecot, "INBOX") == [("Done", "")]


async def test_expunge_removes_only_pizzamails_own_mail(dovecot: Dovecot, remote: RemoteMailbox) -> None:
    action = await remote.create_folder("Action")
    append_by_hand(dovecot, "pizzamail/Action", mail("<mine@example.com>", "The user's own"))
    ours = await remote.deliver(action, mail("<request.3@example.com>", "Approve?"), base="approval.3")
    assert [m.name for m in await remote.messages(action)] == ["approval.3"]
    assert await remote.expunge(action, [1, ours]) == [ours]  # UID 1 is the user's
    assert another_client(dovecot, "pizzamail/Action") == [("The user's own", "")]
    assert await remote.messages(action) == []


async def test_drafts_are_the_accounts_own_found_by_special_use(
    dovecot: Dovecot, remote: RemoteMailbox
) -> None:
    drafts = await remote.folder("Drafts")
    assert drafts is not None and drafts.special_use == "\\Drafts"
    assert remote.remote_name("Drafts") == "Brouillons"
    assert remote.remote_name("Action") == "pizzamail/Action"
    draft = mail("<draft.4@example.com>", "Draft to Bob")
    await remote.deliver(drafts, draft, flags={"\\Draft"}, base="draft.4")
    assert another_client(dovecot, "Brouillons") == [("Draft to Bob", "")]


async def test_a_new_uidvalidity_finds_the_mails_again_by_message_id(
    dovecot: Dovecot, store: Store, remote: RemoteMailbox
) -> None:
    action = await remote.create_folder("Action")
    before = action.uidvalidity
    await remote.deliver(action, mail("<request.5@example.com>", "Approve?"), base="approval.5")
    await remote.close()
    dovecot.stop()
    uidlist = dovecot.maildir / ".pizzamail.Action" / "dovecot-uidlist"
    header, _, entries = uidlist.read_text().partition("\n")
    uidlist.write_text(re.sub(r" V(\d+)", lambda v: f" V{int(v[1]) + 1000}", header) + "\n" + entries)
    dovecot.start()
    action = await remote.folder("Action")
    assert action is not None and action.uidvalidity == before + 1000
    await remote.deliver(action, mail("<request.5@example.com>", "Approve?"), base="approval.5")
    assert [m.name for m in await remote.messages(action)] == ["approval.5"]
    assert another_client(dovecot, "pizzamail/Action") == [("Approve?", "")]


async def test_a_restarted_server_is_connected_to_again(dovecot: Dovecot, remote: RemoteMailbox) -> None:
    inbox = await remote.folder("INBOX")
    assert inbox is not None
    dovecot.stop()
    dovecot.start()
    await remote.deliver(inbox, mail("<reply.6@example.com>", "After the restart"), base="reply.6")
    assert another_client(dovecot, "INBOX") == [("After the restart", "")]


def delete_by_hand(server: Dovecot, folder: str, message_id: str) -> None:
    """The user deletes a mail in another client (for a request in Action: "ignore it")."""
    with imaplib.IMAP4("127.0.0.1", server.port, timeout=10) as imap:
        imap.login("me@example.com", PASSWORD)
        imap.select(f'"{folder}"')
        _, found = imap.uid("SEARCH", "HEADER", "Message-ID", message_id)
        imap.uid("STORE", found[0].decode(), "+FLAGS.SILENT", r"(\Deleted)")
        imap.expunge()


async def test_a_mail_the_user_deleted_is_no_longer_listed(dovecot: Dovecot, remote: RemoteMailbox) -> None:
    action = await remote.create_folder("Action")
    for n in (10, 20):
        request = mail(f"<request.{n}@example.com>", f"Approve {n}?")
        await remote.deliver(action, request, base=f"approval.{n}")
    delete_by_hand(dovecot, "pizzamail/Action", "<request.10@example.com>")
    assert [m.name for m in await remote.messages(action)] == ["approval.20"]
