"""The store side of approvals: finding the action a reply names, decisions, transitions, rules.

States of a held action::

    held ──approve/edit──▶ approved ──▶ executing ──▶ done | failed
      │                        ▲            │
      ├─deny──▶ denied         │ retry      └─(restart, not idempotent)─▶ unknown ──skip──▶ skipped
      ├─feedback──▶ feedback   └────────────────────────────────────────────┘
      ├─request deleted──▶ ignored
      └─nobody decided within [approvals] expires──▶ expired

``send`` is the approval of a ``draft_email`` by sending the (edited) draft from the mail client:
it moves like ``approve`` and keeps the bytes to relay.

Every transition is one conditional UPDATE (``WHERE status = <from>``) inside the caller's
transaction, so two decisions racing for one action cannot both apply: the second sees no row
changed and is answered with the current state.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiosqlite

from pizzamail.store import Store, now
from pizzamail.store.actions import HeldAction, canonical_json
from pizzamail.store.events import ActionDecided, RunQueued, record

if TYPE_CHECKING:  # the reply reader parses mail: `pizzamail approvals` starts without it
    from pizzamail.approvals.decide import Decision, Route

#: where a decision may move an action from, and to
_MOVES: dict[str, tuple[str, str]] = {
    "approve": ("held", "approved"), "approve_always": ("held", "approved"), "edit": ("held", "approved"),
    "deny": ("held", "denied"), "feedback": ("held", "feedback"),
    "retry": ("unknown", "approved"), "skip": ("unknown", "skipped"), "ignore": ("held", "ignored"),
    "send": ("held", "approved"), "expire": ("held", "expired"),
    "unclear": ("held", "held"),  # never moves anything: it is answered with why
}
#: decisions that set what runs: the arguments (and for a draft, the mail) approved now
_APPROVALS = frozenset({"approve", "approve_always", "edit", "send"})
#: what the user reads about a state in the short "nothing changed" reply
STATE_TEXT = {
    "held": "still waiting for your decision", "approved": "approved; it is about to run",
    "executing": "running now", "done": "approved and done", "failed": "approved; it ran and failed",
    "denied": "denied", "feedback": "not run: your earlier reply went to the agent as feedback",
    "ignored": "ignored (the request was deleted)", "unknown": "interrupted; waiting for `retry` or `skip`",
    "skipped": "skipped after an interruption", "expired": "expired",
}


@dataclass(frozen=True, kw_only=True)
class Applied:
    action: HeldAction
    applied: bool
    state: str
    """the action's state after this decision"""
    why: str = ""
    """why nothing changed (when not applied)"""


async def action_by_id(db: aiosqlite.Connection, action_id: int) -> HeldAction | None:
    async with db.execute("SELECT * FROM held_actions WHERE id = ?", (action_id,)) as cursor:
        row = await cursor.fetchone()
    return HeldAction(**dict(row)) if row else None


async def actions_named(store: Store, found: Route) -> list[HeldAction]:
    """Every action the reply's clues name, each once, nonces first.

    A plain read: the decision is applied later by a guarded UPDATE, which sees the real state.
    """
    lookups = [("nonce", n) for n in found.nonces] + [("request_message_id", m) for m in found.message_ids]
    named: dict[int, HeldAction] = {}
    for column, value in lookups:
        row = await store.fetchone(f"SELECT * FROM held_actions WHERE {column} = ?", (value,))
        if row is not None:
            named.setdefault(row["id"], HeldAction(**dict(row)))
    return list(named.values())


async def apply_decision(db: aiosqlite.Connection, action: HeldAction, decision: Decision, *,
                         by: str, via: str) -> Applied:
    """Record the decision and move the action if it is still where the decision applies."""
    move = _MOVES[decision.kind]
    why = ""
    if decision.kind == "unclear" or (decision.kind == "edit" and decision.arguments is None):
        why = decision.error
    elif action.status != move[0]:
        why = f"this action is {STATE_TEXT.get(action.status, action.status)}"
    approved = _approved(action, decision)
    applied = not why and await _move(db, action, decision, move, approved)
    if not applied and not why:
        current = await action_by_id(db, action.id)
        why = f"this action is {STATE_TEXT.get(current.status if current else '', 'gone')}"
    await db.execute(
        "INSERT INTO decisions(action_id, kind, by_address, via, arguments, note, applied, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (action.id, decision.kind, by, via, approved, decision.note, int(applied), now()),
    )
    if applied:
        record(db, ActionDecided(action=action.id, run=action.run_id, status=move[1]))
        await _resume_run(db, action)
        if decision.kind == "approve_always":
            await add_rule(db, action)
    fresh = await action_by_id(db, action.id)
    assert fresh is not None
    return Applied(action=fresh, applied=applied, state=fresh.status, why=why)


def _approved(action: HeldAction, decision: Decision) -> str:
    """Canonical JSON of the arguments this decision is about: the edited ones, for a retry those
    approved before (edited arguments, a sent draft), else the ones the agent asked for."""
    if decision.arguments is not None:
        return canonical_json(decision.arguments)
    if decision.kind == "retry" and action.approved_arguments:
        return action.approved_arguments
    return action.arguments


async def _move(db: aiosqlite.Connection, action: HeldAction, decision: Decision,
                move: tuple[str, str], approved: str) -> bool:
    cursor = await db.execute(
        "UPDATE held_actions SET status = ?, decided_at = ?, note = ?, approved_arguments = ?"
        " WHERE id = ? AND status = ?",
        (move[1], now(), decision.note, approved, action.id, move[0]),
    )
    if cursor.rowcount == 1 and decision.kind in _APPROVALS:  # a plain approve sends the original
        rcpts = json.dumps(list(decision.recipients)) if decision.outgoing else None
        await db.execute("UPDATE held_actions SET outgoing_blob = ?, outgoing_rcpts = ? WHERE id = ?",
                         (decision.outgoing, rcpts, action.id))
    return cursor.rowcount == 1


async def _resume_run(db: aiosqlite.Connection, action: HeldAction) -> None:
    """The waiting run goes back to the queue; it resumes from its checkpoints. Its attempts start
    over: waiting for a person is not a failed attempt."""
    cursor = await db.execute("UPDATE runs SET status = 'queued', attempts = 0"
                              " WHERE id = ? AND status = 'waiting'", (action.run_id,))
    if cursor.rowcount == 1:
        record(db, RunQueued(run=action.run_id, thread=action.thread_id))
    await db.execute("UPDATE threads SET status = 'queued', updated_at = ? WHERE id = ?",
                     (now(), action.thread_id))


async def transition(db: aiosqlite.Connection, action_id: int, old: str, new: str, *,
                     result: str | None = None, is_error: bool = False, note: str | None = None) -> bool:
    cursor = await db.execute(
        "UPDATE held_actions SET status = ?, result = coalesce(?, result), result_is_error = ?,"
        " note = coalesce(?, note) WHERE id = ? AND status = ?",
        (new, result, int(is_error), note, action_id, old),
    )
    return cursor.rowcount == 1


async def set_request(db: aiosqlite.Connection, action_id: int, message_id: str) -> None:
    await db.execute("UPDATE held_actions SET request_message_id = ? WHERE id = ?", (message_id, action_id))


async def action_for_call(store: Store, run_id: int, call_id: str) -> HeldAction | None:
    row = await store.fetchone("SELECT * FROM held_actions WHERE run_id = ? AND call_id = ?",
                               (run_id, call_id))
    return HeldAction(**dict(row)) if row else None


async def pending(store: Store) -> list[HeldAction]:
    rows = await store.fetchall(
        "SELECT * FROM held_actions WHERE status IN ('held', 'unknown') ORDER BY id")
    return [HeldAction(**dict(r)) for r in rows]


# -- decisions as headers ----------------------------------------------------------------------


async def decision_headers(store: Store, run_id: int) -> list[str]:
    """``X-Pizzamail-Decision`` values for what decided this run's gated calls, oldest first: the
    applied decisions on its held actions and the calls standing rules released. Each names the
    tool, the SHA-256 of the exact arguments (canonical JSON) and the decision's time."""
    decided = await store.fetchall(
        "SELECT d.*, a.server, a.original, a.outgoing_blob FROM decisions d"
        " JOIN held_actions a ON a.id = d.action_id WHERE a.run_id = ? AND d.applied = 1", (run_id,))
    released = await store.fetchall("SELECT * FROM rule_releases WHERE run_id = ?", (run_id,))
    lines = [(r["at"], 0, r["id"], _decided_text(r)) for r in decided]
    lines += [(r["at"], 1, r["id"], _released_text(r)) for r in released]
    return [text for *_, text in sorted(lines)]


def _decided_text(row: aiosqlite.Row) -> str:
    text = (f"{_PAST.get(row['kind'], row['kind'])}; action={row['action_id']}; by={row['by_address']};"
            f" via=<{row['via']}>; tool={row['server']}/{row['original']};"
            f" sha256={_sha256(row['arguments'])}; at={row['at']}")
    if row["kind"] == "send" and row["outgoing_blob"]:  # the relayed bytes' own digest
        text += f"; sent-sha256={row['outgoing_blob']}"
    return text


def _released_text(row: aiosqlite.Row) -> str:
    return (f"approved-by-rule; rule={row['rule_id']}; from-action={row['rule_action'] or '-'};"
            f" tool={row['server']}/{row['tool']}; sha256={_sha256(row['arguments'])}; at={row['at']}")


def _sha256(arguments: str) -> str:
    return hashlib.sha256(arguments.encode()).hexdigest()


_PAST = {"approve": "approved", "approve_always": "approved-always", "edit": "approved-with-edits",
         "deny": "denied", "feedback": "feedback", "retry": "retried", "skip": "skipped",
         "ignore": "ignored", "send": "approved-edited", "expire": "expired", "unclear": "unclear"}


# -- standing rules ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: int
    server: str
    tool: str
    arguments: str
    """canonical JSON of the arguments this rule approves (an exact match), or ``*`` for any"""
    action_id: int | None
    created_at: str


async def add_rule(db: aiosqlite.Connection, action: HeldAction) -> None:
    await db.execute(
        "INSERT OR IGNORE INTO approval_rules(server, tool, arguments, action_id, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (action.server, action.original, action.approved_arguments or action.arguments, action.id, now()),
    )


async def rules(store: Store) -> list[Rule]:
    rows = await store.fetchall("SELECT * FROM approval_rules ORDER BY id")
    return [Rule(**dict(r)) for r in rows]


async def remove_rule(store: Store, rule_id: int) -> bool:
    async with store.write() as db:
        cursor = await db.execute("DELETE FROM approval_rules WHERE id = ?", (rule_id,))
        return cursor.rowcount == 1


async def matching_rule(store: Store, *, server: str, tool: str, arguments: str) -> Rule | None:
    """The standing rule that lets this call (``arguments``: canonical JSON) run, if one does."""
    row = await store.fetchone(
        "SELECT * FROM approval_rules WHERE server = ? AND tool = ? AND arguments IN (?, '*') ORDER BY id",
        (server, tool, arguments))
    return Rule(**dict(row)) if row else None


async def record_release(db: aiosqlite.Connection, *, run_id: int, call_id: str, rule: Rule,
                         arguments: str) -> bool:
    """A call ``rule`` lets run, recorded before it runs. False when it was recorded before: the
    call was released once already, and a crash cut it off before its result was recorded."""
    cursor = await db.execute(
        "INSERT OR IGNORE INTO rule_releases(run_id, call_id, rule_id, rule_action, server, tool, arguments,"
        " at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, call_id, rule.id, rule.action_id, rule.server, rule.tool, arguments, now()))
    return cursor.rowcount == 1


async def was_released(db: aiosqlite.Connection, run_id: int, call_id: str) -> bool:
    """Whether a standing rule released this call before (it was then cut off by a crash)."""
    async with db.execute("SELECT 1 FROM rule_releases WHERE run_id = ? AND call_id = ?",
                          (run_id, call_id)) as cursor:
        return await cursor.fetchone() is not None
