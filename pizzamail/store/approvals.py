"""Decisions on held actions, standing "approve always" rules, and the calls those rules released.

Writes take the caller's transaction (``db``): a decision is recorded with the move it makes, a
release before the call it lets run.
"""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.store import Store, Tx, now


@dataclass(frozen=True, kw_only=True)
class NewDecision:
    action_id: int
    kind: str
    by: str
    """the approver's address, ``pizzamail`` (expiry) or ``cli:<user>``"""
    via: str
    """the Message-ID of the mail that decided, or where else it came from"""
    arguments: str
    """canonical JSON of the arguments the decision is about"""
    note: str
    applied: bool


@dataclass(frozen=True, kw_only=True)
class AppliedDecision:
    """An applied decision with what it decided about (for the run's mail headers)."""

    id: int
    action_id: int
    kind: str
    by_address: str
    via: str
    arguments: str
    at: str
    server: str
    original: str
    outgoing_blob: str | None


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: int
    server: str
    tool: str
    arguments: str
    """canonical JSON of the arguments this rule approves (an exact match), or ``*`` for any"""
    action_id: int | None
    created_at: str


@dataclass(frozen=True, kw_only=True)
class RuleRelease:
    """A call a standing rule let run."""

    id: int
    run_id: int
    call_id: str
    rule_id: int
    rule_action: int | None
    server: str
    tool: str
    arguments: str
    at: str


async def add_decision(db: Tx, decision: NewDecision) -> None:
    await db.execute(
        "INSERT INTO decisions(action_id, kind, by_address, via, arguments, note, applied, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (decision.action_id, decision.kind, decision.by, decision.via, decision.arguments, decision.note,
         int(decision.applied), now()),
    )


async def applied_decisions(store: Store, run_id: int) -> list[AppliedDecision]:
    """The applied decisions on the held actions of one run."""
    rows = await store.fetchall(
        "SELECT d.id, d.action_id, d.kind, d.by_address, d.via, d.arguments, d.at, a.server, a.original,"
        " a.outgoing_blob FROM decisions d JOIN held_actions a ON a.id = d.action_id"
        " WHERE a.run_id = ? AND d.applied = 1", (run_id,))
    return [AppliedDecision(**dict(r)) for r in rows]


async def add_rule(db: Tx, *, server: str, tool: str, arguments: str,
                   action_id: int | None) -> None:
    """A standing rule; the same rule again changes nothing."""
    await db.execute(
        "INSERT INTO approval_rules(server, tool, arguments, action_id, created_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (server, tool, arguments, action_id, now()),
    )


async def rules(store: Store) -> list[Rule]:
    return [Rule(**dict(r)) for r in await store.fetchall("SELECT * FROM approval_rules ORDER BY id")]


async def remove_rule(db: Tx, rule_id: int) -> bool:
    cursor = await db.execute("DELETE FROM approval_rules WHERE id = ?", (rule_id,))
    return cursor.rowcount == 1


async def matching_rule(store: Store, *, server: str, tool: str, arguments: str) -> Rule | None:
    """The oldest rule for this exact call (``arguments``: canonical JSON) or for any call of the tool."""
    row = await store.fetchone(
        "SELECT * FROM approval_rules WHERE server = ? AND tool = ? AND arguments IN (?, '*') ORDER BY id",
        (server, tool, arguments))
    return Rule(**dict(row)) if row else None


async def record_release(db: Tx, *, run_id: int, call_id: str, rule: Rule,
                         arguments: str) -> bool:
    """False when this call was recorded as released before."""
    cursor = await db.execute(
        "INSERT INTO rule_releases(run_id, call_id, rule_id, rule_action, server, tool, arguments, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (run_id, call_id, rule.id, rule.action_id, rule.server, rule.tool, arguments, now()))
    return cursor.rowcount == 1


async def was_released(db: Tx, run_id: int, call_id: str) -> bool:
    async with db.execute("SELECT 1 FROM rule_releases WHERE run_id = ? AND call_id = ?",
                          (run_id, call_id)) as cursor:
        return await cursor.fetchone() is not None


async def rule_releases(store: Store, run_id: int) -> list[RuleRelease]:
    rows = await store.fetchall("SELECT * FROM rule_releases WHERE run_id = ?", (run_id,))
    return [RuleRelease(**dict(r)) for r in rows]
