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

import aiosqlite

from pizzamail.store import Store, now


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


async def hold_action(db: aiosqlite.Connection, action: NewHeldAction) -> bool:
    """Record a held action (status ``held``, or ``unknown`` if interrupted) inside the caller's
    transaction.

    Idempotent by (run, call): a second attempt changes nothing and returns False.
    """
    cursor = await db.execute(
        "INSERT OR IGNORE INTO held_actions(run_id, thread_id, call_id, tool, server, original,"
        " arguments, arguments_sha256, nonce, reason, status, created_at, idempotent)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
