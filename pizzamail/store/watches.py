"""Watched remote mailboxes: per watch where it is in the remote folder, and each mail it handled.

A ``watched_mail`` row is unique per watch, UIDVALIDITY and UID, and written in the transaction
that records the mail's task: a mail never becomes two tasks, across reconnects and restarts.
"""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.store import Store, Tx, now
from pizzamail.store.threads import log_event

_COLUMNS = "name, mailbox, uidvalidity, last_uid, thread_id, state, last_at, last_outcome"


@dataclass(frozen=True, kw_only=True)
class Watch:
    name: str
    mailbox: str | None
    """``user@host:port/folder`` the UIDs below belong to (None: never connected)"""
    uidvalidity: int | None
    last_uid: int
    thread_id: int | None
    state: str | None
    last_at: str | None
    last_outcome: str | None


@dataclass(frozen=True, kw_only=True)
class Handled:
    """Where one mail came from: the watch, the folder's UIDVALIDITY and the mail's UID."""

    watch: str
    uidvalidity: int
    uid: int
    message_id: str | None = None
    """the remote mail's own Message-ID, kept for the audit trail"""


async def list_watches(store: Store) -> list[Watch]:
    rows = await store.fetchall(f"SELECT {_COLUMNS} FROM watches ORDER BY name")
    return [Watch(**dict(row)) for row in rows]


async def find_watch(store: Store, name: str) -> Watch | None:
    row = await store.fetchone(f"SELECT {_COLUMNS} FROM watches WHERE name = ?", (name,))
    return None if row is None else Watch(**dict(row))


async def start_at(
    store: Store, name: str, *, mailbox: str, uidvalidity: int, uid: int, note: str
) -> None:
    """The watch goes on after ``uid`` of ``mailbox`` (a first connect, or a new UIDVALIDITY)."""
    async with store.write() as db:
        await db.execute(
            "INSERT INTO watches(name, mailbox, uidvalidity, last_uid, last_at, last_outcome)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET mailbox = excluded.mailbox,"
            " uidvalidity = excluded.uidvalidity, last_uid = excluded.last_uid, last_at = excluded.last_at,"
            " last_outcome = excluded.last_outcome",
            (name, mailbox, uidvalidity, uid, now(), note))
        await log_event(db, "watch.start", watch=name, uidvalidity=uidvalidity, uid=uid)


async def add_handled(db: Tx, handled: Handled) -> bool:
    """False: this mail was handled before. Either way the watch's last UID moves past it."""
    cursor = await db.execute(
        "INSERT INTO watched_mail(watch, uidvalidity, uid, message_id, handled_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT(watch, uidvalidity, uid) DO NOTHING",
        (handled.watch, handled.uidvalidity, handled.uid, handled.message_id, now()))
    await db.execute("UPDATE watches SET last_uid = CASE WHEN last_uid > ? THEN last_uid ELSE ? END"
                     " WHERE name = ?", (handled.uid, handled.uid, handled.watch))
    return cursor.rowcount > 0


async def watch_thread(db: Tx, name: str) -> int | None:
    """Read inside the mail's transaction: the thread the watch continues (``thread = "one"``)."""
    async with db.execute("SELECT thread_id FROM watches WHERE name = ?", (name,)) as cursor:
        row = await cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])


async def record_run(
    db: Tx, handled: Handled, *, run_id: int, thread_id: int | None
) -> None:
    """The mail started ``run_id``; ``thread_id`` (not None) is the thread the watch continues."""
    await db.execute("UPDATE watched_mail SET run_id = ? WHERE watch = ? AND uidvalidity = ? AND uid = ?",
                     (run_id, handled.watch, handled.uidvalidity, handled.uid))
    await db.execute(
        "UPDATE watches SET thread_id = coalesce(?, thread_id), last_at = ?, last_outcome = ? WHERE name = ?",
        (thread_id, now(), f"run {run_id} (UID {handled.uid})", handled.watch))


async def set_state(store: Store, name: str, state: str, *, outcome: str | None = None) -> None:
    """The watch's connection state (and, when given, a new outcome the user should see)."""
    async with store.write() as db:
        if outcome is None:
            await db.execute("INSERT INTO watches(name, state) VALUES (?, ?)"
                             " ON CONFLICT(name) DO UPDATE SET state = excluded.state", (name, state))
            return
        await db.execute(
            "INSERT INTO watches(name, state, last_at, last_outcome) VALUES (?, ?, ?, ?) ON CONFLICT(name)"
            " DO UPDATE SET state = excluded.state, last_at = excluded.last_at,"
            " last_outcome = excluded.last_outcome", (name, state, now(), outcome))
