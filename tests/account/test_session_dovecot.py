"""The account session's writes against Dovecot as the user's own server: folders by SPECIAL-USE,
CREATE, APPEND with its UID, a search by Message-ID and UID EXPUNGE, each seen by a second client."""

from __future__ import annotations

import imaplib
from collections.abc import AsyncIterator, Iterator

import pytest

from pizzamail.account.session import Account, AccountError, ImapSession
from tests.dovecot import PASSWORD, Dovecot, running, unavailable
from tests.programs import needs

pytestmark = needs(unavailable())


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with running(special_use=True) as server:
        yield server


@pytest.fixture
async def session(dovecot: Dovecot) -> AsyncIterator[ImapSession]:
    account = Account(name="test", host="127.0.0.1", port=dovecot.port, security="none", user="me",
                      section="mailbox.imap", secret="mailbox", test="pizzamail mailbox test")
    async with await ImapSession.open(account, reply_seconds=30) as opened:
        await opened.login(PASSWORD)
        yield opened


def mail(message_id: str, subject: str) -> bytes:
    return (f"From: me@example.com\r\nTo: me@example.com\r\nSubject: {subject}\r\n"
            f"Message-ID: {message_id}\r\n\r\nbody of {subject}\r\n").encode()


def subjects_seen_by_another_client(server: Dovecot, folder: str) -> list[str]:
    with imaplib.IMAP4("127.0.0.1", server.port, timeout=10) as imap:
        imap.login("me", PASSWORD)
        imap.select(f'"{folder}"', readonly=True)
        _, found = imap.uid("FETCH", "1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
        return sorted(bytes(part[1]).decode().strip().removeprefix("Subject: ")
                      for part in found if isinstance(part, tuple))


async def test_special_use_folders_are_found_and_the_delimiter_known(session: ImapSession) -> None:
    special = await session.special_folders()
    assert (special["\\Drafts"], special["\\Sent"], special["\\Trash"]) == ("Drafts", "Sent", "Trash")
    assert await session.delimiter() == "/"


async def test_create_append_search_and_expunge(dovecot: Dovecot, session: ImapSession) -> None:
    assert await session.create_folder("pizzamail/Action") is True
    assert await session.create_folder("pizzamail/Action") is False  # there already: no error
    assert "pizzamail/Action" in await session.folder_names()
    status = await session.open_folder("pizzamail/Action", read_only=False)
    first = await session.append("pizzamail/Action", mail("<one@example.com>", "One"))
    second = await session.append("pizzamail/Action", mail("<two@example.com>", "Two"))
    assert session.offers("UIDPLUS")
    assert (first, second) == ((status.uidvalidity, 1), (status.uidvalidity, 2))
    assert await session.search_header("Message-ID", "<two@example.com>") == [2]
    assert await session.search_header("Message-ID", "<three@example.com>") == []
    headers = await session.headers([1, 2], ("Message-ID",))
    assert b"<one@example.com>" in headers[1] and b"<two@example.com>" in headers[2]
    assert subjects_seen_by_another_client(dovecot, "pizzamail/Action") == ["One", "Two"]
    await session.expunge([1])
    assert subjects_seen_by_another_client(dovecot, "pizzamail/Action") == ["Two"]


async def test_a_missing_folder_names_the_check_command(session: ImapSession) -> None:
    with pytest.raises(AccountError) as missing:
        await session.open_folder("Nowhere", read_only=True)
    assert missing.value.kind == "folder" and "pizzamail mailbox test" in (missing.value.hint or "")
    with pytest.raises(AccountError) as refused:
        await session.append("Nowhere", mail("<x@example.com>", "X"))
    assert refused.value.kind == "folder"
