"""Held actions: tool calls the policy holds for the user's approval.

A held action is written in the same transaction as the run step that holds it, so after a crash
either both exist or neither does. Its arguments are kept as canonical JSON with their SHA-256, so a
later decision can prove it approves exactly these arguments; the nonce is the one-time token the
approval request carries.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from pizzamail.store import Row, Store, Tx, now


def canonical_json(arguments: dict[str, Any]) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def arguments_hash(arguments: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(arguments).encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class NewHeldAction:
    run_id: int
    thread_id: int
    call_id: str
    tool: str
    """the name the model called"""
    server: str
    """``builtin`` or the MCP server"""
    original: str
    """the tool's name at its source"""
    arguments: dict[str, Any]
    reason: str
    idempotent: bool = False
    interrupted: bool = False
    """held as ``unknown``: a call a standing rule released was cut off by a crash (it may have run)"""


@dataclass(frozen=True, kw_only=True)
class HeldAction:
    id: int
    run_id: int
    thread_id: int
    call_id: str
    tool: str
    server: str
    original: str
    arguments: str
    arguments_sha256: str
    nonce: str
    reason: str
    status: str
    created_at: str
    decided_at: str | None
    approved_arguments: str | None = None
    """canonical JSON of the arguments the user approved (edited ones, or the original)"""
    note: str = ""
    """the user's words that go back to the agent (a deny reason, feedback)"""
    result: str | None = None
    result_is_error: int = 0
    idempotent: int = 0
    request_message_id: str | None = None
    action_copy: str | None = None
    """the Maildir name of the request's copy in ``Action`` once it was put there"""
    outgoing_blob: str | None = None
    """``draft_email`` approved by sending the edited draft: the blob of the bytes to relay"""
    outgoing_rcpts: str | None = None
    """and the envelope recipients it was sent to (a JSON list)"""
    reminded_at: str | None = None

    @property
    def parsed_arguments(self) -> dict[str, Any]:
        value = json.loads(self.arguments)
        assert isinstance(value, dict)
        return value

    @property
    def release_arguments(self) -> dict[str, Any]:
        """What runs once approved: the user's edited arguments, or the original ones."""
        value = json.loads(self.approved_arguments or self.arguments)
        assert isinstance(value, dict)
        return value

    @property
    def is_draft(self) -> bool:
        """Mail to someone else: sent through the outgoing relay once approved."""
        return self.server == "builtin" and self.tool == "draft_email"

    @property
    def label(self) -> str:
        return self.tool if self.server == "builtin" else f"{self.server}: {self.original}"


async def hold_action(db: Tx, action: NewHeldAction) -> bool:
    """Record a held action (status ``held``, or ``unknown`` if interrupted) inside the caller's
    transaction.

    Idempotent by (run, call): a second attempt changes nothing and returns False.
    """
    cursor = await db.execute(
        "INSERT INTO held_actions(run_id, thread_id, call_id, tool, server, original,"
        " arguments, arguments_sha256, nonce, reason, status, created_at, idempotent)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (action.run_id, action.thread_id, action.call_id, action.tool, action.server, action.original,
         canonical_json(action.arguments), arguments_hash(action.arguments), secrets.token_urlsafe(24),
         action.reason, "unknown" if action.interrupted else "held", now(), int(action.idempotent)),
    )
    return cursor.rowcount == 1


async def held_actions(store: Store, *, run_id: int | None = None, status: str | None = None,
                       ) -> list[HeldAction]:
    sql, params = "SELECT * FROM held_actions WHERE 1 = 1", list[object]()
    if run_id is not None:
        sql, params = sql + " AND run_id = ?", [*params, run_id]
    if status is not None:
        sql, params = sql + " AND status = ?", [*params, status]
    rows = await store.fetchall(sql + " ORDER BY id", params)
    return [HeldAction(**dict(r)) for r in rows]


def _action(row: Row | None) -> HeldAction | None:
    return HeldAction(**dict(row)) if row else None


async def action_by_id(db: Tx, action_id: int) -> HeldAction | None:
    """Read inside the caller's transaction: the state a decision is about to move."""
    async with db.execute("SELECT * FROM held_actions WHERE id = ?", (action_id,)) as cursor:
        return _action(await cursor.fetchone())


async def action_by_nonce(store: Store, nonce: str) -> HeldAction | None:
    return _action(await store.fetchone("SELECT * FROM held_actions WHERE nonce = ?", (nonce,)))


async def action_by_request(store: Store, message_id: str) -> HeldAction | None:
    """The action whose request mail has this Message-ID."""
    return _action(await store.fetchone("SELECT * FROM held_actions WHERE request_message_id = ?",
                                        (message_id,)))


async def action_named(store: Store, action_id: int, nonce: str) -> HeldAction | None:
    """The action with this id, only if it was issued this nonce."""
    return _action(await store.fetchone("SELECT * FROM held_actions WHERE id = ? AND nonce = ?",
                                        (action_id, nonce)))


async def action_for_call(store: Store, run_id: int, call_id: str) -> HeldAction | None:
    return _action(await store.fetchone("SELECT * FROM held_actions WHERE run_id = ? AND call_id = ?",
                                        (run_id, call_id)))


async def waiting_actions(store: Store, *, requested: bool = False) -> list[HeldAction]:
    """Actions still waiting for the user (``held``, or ``unknown`` after an interruption);
    ``requested``: only those whose request mail was written."""
    sql = "SELECT * FROM held_actions WHERE status IN ('held', 'unknown')"
    if requested:
        sql += " AND request_message_id IS NOT NULL"
    return [HeldAction(**dict(r)) for r in await store.fetchall(sql + " ORDER BY id")]


async def move_action(db: Tx, action_id: int, old: str, new: str, *, note: str,
                      approved: str) -> bool:
    """A decision's move, only from ``old`` (a racing decision finds nothing to move)."""
    cursor = await db.execute(
        "UPDATE held_actions SET status = ?, decided_at = ?, note = ?, approved_arguments = ?"
        " WHERE id = ? AND status = ?", (new, now(), note, approved, action_id, old))
    return cursor.rowcount == 1


async def set_outgoing(db: Tx, action_id: int, blob: str | None,
                       recipients: list[str] | None) -> None:
    """The mail an approval relays: the user's sent draft (its blob and envelope), or None."""
    rcpts = json.dumps(recipients) if recipients is not None else None
    await db.execute("UPDATE held_actions SET outgoing_blob = ?, outgoing_rcpts = ? WHERE id = ?",
                     (blob, rcpts, action_id))


async def transition(db: Tx, action_id: int, old: str, new: str, *,
                     result: str | None = None, is_error: bool = False, note: str | None = None) -> bool:
    cursor = await db.execute(
        "UPDATE held_actions SET status = ?, result = coalesce(?, result), result_is_error = ?,"
        " note = coalesce(?, note) WHERE id = ? AND status = ?",
        (new, result, int(is_error), note, action_id, old),
    )
    return cursor.rowcount == 1


async def set_request(db: Tx, action_id: int, message_id: str) -> None:
    """The request mail's Message-ID: a reply to it routes back to the action by In-Reply-To."""
    await db.execute("UPDATE held_actions SET request_message_id = ? WHERE id = ?", (message_id, action_id))


async def mark_reminded(db: Tx, action_id: int) -> bool:
    """Once only, and only while the action still waits."""
    cursor = await db.execute(
        "UPDATE held_actions SET reminded_at = ? WHERE id = ? AND status = 'held' AND reminded_at IS NULL",
        (now(), action_id))
    return cursor.rowcount == 1


async def record_copy(db: Tx, action_id: int, name: str) -> None:
    """The Maildir name of the request's copy in ``Action``."""
    await db.execute("UPDATE held_actions SET action_copy = ? WHERE id = ?", (name, action_id))


async def forget_copies(db: Tx, names: list[str]) -> None:
    if not names:
        return
    marks = ", ".join("?" * len(names))
    await db.execute(f"UPDATE held_actions SET action_copy = NULL WHERE action_copy IN ({marks})", names)
