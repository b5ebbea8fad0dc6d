"""The bounded agent loop: model call, checkpoint, tool calls, checkpoint … until a final answer.

The loop is a state machine over the transcript, so a fresh run and a resumed one take the same
path: whatever the recorded steps already cover is not done again.

Every call passes the policy gate first: ``deny`` answers the model with a refusal, ``ask`` records
a :class:`HeldStep` and ends the loop (the run then waits for the user's decision), ``auto`` runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace

from pizzamail.providers.types import Provider, Response, ToolCall
from pizzamail.runner.limits import LIMIT_PREFIX, Limits, not_run_text, summary_request
from pizzamail.tools import Explained, Offered, Toolbox, ToolResult
from pizzamail.transcript import AgentStep, DelegateStep, HeldStep, ModelStep, ToolStep, Transcript

log = logging.getLogger("pizzamail.runner")

#: stores one step under its sequence number; the step counts as done once this returns
Checkpoint = Callable[[int, AgentStep], Awaitable[None]]
#: whether a standing rule ("approve always") lets this held call run (and records that it did)
Standing = Callable[[Offered, ToolCall], Awaitable[bool]]
#: starts the child run of a ``delegate`` call and checkpoints the step that names it, together
#: (or, once the run was asked to stop, checkpoints a "not run" result instead)
Spawn = Callable[[int, ToolCall], Awaitable[DelegateStep | ToolStep]]


@dataclass(frozen=True)
class Delegating:
    """The run waits for the child runs of these calls."""

    steps: list[DelegateStep]


@dataclass(frozen=True)
class _Spawning:
    call: ToolCall


async def drive(
    *, provider: Provider, tools: Toolbox, transcript: Transcript, max_steps: int,
    checkpoint: Checkpoint, interruptible: Callable[[], AbstractContextManager[object]] = nullcontext,
    standing: Standing | None = None, limits: Limits | None = None, spawn: Spawn | None = None,
) -> Response | HeldStep | Delegating:
    """Run until the model answers without tool calls (its Response), a call is held for approval
    (the HeldStep) or the calls are answered but for ``delegate`` calls whose children have not
    ended (Delegating: the runner resumes the run when they have, their ends recorded).

    When a limit is reached (``limits``, by default ``max_steps`` model calls only) the model gets a
    last call without tools to sum up; that answer's ``finish_reason`` is ``limit:<name>``.
    Model and tool calls happen inside ``interruptible()``: the only places a stopping runner may
    cancel the loop (never in the middle of a checkpoint write).
    """
    limits = limits or Limits(max_model_calls=max_steps)
    specs = tools.specs() if provider.supports_tools else []
    while True:
        held = transcript.waiting_on()
        if held is not None:
            return held
        final = transcript.final_answer()
        if final is not None:
            return final
        pending = transcript.pending_calls()
        stop = limits.reached(transcript.steps)
        if pending and stop is None:
            reason = _reason(transcript)
            for call in pending:
                gated: ToolStep | HeldStep | _Spawning
                if limits.tool_calls_left(transcript.steps) <= 0:
                    gated = _answer(call, ToolResult(text=not_run_text(limits), is_error=True))
                else:
                    gated = await gate(tools, call, reason=reason, interruptible=interruptible,
                                       standing=standing)
                if isinstance(gated, _Spawning):
                    if spawn is None:
                        gated = _answer(call, ToolResult(text="delegation is not available here",
                                                         is_error=True))
                    else:  # the child and its step are one checkpoint: the children start in parallel
                        transcript.steps.append(await spawn(transcript.next_seq, call))
                        transcript.next_seq += 1
                        continue
                await _record(transcript, checkpoint, gated)
                if isinstance(gated, HeldStep):
                    # later calls of the same answer stay pending: they run (or are held) once the
                    # decision is in, in the order the model asked for them
                    return gated
            continue
        if transcript.delegated():
            return Delegating(transcript.delegated())
        if stop is not None:
            return await _summarise(provider, transcript, checkpoint, stop, limits, interruptible)
        with interruptible():
            response = await provider.complete(transcript.messages(), specs)
        log.debug("model answered: %d tool calls, finish_reason %s", len(response.tool_calls),
                  response.finish_reason)
        await _record(transcript, checkpoint, ModelStep(response=_own_ids(response, transcript)))


def _own_ids(response: Response, transcript: Transcript) -> Response:
    """``response`` with call ids that no earlier call of the run has: some models and servers
    number each answer's calls from the same id ("call_0"), and a call's result, its held action
    and the decision on it are all found by id (a repeated one was taken as answered already)."""
    seen = {c.id for s in transcript.steps if isinstance(s, ModelStep) for c in s.response.tool_calls}
    calls: list[ToolCall] = []
    for call in response.tool_calls:
        unique, n = call.id, 1
        while unique in seen:
            n += 1
            unique = f"{call.id}_{n}"
        seen.add(unique)
        calls.append(replace(call, id=unique))
    return replace(response, tool_calls=calls)


async def _summarise(
    provider: Provider, transcript: Transcript, checkpoint: Checkpoint, stop: str, limits: Limits,
    interruptible: Callable[[], AbstractContextManager[object]],
) -> Response:
    """The last, tool-free call after a limit: calls still pending are answered "not run" first."""
    for call in transcript.pending_calls():
        await _record(transcript, checkpoint, _answer(call, ToolResult(
            text=f"not run: the run reached a limit ({stop})", is_error=True)))
    log.info("run limit %s reached: asking for a summary", stop)
    with interruptible():
        response = await provider.complete([*transcript.messages(), summary_request(stop, limits)], [])
    # tool calls in a tool-free answer cannot run: the text is all we keep
    text = response.text.strip() or "(The model gave no summary of its work before the limit.)"
    response = replace(response, text=text, tool_calls=[], finish_reason=LIMIT_PREFIX + stop)
    await _record(transcript, checkpoint, ModelStep(response=response))
    return response


async def _record(transcript: Transcript, checkpoint: Checkpoint, step: AgentStep) -> None:
    await checkpoint(transcript.next_seq, step)
    transcript.steps.append(step)
    transcript.next_seq += 1


def _reason(transcript: Transcript) -> str:
    last = transcript.last_model_step()
    return last.response.text.strip() if last else ""


async def gate(
    tools: Toolbox, call: ToolCall, *, reason: str = "",
    interruptible: Callable[[], AbstractContextManager[object]] = nullcontext,
    standing: Standing | None = None,
) -> ToolStep | HeldStep | _Spawning:
    """Apply the tool's policy to one call, and run it if that is allowed.

    A mistake the model made (bad arguments, an unknown tool) and a refusal by policy come back as
    error results the model can act on.
    """
    if call.error is not None:
        return _answer(call, ToolResult(text=f"tool {call.name!r} was not run: {call.error}", is_error=True))
    offered = tools.get(call.name)
    if offered is None:
        return _answer(call, tools.missing(call.name))
    if offered.policy == "deny":
        log.info("tool %s refused by policy", offered.label)
        return _answer(call, ToolResult(is_error=True, text=(
            f"the user's policy does not allow the tool {call.name!r}; it was not run. Do not call it"
            " again: finish the task without it, or say in your answer what you would need.")))
    refused = await _refused(offered, call)
    if refused is not None:
        return _answer(call, refused)
    if offered.spawns:
        return _Spawning(call)
    if offered.policy == "ask" and not (
        standing is not None and not offered.never_auto and await standing(offered, call)
    ):
        log.info("tool %s held for approval", offered.label)
        return HeldStep(call_id=call.id, name=call.name, source=offered.source,
                        tool=offered.original or call.name, arguments=dict(call.arguments), reason=reason)
    with interruptible():
        result = await tools.call(call.name, call.arguments)
    return _answer(call, result)


async def _refused(offered: Offered, call: ToolCall) -> ToolResult | None:
    """A tool that checks its own arguments (:class:`Explained`; schedule_task does) is asked before
    its call is held: a call that could never run comes back to the model to fix, not to the user."""
    if not isinstance(offered.tool, Explained):
        return None
    return await offered.tool.check(dict(call.arguments))


def _answer(call: ToolCall, result: ToolResult) -> ToolStep:
    return ToolStep(call_id=call.id, name=call.name, result=result)
