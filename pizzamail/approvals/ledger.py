"""Decisions: finding the action a reply names, what a decision moves, the run it resumes, rules.

The rows are the store's (:mod:`pizzamail.store.actions`, :mod:`pizzamail.store.approvals`); here is
which decision may move an action where, and what the user is told about it.

States of a held action::

    held ──approve/edit──▶ approved ──▶ executing ──▶ done | failed
      │                        ▲            │
      ├─deny──▶ denied         │ retry      └─(restart, not idempotent)─▶ unknown ──skip──▶ skipped
      ├─feedback──▶ feedback   └────────────────────────────────────────────┘
      ├─request deleted──▶ ignored
      └─nobody decided within [approvals] expires──▶ expired

``send`` is the approval of a ``draft_email`` by sending the (edited) draft from the mail client:
it moves like ``approve`` and keeps the bytes to relay. A draft the user's own provider already sent
(IMAP mode: found in the account's Sent) moves on to ``done`` in the same transaction: nothing is relayed.

Every transition is one conditional UPDATE (``WHERE status = <from>``) inside the caller's
transaction, so two decisions racing for one action cannot both apply: the second sees no row
changed and is answered with the current state.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pizzamail.store import Store, Tx
from pizzamail.store.actions import (
    HeldAction,
    action_by_id,
    action_by_nonce,
    action_by_request,
    canonical_json,
    move_action,
    set_outgoing,
    waiting_actions,
)
from pizzamail.store.approvals import (
    AppliedDecision,
    NewDecision,
    RuleRelease,
    add_decision,
    add_rule,
    applied_decisions,
    rule_releases,
)
from pizzamail.store.approvals import remove_rule as delete_rule
from pizzamail.store.events import ActionDecided, record
from pizzamail.store.runs import resume_waiting

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


async def actions_named(store: Store, found: Route) -> list[HeldAction]:
    """Every action the reply's clues name, each once, nonces first.

    A plain read: the decision is applied later by a guarded UPDATE, which sees the real state.
    """
    found_actions = [await action_by_nonce(store, n) for n in found.nonces]
    found_actions += [await action_by_request(store, m) for m in found.message_ids]
    named: dict[int, HeldAction] = {}
    for action in found_actions:
        if action is not None:
            named.setdefault(action.id, action)
    return list(named.values())


async def apply_decision(db: Tx, action: HeldAction, decision: Decision, *,
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
    await add_decision(db, NewDecision(action_id=action.id, kind=decision.kind, by=by, via=via,
                                       arguments=approved, note=decision.note, applied=applied))
    if applied:
        record(db, ActionDecided(action=action.id, run=action.run_id, status=move[1]))
        await resume_waiting(db, action.run_id, action.thread_id)
        if decision.kind == "approve_always":
            await add_rule(db, server=action.server, tool=action.original,
                           arguments=action.approved_arguments or action.arguments, action_id=action.id)
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


async def _move(db: Tx, action: HeldAction, decision: Decision,
                move: tuple[str, str], approved: str) -> bool:
    if not await move_action(db, action.id, *move, note=decision.note, approved=approved):
        return False
    if decision.kind in _APPROVALS:  # a plain approve sends the original
        rcpts = list(decision.recipients) if decision.outgoing else None
        await set_outgoing(db, action.id, decision.outgoing, rcpts)
    return True


async def pending(store: Store) -> list[HeldAction]:
    """The actions waiting for a decision, oldest first."""
    return await waiting_actions(store)


# -- decisions as headers ----------------------------------------------------------------------


async def decision_headers(store: Store, run_id: int) -> list[str]:
    """``X-Pizzamail-Decision`` values for what decided this run's gated calls, oldest first: the
    applied decisions on its held actions and the calls standing rules released. Each names the
    tool, the SHA-256 of the exact arguments (canonical JSON) and the decision's time."""
    lines = [(d.at, 0, d.id, _decided_text(d)) for d in await applied_decisions(store, run_id)]
    lines += [(r.at, 1, r.id, _released_text(r)) for r in await rule_releases(store, run_id)]
    return [text for *_, text in sorted(lines)]


def _decided_text(d: AppliedDecision) -> str:
    text = (f"{_PAST.get(d.kind, d.kind)}; action={d.action_id}; by={d.by_address}; via=<{d.via}>;"
            f" tool={d.server}/{d.original}; sha256={_sha256(d.arguments)}; at={d.at}")
    if d.kind == "send" and d.outgoing_blob:  # the relayed bytes' own digest
        text += f"; sent-sha256={d.outgoing_blob}"
    return text


def _released_text(r: RuleRelease) -> str:
    return (f"approved-by-rule; rule={r.rule_id}; from-action={r.rule_action or '-'};"
            f" tool={r.server}/{r.tool}; sha256={_sha256(r.arguments)}; at={r.at}")


def _sha256(arguments: str) -> str:
    return hashlib.sha256(arguments.encode()).hexdigest()


_PAST = {"approve": "approved", "approve_always": "approved-always", "edit": "approved-with-edits",
         "deny": "denied", "feedback": "feedback", "retry": "retried", "skip": "skipped",
         "ignore": "ignored", "send": "approved-edited", "expire": "expired", "unclear": "unclear"}


# -- standing rules ----------------------------------------------------------------------------


async def remove_rule(store: Store, rule_id: int) -> bool:
    async with store.write() as db:
        return await delete_rule(db, rule_id)
