"""The agent's memory across threads: short notes it chose to keep (``remember``/``recall``), the
few a task's prompt shows (:func:`relevant_notes`), and the user's changes (list, edit, delete).

The full-text search is one function, :func:`_matching`: SQLite's FTS5 index is kept by the writes
below (:func:`_index`), PostgreSQL's is a generated ``tsvector`` column that keeps itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pizzamail.store import Store, Tx, dialect_of, inserted, now
from pizzamail.store.sql import SQLITE

_WORD = re.compile(r"\w{3,}")
#: words too common to say what a task is about
_COMMON = frozenset((
    "the", "and", "for", "you", "your", "with", "this", "that", "from", "are", "was", "were", "have",
    "has", "had", "not", "but", "all", "can", "will", "would", "should", "could", "please", "about",
    "into", "out", "our", "their", "there", "here", "what", "when", "which", "who", "how", "why",
    "hello", "thanks", "thank", "regards", "best", "dear", "some", "any", "more", "most", "also",
    "just", "than", "then", "them", "they", "its"))
_MAX_WORDS = 30


@dataclass(frozen=True, kw_only=True)
class Note:
    id: int
    text: str
    thread_id: int | None
    created_at: str


async def add_note(db: Tx, text: str, *, thread_id: int, run_id: int,
                   call_id: str) -> bool:
    """Keep a note; the same call of the same run (a resumed run) never adds it twice."""
    new = await inserted(
        db, "INSERT INTO memory(text, thread_id, run_id, call_id, created_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (run_id, call_id) DO NOTHING", (text, thread_id, run_id, call_id, now()))
    if new is None:
        return False
    await _index(db, new, text)
    return True


async def delete_note(db: Tx, note_id: int) -> bool:
    """Forget a note; False when there is none with that id."""
    cursor = await db.execute("DELETE FROM memory WHERE id = ?", (note_id,))
    await _index(db, note_id, None)
    return cursor.rowcount == 1


async def edit_note(db: Tx, note_id: int, text: str) -> bool:
    """Replace a note's text; False when there is none with that id."""
    cursor = await db.execute("UPDATE memory SET text = ? WHERE id = ?", (text, note_id))
    if cursor.rowcount != 1:
        return False
    await _index(db, note_id, text)
    return True


async def _index(db: Tx, note_id: int, text: str | None) -> None:
    """SQLite's FTS5 index follows a note's text (None: the note is gone)."""
    if dialect_of(db) != SQLITE:
        return
    await db.execute("DELETE FROM memory_search WHERE rowid = ?", (note_id,))
    if text is not None:
        await db.execute("INSERT INTO memory_search(rowid, text) VALUES (?, ?)", (note_id, text))


async def notes(store: Store, query: str = "", *, limit: int = 50) -> list[Note]:
    """The newest notes first; with ``query``, only those containing every one of its words."""
    rows = await store.fetchall("SELECT id, text, thread_id, created_at FROM memory ORDER BY id DESC")
    words = query.lower().split()
    found = [Note(**dict(r)) for r in rows if all(w in str(r["text"]).lower() for w in words)]
    return found[:limit]


async def get_note(store: Store, note_id: int) -> Note | None:
    row = await store.fetchone("SELECT id, text, thread_id, created_at FROM memory WHERE id = ?", (note_id,))
    return Note(**dict(row)) if row else None


async def relevant_notes(store: Store, task: str, *, recent: int = 5, matching: int = 5,
                         max_chars: int = 2000) -> list[Note]:
    """The notes a task's prompt shows: those that best match its text, then the most recent, at
    most ``max_chars`` of note text in all; oldest first."""
    rows = await store.fetchall(
        "SELECT id, text, thread_id, created_at FROM memory ORDER BY id DESC LIMIT ?", (recent,))
    chosen = {n.id: n for n in await _matching(store, task, matching)}
    for row in rows:
        chosen.setdefault(row["id"], Note(**dict(row)))
    kept, used = [], 0
    for note in chosen.values():  # best matches first, so they are what the budget keeps
        if used + len(note.text) <= max_chars:
            kept.append(note)
            used += len(note.text)
    return sorted(kept, key=lambda n: n.id)


async def _matching(store: Store, text: str, limit: int) -> list[Note]:
    """The notes sharing the most telling words with ``text``, best first (ranked by the engine:
    FTS5's bm25, PostgreSQL's ts_rank); a word also finds longer ones: "unit" finds "units"."""
    words = list(dict.fromkeys(w for w in _WORD.findall(text.lower()) if w not in _COMMON))
    if not words or limit <= 0:
        return []
    if store.dialect != SQLITE:
        # each word a quoted tsquery lexeme (\w holds no quote), so nothing from the mail is syntax
        query = " | ".join(f"'{w}':*" for w in words[:_MAX_WORDS])
        rows = await store.fetchall(
            "SELECT id, text, thread_id, created_at FROM memory WHERE search @@ to_tsquery('simple', ?)"
            " ORDER BY ts_rank(search, to_tsquery('simple', ?)) DESC, id DESC LIMIT ?",
            (query, query, limit))
        return [Note(**dict(r)) for r in rows]
    # each word quoted (no FTS syntax from the mail gets through)
    query = " OR ".join(f'"{w}"*' for w in words[:_MAX_WORDS])
    rows = await store.fetchall(
        "SELECT memory.id, memory.text, memory.thread_id, memory.created_at FROM memory_search"
        " JOIN memory ON memory.id = memory_search.rowid WHERE memory_search MATCH ?"
        " ORDER BY memory_search.rank LIMIT ?", (query, limit))
    return [Note(**dict(r)) for r in rows]
