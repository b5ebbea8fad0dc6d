"""The agent's memory across threads: short notes it chose to keep (``remember``/``recall``)."""

from __future__ import annotations

from dataclasses import dataclass

import aiosqlite

from pizzamail.store import Store, now


@dataclass(frozen=True, kw_only=True)
class Note:
    id: int
    text: str
    thread_id: int | None
    created_at: str


async def add_note(db: aiosqlite.Connection, text: str, *, thread_id: int, run_id: int,
                   call_id: str) -> bool:
    """Keep a note; the same call of the same run (a resumed run) never adds it twice."""
    cursor = await db.execute(
        "INSERT OR IGNORE INTO memory(text, thread_id, run_id, call_id, created_at)"
        " VALUES (?, ?, ?, ?, ?)", (text, thread_id, run_id, call_id, now()),
    )
    return cursor.rowcount == 1


async def notes(store: Store, query: str = "", *, limit: int = 50) -> list[Note]:
    """The newest notes first; with ``query``, only those containing every one of its words."""
    rows = await store.fetchall("SELECT id, text, thread_id, created_at FROM memory ORDER BY id DESC")
    words = query.lower().split()
    found = [Note(**dict(r)) for r in rows if all(w in str(r["text"]).lower() for w in words)]
    return found[:limit]
