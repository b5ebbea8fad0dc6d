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

    @property
    def parsed_arguments(self) -> dict[str, Any]:
        value = json.loads(self.arguments)
        assert isinstance(value, dict)
        return value


async def hold_action(db: aiosqlite.Connection, action: NewHeldAction) -> bool:
    """Record a held action (status ``held``) inside the caller's transaction.

    Idempotent by (run, call): a second attempt changes nothing and returns False.
    """
    cursor = await db.execute(
        "INSERT OR IGNORE INTO held_actions(run_id, thread_id, call_id, tool, server, original,"
        " arguments, arguments_sha256, nonce, reason, status, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'held', ?)",
        (action.run_id, action.thread_id, action.call_id, action.tool, action.server, action.original,
         canonical_json(action.arguments), arguments_hash(action.arguments), secrets.token_urlsafe(24),
         action.reason, now()),
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
