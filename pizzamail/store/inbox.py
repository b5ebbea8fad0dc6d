"""The owner's own mailbox (``[mailbox] mode = "imap"``): where the reader is in its INBOX, and each
mail it took.

An ``account_mail`` row is unique per mailbox, UIDVALIDITY and UID, and written in the transaction
of whatever the mail became (a task, a decision, a stop, a triage run, a refusal): a mail is taken
once, across reconnects and crashes. A mail already taken under another UID (the same Message-ID)
is not taken again either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pizzamail.store import Store, Tx, now
from pizzamail.store.threads import log_event

Claim = Callable[[Tx], Awaitable[bool]]
"""Made first inside the transaction that records a mail: False means the mail was taken before, and
nothing is recorded (the caller answers as for a duplicate)."""


@dataclass(frozen=True, kw_only=True)
class Place:
    """Where the reader is in one folder of the account."""

    mailbox: str
    """``user@host:port/folder``: the UIDs below belong to it"""
    uidvalidity: int
    last_uid: int
    last_at: str | None = None
    last_outcome: str | None = None


@dataclass(frozen=True, kw_only=True)
class Seen:
    """One mail of the account: its folder's identity, UIDVALIDITY and UID, and its Message-ID."""

    mailbox: str
    folder: str
    uidvalidity: int
    uid: int
    message_id: str | None


@dataclass(frozen=True, kw_only=True)
class Taken:
    uid: int
    message_id: str | None
    outcome: str


async def find_place(store: Store, folder: str) -> Place | None:
    row = await store.fetchone("SELECT mailbox, uidvalidity, last_uid, last_at, last_outcome"
                               " FROM account_folders WHERE folder = ?", (folder,))
    return None if row is None else Place(**dict(row))


async def start_at(store: Store, folder: str, place: Place, *, note: str) -> None:
    """The reader goes on after ``place.last_uid`` (a first connect, or a new UIDVALIDITY)."""
    async with store.write() as db:
        await db.execute(
            "INSERT INTO account_folders(folder, mailbox, uidvalidity, last_uid, last_at, last_outcome)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(folder) DO UPDATE SET mailbox = excluded.mailbox,"
            " uidvalidity = excluded.uidvalidity, last_uid = excluded.last_uid, last_at = excluded.last_at,"
            " last_outcome = excluded.last_outcome",
            (folder, place.mailbox, place.uidvalidity, place.last_uid, now(), note))
        await log_event(db, "mailbox.start", folder=folder, uidvalidity=place.uidvalidity, uid=place.last_uid)


async def claim(db: Tx, seen: Seen, *, outcome: str) -> bool:
    """Inside the transaction of what the mail becomes: False when it was taken before (by UID or by
    Message-ID); either way the folder's last UID moves past it."""
    await _advance(db, seen)
    if seen.message_id is not None:
        async with db.execute("SELECT 1 FROM account_mail WHERE message_id = ?", (seen.message_id,)) as cur:
            if await cur.fetchone() is not None:
                return False
    cursor = await db.execute(
        "INSERT INTO account_mail(mailbox, uidvalidity, uid, message_id, outcome, handled_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(mailbox, uidvalidity, uid) DO NOTHING",
        (seen.mailbox, seen.uidvalidity, seen.uid, seen.message_id, outcome, now()))
    return cursor.rowcount > 0


def claimer(seen: Seen, *, outcome: str) -> Claim:
    """The :data:`Claim` of ``seen``, recorded as ``outcome``."""
    async def claimed(db: Tx) -> bool:
        return await claim(db, seen, outcome=outcome)
    return claimed


async def passed_over(store: Store, seen: Seen) -> None:
    """A mail that is not pizzamail's (to nobody of it, or its own): only the last UID moves on."""
    async with store.write() as db:
        await _advance(db, seen)


async def _advance(db: Tx, seen: Seen) -> None:
    await db.execute(
        "UPDATE account_folders SET last_uid = CASE WHEN last_uid > ? THEN last_uid ELSE ? END"
        " WHERE folder = ? AND uidvalidity = ?", (seen.uid, seen.uid, seen.folder, seen.uidvalidity))


async def taken(store: Store, mailbox: str) -> list[Taken]:
    """What the reader took from ``mailbox``, in UID order."""
    rows = await store.fetchall("SELECT uid, message_id, outcome FROM account_mail WHERE mailbox = ?"
                                " ORDER BY uidvalidity, uid", (mailbox,))
    return [Taken(**dict(row)) for row in rows]
