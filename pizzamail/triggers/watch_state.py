"""What a watch remembers in the store: where it is in the remote folder, and what it handled.

A mail is handled in one transaction: its ``watched_mail`` row (unique per watch, UIDVALIDITY and
UID), the task :func:`~pizzamail.triggers.post.post_task` records, and the watch's progress. After a
crash a mail is either handled in full or not at all (and then handled at the next connect); the
unique row means it can never become a second task.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import aiosqlite

from pizzamail.store import Store, now
from pizzamail.store.blobs import BlobStore
from pizzamail.store.threads import log_event
from pizzamail.triggers.post import Posted, TriggerMail, post_task
from pizzamail.triggers.watch_imap import FolderStatus

log = logging.getLogger("pizzamail.triggers")


@dataclass(frozen=True, kw_only=True)
class Handled:
    """Where one mail came from: the watch, the folder's UIDVALIDITY and the mail's UID."""

    watch: str
    uidvalidity: int
    uid: int
    message_id: str | None = None
    """the remote mail's own Message-ID, kept for the audit trail"""


async def begin(store: Store, name: str, status: FolderStatus, *, mailbox: str) -> int:
    """At each connect: the last UID handled, deciding the start point on first use or a new UIDVALIDITY.

    A first connect starts at UIDNEXT, so the mail already in the folder is not turned into tasks;
    so does a watch pointed at another ``mailbox`` (``user@host:port/folder``), whose UIDs are others.
    """
    row = await store.fetchone("SELECT uidvalidity, last_uid, mailbox FROM watches WHERE name = ?", (name,))
    known = row is not None and row["uidvalidity"] is not None and row["mailbox"] == mailbox
    if row is not None and known and row["uidvalidity"] == status.uidvalidity:
        return int(row["last_uid"])
    start = status.uidnext - 1
    if row is None or not known:
        note = (f"started at UID {status.uidnext} of {mailbox}: the {status.exists} mail(s) already in the"
                " folder are not turned into tasks")
        log.info("watch %s: %s", name, note)
    else:
        note = (f"UIDVALIDITY changed from {row['uidvalidity']} to {status.uidvalidity} (the folder was"
                f" recreated or renumbered): restarted at UID {status.uidnext};"
                " mail already there is left alone")
        log.warning("watch %s: %s", name, note)
    async with store.write() as db:
        await db.execute(
            "INSERT INTO watches(name, mailbox, uidvalidity, last_uid, last_at, last_outcome)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET mailbox = excluded.mailbox,"
            " uidvalidity = excluded.uidvalidity, last_uid = excluded.last_uid, last_at = excluded.last_at,"
            " last_outcome = excluded.last_outcome",
            (name, mailbox, status.uidvalidity, start, now(), note))
        await log_event(db, "watch.start", watch=name, uidvalidity=status.uidvalidity, uid=start)
    return start


async def record(
    store: Store, blobs: BlobStore, handled: Handled, mail: TriggerMail, *, one_thread: bool
) -> Posted | None:
    """The mail's task, unless this mail was handled before (then None). Advances ``last_uid``."""
    async with store.write() as db:
        cursor = await db.execute(
            "INSERT INTO watched_mail(watch, uidvalidity, uid, message_id, handled_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT(watch, uidvalidity, uid) DO NOTHING",
            (handled.watch, handled.uidvalidity, handled.uid, handled.message_id, now()))
        if cursor.rowcount == 0:
            await _advance(db, handled.watch, handled.uid)
            return None
        async with db.execute("SELECT thread_id FROM watches WHERE name = ?", (handled.watch,)) as rows:
            row = await rows.fetchone()
        thread_id = row["thread_id"] if row is not None and one_thread else None
        posted = await post_task(db, blobs, mail, thread_id=thread_id)
        await db.execute("UPDATE watched_mail SET run_id = ? WHERE watch = ? AND uidvalidity = ? AND uid = ?",
                         (posted.run_id, handled.watch, handled.uidvalidity, handled.uid))
        await _advance(db, handled.watch, handled.uid)
        await db.execute(
            "UPDATE watches SET thread_id = CASE WHEN ? THEN ? ELSE thread_id END, last_at = ?,"
            " last_outcome = ? WHERE name = ?",
            (one_thread, posted.thread_id, now(), f"run {posted.run_id} (UID {handled.uid})", handled.watch))
    return posted


async def _advance(db: aiosqlite.Connection, name: str, uid: int) -> None:
    await db.execute("UPDATE watches SET last_uid = max(last_uid, ?) WHERE name = ?", (uid, name))


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
