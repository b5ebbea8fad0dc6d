"""What the Activity board shows: the active and recently finished runs, and their progress notes.

Read-only. The board's own memory is the ``Activity`` folder in the mail index: a status mail's
Maildir name says which run and which state it shows (:mod:`pizzamail.activity`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from pizzamail.store import Store

#: run states that are not over yet: their status mail stays, however old
ACTIVE = ("queued", "running", "waiting", "delegating")


@dataclass(frozen=True, kw_only=True)
class BoardRun:
    run: int
    thread: int
    status: str
    subject: str
    """the thread's subject"""
    task_id: str | None
    """the Message-ID of the mail the run works on (the status mail answers it)"""
    task_refs: list[str]
    """that mail's References"""
    steps: int
    """model answers so far"""
    last_tool: str | None
    error: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None


@dataclass(frozen=True, kw_only=True)
class ProgressNote:
    message: int
    """the ``messages`` row of the note in its thread"""
    run: int
    blob: str


async def board_runs(store: Store, *, finished_since: datetime) -> list[BoardRun]:
    """Runs not over yet, and those that ended at or after ``finished_since``; oldest first. The last
    tool is read for runs not over yet only: a finished run's mail does not name it. One query,
    however many runs: a board of 200 runs read each one's last tool on its own (5 % of serve's
    CPU while they worked)."""
    marks = ", ".join("?" * len(ACTIVE))
    rows = await store.fetchall(
        "SELECT r.id, r.thread_id, r.status, r.error, r.created_at, r.started_at, r.finished_at,"
        " t.subject, m.message_id, m.refs,"
        " (SELECT count(*) FROM steps s WHERE s.run_id = r.id AND s.kind = 'model') AS steps,"
        f" CASE WHEN r.status IN ({marks}) THEN"
        "  (SELECT s.data FROM steps s WHERE s.run_id = r.id AND s.kind IN ('tool', 'held', 'delegate')"
        "   ORDER BY s.seq DESC LIMIT 1) END AS tool"
        " FROM runs r JOIN threads t ON t.id = r.thread_id LEFT JOIN messages m ON m.id = r.message_id"
        f" WHERE r.status IN ({marks}) OR r.finished_at >= ? ORDER BY r.id",
        (*ACTIVE, *ACTIVE, finished_since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")),  # as now() writes
    )
    return [BoardRun(run=int(r["id"]), thread=int(r["thread_id"]), status=str(r["status"]),
                     subject=str(r["subject"]), task_id=r["message_id"],
                     task_refs=str(r["refs"] or "").split(), steps=int(r["steps"]),
                     last_tool=_tool_name(r["tool"]), error=r["error"],
                     created_at=str(r["created_at"]), started_at=r["started_at"],
                     finished_at=r["finished_at"]) for r in rows]


def _tool_name(step: str | None) -> str | None:
    """The tool a step's data names (a tool call, a held one, a delegation)."""
    if step is None:
        return None
    return str(json.loads(step).get("name") or "") or None


async def progress_notes(store: Store, run_ids: list[int], *, board: str) -> list[ProgressNote]:
    """The progress notes (``post_progress``) of these runs, oldest first, but for those filed in the
    ``board`` folder already (a delegation's thread lives there)."""
    if not run_ids:
        return []
    marks = ", ".join("?" * len(run_ids))
    rows = await store.fetchall(
        f"SELECT id, run_id, blob FROM messages WHERE kind = 'progress' AND run_id IN ({marks})"
        " AND folder != ? ORDER BY id", [*run_ids, board])
    return [ProgressNote(message=int(r["id"]), run=int(r["run_id"]), blob=str(r["blob"])) for r in rows]
