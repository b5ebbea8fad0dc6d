"""SEARCH keys the index answers alone (flags, sizes, internal dates, sets, MODSEQ) evaluated key by
key over a whole batch (``Searcher._matching``): the same answers as testing message after message
(``Searcher.matches``), over random programs."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from imaptools import Client

from pizzamail.imap import search
from pizzamail.mailbox import Mailbox

FLAGS = ["\\Seen", "\\Flagged", "\\Answered", "\\Deleted", "\\Draft", "$Work"]
WORDS = ["ALL", "SEEN", "UNSEEN", "FLAGGED", "UNFLAGGED", "ANSWERED", "UNANSWERED", "DELETED", "UNDELETED",
         "DRAFT", "UNDRAFT", "RECENT", "OLD", "NEW", "KEYWORD $Work", "UNKEYWORD $Work"]


def _program(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return f"NOT {_program(rng, depth + 1)}"
    if depth < 3 and roll < 0.3:
        return f"OR {_program(rng, depth + 1)} {_program(rng, depth + 1)}"
    if depth < 3 and roll < 0.4:
        return f"({_program(rng, depth + 1)} {_program(rng, depth + 1)})"
    if roll < 0.5:
        return f"{rng.choice(['LARGER', 'SMALLER'])} {rng.randint(40, 400)}"
    if roll < 0.6:
        return f"{rng.choice(['SINCE', 'BEFORE', 'ON'])} {rng.randint(1, 5)}-Mar-2025"
    if roll < 0.7:
        first = rng.randint(1, 16)
        return f"{rng.choice(['', 'UID '])}{first}:{rng.choice([str(first + rng.randint(0, 6)), '*'])}"
    if roll < 0.75:
        return f"MODSEQ {rng.randint(1, 30)}"
    return rng.choice(WORDS)


async def _folder(mailbox: Mailbox, client: Client) -> None:
    """15 mails of assorted flags, sizes and days; a few changed since (their modseqs move), the
    newest five delivered after the session selected the folder (\\Recent to it)."""
    rng = random.Random(7)
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    for n in range(15):
        if n == 10:
            await client.command(b"s SELECT INBOX")
        day = datetime(2025, 3, 1 + n % 5, 12, tzinfo=UTC)
        await mailbox.deliver(inbox, b"Subject: %d\r\n\r\n%s\r\n" % (n, b"x" * rng.randint(0, 300)),
                              flags=rng.sample(FLAGS, rng.randint(0, 3)), internaldate=int(day.timestamp()))
    await client.command(b"n NOOP")
    await client.command(b"f STORE 2:4 +FLAGS.SILENT (\\Flagged)")
    await client.command(b"g STORE 7 -FLAGS.SILENT (\\Seen)")


@pytest.mark.parametrize("seed", range(4))
async def test_keys_the_index_answers_give_the_same_as_testing_each_message(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    await _folder(mailbox, client)
    rng = random.Random(seed)
    programs = [_program(rng).encode() for _ in range(40)]
    as_sets = [await client.command(b"a UID SEARCH " + p) for p in programs]
    monkeypatch.setattr(search, "_fields_read", lambda key: None)  # as if each read the text
    one_by_one = [await client.command(b"b UID SEARCH " + p) for p in programs]
    for program, sets, each in zip(programs, as_sets, one_by_one, strict=True):
        assert sets[-1].startswith(b"a OK") and each[-1].startswith(b"b OK"), program
        assert _found(sets) == _found(each), program
    found = [len(_found(lines).split()) - 2 for lines in as_sets]
    assert any(0 < n < 15 for n in found)  # programs that tell the messages apart


async def test_a_search_of_flags_tests_no_message_one_by_one(
    mailbox: Mailbox, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails when a flag search goes message by message (as it did: 22 times Dovecot's time)."""
    await _folder(mailbox, client)

    def forbidden(*args: object) -> bool:
        raise AssertionError("a message tested on its own")

    monkeypatch.setattr(search.Searcher, "matches", forbidden)
    lines = await client.command(b"u UID SEARCH 1:* NOT DELETED")
    assert lines[-1].startswith(b"u OK") and lines[0].startswith(b"* SEARCH ")


def _found(lines: list[bytes]) -> bytes:
    """The ``* SEARCH`` line (the first MODSEQ key also gets the folder's HIGHESTMODSEQ)."""
    [found] = [line for line in lines if line.startswith(b"* SEARCH")]
    return found
