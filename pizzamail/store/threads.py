"""Threads and their messages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pizzamail.mail.ids import bare
from pizzamail.store import Row, Store, Tx, insert, now
from pizzamail.store.events import MessageAdded, record


@dataclass(frozen=True, kw_only=True)
class NewMessage:
    """A message about to be recorded; ``blob`` names its raw bytes in the blob store."""

    message_id: str
    in_reply_to: str | None
    refs: list[str]
    direction: str
    kind: str
    sender: str
    subject: str
    body: str
    blob: str
    size: int
    folder: str | None = None
    """None: the thread's folder (INBOX, or Activity for a delegation's thread)"""
    flags: str = ""
    run_id: int | None = None


@dataclass(frozen=True, kw_only=True)
class Message:
    id: int
    thread_id: int
    message_id: str
    in_reply_to: str | None
    refs: list[str]
    direction: str
    kind: str
    sender: str
    subject: str
    body: str
    blob: str
    size: int
    folder: str
    flags: str
    run_id: int | None
    created_at: str

    @classmethod
    def from_row(cls, row: Row) -> Message:
        data = dict(row)
        data.pop("filed")
        data["refs"] = data["refs"].split()
        return cls(**data)


@dataclass(frozen=True, kw_only=True)
class Thread:
    id: int
    subject: str
    agent: str
    status: str
    created_at: str
    updated_at: str
    folder: str = "INBOX"
    messages: int = 0
    last_error: str | None = None


async def create_thread(db: Tx, *, subject: str, agent: str, folder: str = "INBOX",
                        status: str = "open") -> int:
    stamp = now()
    return await insert(
        db, "INSERT INTO threads(subject, agent, status, created_at, updated_at, folder)"
        " VALUES (?, ?, ?, ?, ?, ?)", (subject, agent, status, stamp, stamp, folder))


async def set_thread_status(db: Tx, thread_id: int, status: str) -> None:
    await db.execute(
        "UPDATE threads SET status = ?, updated_at = ? WHERE id = ?", (status, now(), thread_id)
    )


async def add_message(db: Tx, thread_id: int, msg: NewMessage, *, thread_folder: str | None = None) -> int:
    """``thread_folder``: the thread's folder, when the caller knows it (it is not read then)."""
    folder = msg.folder or thread_folder or await _thread_folder(db, thread_id)
    message = await insert(
        db, "INSERT INTO messages(thread_id, message_id, in_reply_to, refs, direction, kind, sender,"
        " subject, body, blob, size, run_id, folder, flags, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (thread_id, msg.message_id, msg.in_reply_to, " ".join(msg.refs), msg.direction,
         msg.kind, msg.sender, msg.subject, msg.body, msg.blob, msg.size, msg.run_id,
         folder, msg.flags, now()))
    record(db, MessageAdded(message=message, thread=thread_id, folder=folder,
                            direction=msg.direction, kind=msg.kind))
    return message


async def _thread_folder(db: Tx, thread_id: int) -> str:
    async with db.execute("SELECT folder FROM threads WHERE id = ?", (thread_id,)) as cursor:
        row = await cursor.fetchone()
    return str(row[0]) if row else "INBOX"


async def thread_chain(db: Tx, thread_id: int, *, keep: int = 20
                       ) -> tuple[str | None, list[str]]:
    """In-Reply-To and References continuing a thread after its latest message (read inside the
    writing transaction; rows written before ids were kept bare still have angle brackets)."""
    async with db.execute(
        "SELECT message_id, refs FROM messages WHERE thread_id = ? ORDER BY id DESC LIMIT 1", (thread_id,)
    ) as cursor:
        row = await cursor.fetchone()
    if row is None:
        return None, []
    refs = [bare(r) for r in str(row["refs"]).split() if r][-keep:]  # bounded, as mail clients do
    parent = bare(str(row["message_id"]))
    return parent, [*refs, parent]


async def thread_for_references(store: Store, message_ids: list[str]) -> int | None:
    """The thread that holds any of these Message-IDs (the newest reference wins), in one read: a
    reply names every mail of its thread before it (up to ``MAX_REFERENCES``), and a read each
    was a hop to the reader's thread each."""
    if not message_ids:
        return None
    ids = list(dict.fromkeys(message_ids))
    rows = await store.fetchall(
        f"SELECT message_id, thread_id FROM messages WHERE message_id IN ({', '.join('?' * len(ids))})", ids)
    found = {str(row[0]): int(row[1]) for row in rows}
    return next((found[mid] for mid in reversed(message_ids) if mid in found), None)


@dataclass(frozen=True, kw_only=True)
class Known:
    """What a writing transaction holds already of a mail about to be recorded (:func:`known`)."""

    duplicate: bool
    """its Message-ID is stored (a client retrying)"""
    thread_id: int | None = None
    """the thread of the newest of its references that is stored"""
    folder: str | None = None
    """that thread's folder"""


async def known(db: Tx, message_id: str, refs: list[str]) -> Known:
    """:func:`message_exists` and :func:`thread_for_references` in one statement, inside the writing
    transaction (which sees the mails written earlier in it): a mail is recorded in as few
    statements as it can be, since each costs a turn of the writer's thread."""
    ids = list(dict.fromkeys([message_id, *refs]))
    async with db.execute(
        "SELECT m.message_id, m.thread_id, t.folder FROM messages m JOIN threads t ON t.id = m.thread_id"
        f" WHERE m.message_id IN ({', '.join('?' * len(ids))})", ids
    ) as cursor:
        found = {str(row[0]): (int(row[1]), str(row[2])) for row in await cursor.fetchall()}
    if message_id in found:
        return Known(duplicate=True)
    newest = next((found[mid] for mid in reversed(refs) if mid in found), None)
    return Known(duplicate=False, thread_id=newest[0], folder=newest[1]) if newest else Known(duplicate=False)


async def message_direction(db: Tx, message_id: str) -> str | None:
    """``in`` or ``out`` for a stored message with this Message-ID, else None (checked inside the
    writing transaction, like :func:`message_exists`)."""
    async with db.execute("SELECT direction FROM messages WHERE message_id = ?", (message_id,)) as cursor:
        row = await cursor.fetchone()
    return str(row[0]) if row else None


async def message_exists(db: Tx, message_id: str) -> bool:
    """Checked inside the writing transaction, so two retries cannot both insert."""
    async with db.execute("SELECT 1 FROM messages WHERE message_id = ?", (message_id,)) as cursor:
        return await cursor.fetchone() is not None


async def thread_messages(store: Store, thread_id: int) -> list[Message]:
    rows = await store.fetchall(
        "SELECT * FROM messages WHERE thread_id = ? ORDER BY id", (thread_id,)
    )
    return [Message.from_row(r) for r in rows]


async def get_message(store: Store, message_row: int) -> Message:
    row = await store.fetchone("SELECT * FROM messages WHERE id = ?", (message_row,))
    assert row is not None, f"no message {message_row}"
    return Message.from_row(row)


async def list_threads(store: Store, *, limit: int | None = None) -> list[Thread]:
    """The threads, the most recently updated first; only the first ``limit`` of them when given
    (their counts and last errors are read for those only)."""
    newest = "ORDER BY updated_at DESC, id DESC"
    first = newest if limit is None else f"{newest} LIMIT ?"
    rows = await store.fetchall(
        "SELECT t.*, (SELECT count(*) FROM messages m WHERE m.thread_id = t.id) AS messages,"
        " (SELECT error FROM runs r WHERE r.thread_id = t.id ORDER BY r.id DESC LIMIT 1) AS last_error"
        f" FROM (SELECT * FROM threads {first}) t {newest}", () if limit is None else (limit,))
    return [Thread(**dict(r)) for r in rows]


async def count_threads(store: Store) -> int:
    row = await store.fetchone("SELECT count(*) FROM threads")
    return int(row[0]) if row else 0


async def log_event(
    db: Tx, kind: str, *, thread_id: int | None = None,
    run_id: int | None = None, **data: Any,
) -> None:
    await db.execute(
        "INSERT INTO events(at, kind, thread_id, run_id, data) VALUES (?, ?, ?, ?, ?)",
        (now(), kind, thread_id, run_id, json.dumps(data)),
    )


async def thread_subject(store: Store, thread_id: int) -> str:
    row = await store.fetchone("SELECT subject FROM threads WHERE id = ?", (thread_id,))
    return str(row["subject"]) if row else ""


async def find_message(store: Store, message_id: str) -> Message | None:
    """The stored message with this Message-ID, if there is one."""
    row = await store.fetchone("SELECT * FROM messages WHERE message_id = ?", (message_id,))
    return Message.from_row(row) if row else None
