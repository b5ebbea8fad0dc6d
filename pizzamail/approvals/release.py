"""The runner side of approvals: a resumed run turns its decided held call into a tool step.

Exactly once: ``approved -> executing`` is committed before the tool is called, and the tool's
result is committed together with ``executing -> done`` and the run's tool step. A run that finds
its action ``executing`` after a restart does not know whether the call happened: an idempotent
tool is called again, any other is asked about (``unknown``) and never repeated without a ``retry``.

An approved ``draft_email`` is not a tool call: the :class:`Outbox` sends it through the relay, in
the same approved -> executing -> done steps (it is not idempotent: an interrupted send is asked
about). Without a relay it goes back to ``held`` and the run asks again, saying how to set one up.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import jsonschema

from pizzamail.approvals.outbox import NO_RELAY, Outbox
from pizzamail.errors import RunError
from pizzamail.store import Store
from pizzamail.store.actions import HeldAction, action_for_call, transition
from pizzamail.store.runs import add_step, fence
from pizzamail.tools import Explained, Toolbox, ToolResult
from pizzamail.transcript import HeldStep, ToolStep, Transcript

log = logging.getLogger("pizzamail.approvals")

#: what the model is told for a call the user did not let run
_NOT_RUN = {
    "denied": "The user denied this call; it was not run.{note} Continue without it.",
    "feedback": ("The user's reply was not a plain approval, so this call was not run. Their reply: {text}\n"
                 "Take it into account: answer what they asked, or call the tool again as they want it"
                 " (they are asked again); if you cannot tell what they want, ask them."),
    "ignored": "The user ignored this request (they deleted it); the call was not run. Continue without it.",
    "skipped": ("pizzamail was interrupted during this call, so whether it happened is unknown; the user"
                " chose not to retry it. Do not call it again."),
    "expired": ("Nobody decided on this call before it expired (expired unanswered); it was not run."
                " Continue without it."),
}


@dataclass(frozen=True, kw_only=True)
class Waiting:
    """The run must wait again; the mail says why."""

    action: HeldAction
    why: Literal["request", "invalid", "unknown", "relay"]
    problem: str = ""


@dataclass(frozen=True, kw_only=True)
class Release:
    """What releasing a decided call needs besides the store."""

    toolbox: Toolbox
    interruptible: Callable[[], AbstractContextManager[object]]
    outbox: Outbox | None = None
    """sends approved drafts; None: no relay"""
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


async def settle(*, store: Store, run_id: int, transcript: Transcript, toolbox: Toolbox,
                 interruptible: Callable[[], AbstractContextManager[object]],
                 outbox: Outbox | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Waiting | None:
    """Resolve every held call of the transcript that has a decision; None when nothing waits."""
    release = Release(toolbox=toolbox, interruptible=interruptible, outbox=outbox, clock=clock)
    while (held := transcript.waiting_on()) is not None:
        action = await action_for_call(store, run_id, held.call_id)
        if action is None:
            raise RunError(f"the held call {held.call_id} has no held action in the store")
        waiting = await _settle_one(store, transcript, release, held, action)
        if waiting is not None:
            return waiting
    return None


async def _settle_one(store: Store, transcript: Transcript, release: Release, held: HeldStep,
                      action: HeldAction) -> Waiting | None:
    status = action.status
    if status in ("held", "unknown"):
        return Waiting(action=action, why="request" if status == "held" else "unknown")
    if status in _NOT_RUN:
        text = _NOT_RUN[status].format(note=f" Their reason: {action.note}" if action.note else "",
                                       text=action.note or "(empty)")
        await _record(store, transcript, held, ToolResult(text=text, is_error=True), action, None)
        return None
    if status in ("done", "failed"):  # a draft the user sent themselves (IMAP mode), or a broken store
        recorded = ToolResult(text=action.result or "", is_error=status == "failed")
        await _record(store, transcript, held, recorded, action, None)
        return None
    if status == "executing" and not action.idempotent:
        log.warning("action %d was interrupted during its call; asking the user", action.id)
        async with store.write() as db:
            await transition(db, action.id, "executing", "unknown")
        return Waiting(action=action, why="unknown")
    return await _execute(store, transcript, release, held, action)


async def _execute(store: Store, transcript: Transcript, release: Release, held: HeldStep,
                   action: HeldAction) -> Waiting | None:
    toolbox = release.toolbox
    offered = toolbox.get(held.name)
    if offered is None:
        result = toolbox.missing(held.name)
        await _record(store, transcript, held, result, action, "failed", old=action.status)
        return None
    arguments = action.release_arguments
    problem = schema_problem(offered.tool.spec.parameters, arguments) or await _check(offered.tool, arguments)
    if problem:
        async with store.write() as db:
            await transition(db, action.id, action.status, "held", note=problem)
        return Waiting(action=action, why="invalid", problem=problem)
    if action.is_draft and action.status == "approved":
        problem = release.outbox.problem() if release.outbox is not None else NO_RELAY
        if problem:  # nothing is sent; the draft stays a draft and the user is told what to set up
            async with store.write() as db:
                await transition(db, action.id, "approved", "held")
            return Waiting(action=action, why="relay", problem=problem)
    if action.status == "approved":
        async with store.write() as db:  # committed before the call: a crash now leaves "executing"
            await fence(db, action.run_id)  # a worker whose lease ran out never makes the call
            if not await transition(db, action.id, "approved", "executing"):
                raise RunError(f"action {action.id} changed while it was being released")
    log.info("action %d (%s) approved: running it", action.id, action.label)
    with release.interruptible():
        if action.is_draft and release.outbox is not None:
            result = await release.outbox.send(action, arguments, date=release.clock())
        else:
            result = await toolbox.call(held.name, arguments)
    if action.approved_arguments and action.approved_arguments != action.arguments:
        shown = json.dumps(arguments, ensure_ascii=False)
        result = ToolResult(is_error=result.is_error,
                            text=f"The user approved this call with edited arguments {shown}.\n\n"
                                 + result.text)
    await _record(store, transcript, held, result, action, "failed" if result.is_error else "done")
    return None


async def _check(tool: object, arguments: dict[str, object]) -> str:
    """The tool's own check of edited arguments (as before the call was held): its error text, or ''."""
    if not isinstance(tool, Explained):
        return ""
    refused = await tool.check(dict(arguments))
    return refused.text if refused is not None else ""


def schema_problem(schema: dict[str, object], arguments: dict[str, object]) -> str:
    """Why ``arguments`` do not fit the tool's input schema ('' when they do)."""
    try:
        jsonschema.validate(arguments, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the arguments"
        return f"{where}: {exc.message}"
    except jsonschema.SchemaError:
        return ""  # the tool's own schema is broken: it is the tool's to refuse, not ours
    return ""


async def _record(store: Store, transcript: Transcript, held: HeldStep, result: ToolResult,
                  action: HeldAction, final: str | None, *, old: str = "executing") -> None:
    """The tool step and the action's end state in one transaction."""
    step = ToolStep(call_id=held.call_id, name=held.name, result=result)
    async with store.write() as db:
        await add_step(db, action.run_id, transcript.next_seq, step.kind, step.to_data())
        if final is not None:
            await transition(db, action.id, old, final, result=result.text, is_error=result.is_error)
    transcript.steps.append(step)
    transcript.next_seq += 1
