"""The bounded agent loop: model call, checkpoint, tool calls, checkpoint … until a final answer.

The loop is a state machine over the transcript, so a fresh run and a resumed one take the same
path: whatever the recorded steps already cover is not done again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from pizzamail.errors import RunError
from pizzamail.providers.types import Message, Provider, Response, ToolCall
from pizzamail.runner.steps import AgentStep, ModelStep, ToolStep
from pizzamail.tools import ToolRegistry, ToolResult

log = logging.getLogger("pizzamail.runner")

#: stores one step under its sequence number; the step counts as done once this returns
Checkpoint = Callable[[int, AgentStep], Awaitable[None]]


@dataclass(kw_only=True)
class Transcript:
    base: list[Message]
    """the system prompt and the thread history"""
    steps: list[AgentStep] = field(default_factory=list)
    next_seq: int = 0

    def messages(self) -> list[Message]:
        return [*self.base, *(m for s in self.steps for m in s.messages())]

    def model_calls(self) -> int:
        return sum(isinstance(s, ModelStep) for s in self.steps)

    def last_model_step(self) -> ModelStep | None:
        return next((s for s in reversed(self.steps) if isinstance(s, ModelStep)), None)

    def final_answer(self) -> Response | None:
        last = self.steps[-1] if self.steps else None
        if isinstance(last, ModelStep) and not last.response.tool_calls:
            return last.response
        return None

    def pending_calls(self) -> list[ToolCall]:
        """Tool calls of the latest model answer that have no recorded result yet."""
        last = self.last_model_step()
        if last is None:
            return []
        answered = {s.call_id for s in self.steps if isinstance(s, ToolStep)}
        return [c for c in last.response.tool_calls if c.id not in answered]


async def drive(
    *, provider: Provider, tools: ToolRegistry, transcript: Transcript, max_steps: int,
    checkpoint: Checkpoint, interruptible: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> Response:
    """Run until the model answers without tool calls; raises RunError at ``max_steps`` model calls.

    Model and tool calls happen inside ``interruptible()``: the only places a stopping runner may
    cancel the loop (never in the middle of a checkpoint write).
    """
    specs = tools.specs() if provider.supports_tools else []
    while True:
        final = transcript.final_answer()
        if final is not None:
            return final
        if transcript.model_calls() >= max_steps:
            # the last answer still asked for tools: its calls are not run, as nobody would read them
            raise RunError(
                f"stopped after {max_steps} model calls without a final answer (the step limit)",
                hint="raise `[agent] max_steps` in config.toml, or split the task into smaller ones",
            )
        pending = transcript.pending_calls()
        if pending:
            for call in pending:
                with interruptible():
                    step = await call_tool(tools, call)
                await _record(transcript, checkpoint, step)
            continue
        with interruptible():
            response = await provider.complete(transcript.messages(), specs)
        log.debug("model answered: %d tool calls, finish_reason %s", len(response.tool_calls),
                  response.finish_reason)
        await _record(transcript, checkpoint, ModelStep(response=response))


async def _record(transcript: Transcript, checkpoint: Checkpoint, step: AgentStep) -> None:
    await checkpoint(transcript.next_seq, step)
    transcript.steps.append(step)
    transcript.next_seq += 1


async def call_tool(tools: ToolRegistry, call: ToolCall) -> ToolStep:
    """Run one call; a mistake the model made comes back as an error result it can act on."""
    if call.error is not None:
        result = ToolResult(text=f"tool {call.name!r} was not run: {call.error}", is_error=True)
    else:
        result = await tools.call(call.name, call.arguments)
    return ToolStep(call_id=call.id, name=call.name, result=result)
