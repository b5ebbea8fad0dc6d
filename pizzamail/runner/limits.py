"""Per-run limits and usage: model calls, tool calls, tokens and wall time.

When a limit is reached the agent gets one last model call without tools, with a short note asking it
to sum up what it has. That answer is recorded with ``finish_reason = "limit:<name>"`` so the reply
(even after a resume) says which limit stopped the run: no silent truncation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pizzamail.config import Agent
from pizzamail.providers.types import Message, Response
from pizzamail.store.usage import Usage
from pizzamail.tools import Toolbox
from pizzamail.transcript import AgentStep, ModelStep, ToolStep

LIMIT_PREFIX = "limit:"

#: limit name -> (what it counts, the config key that sets it)
LIMITS = {
    "model_calls": ("model calls", "max_steps"),
    "tool_calls": ("tool calls", "max_tool_calls"),
    "tokens": ("tokens", "max_tokens"),
    "wall_time": ("seconds of work", "max_seconds"),
}


@dataclass(frozen=True, kw_only=True)
class RunUsage(Usage):
    """A run's usage as its limits and its reply footer see it."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def footer(self) -> str:
        """The short usage line under a reply."""
        calls = f"{self.model_calls} model call{'s' * (self.model_calls != 1)}"
        tools = f" · {self.tool_calls} tool call{'s' * (self.tool_calls != 1)}" if self.tool_calls else ""
        tokens = f"{self.tokens:,} tokens ({self.input_tokens:,} in, {self.output_tokens:,} out)"
        return f"{calls}{tools} · {tokens}"


def usage_of(steps: list[AgentStep]) -> RunUsage:
    models = [s.response.usage for s in steps if isinstance(s, ModelStep)]
    return RunUsage(model_calls=len(models), tool_calls=sum(isinstance(s, ToolStep) for s in steps),
                    input_tokens=sum(u.input_tokens for u in models),
                    output_tokens=sum(u.output_tokens for u in models))


@dataclass(frozen=True, kw_only=True)
class Limits:
    max_model_calls: int
    max_tool_calls: int = 1_000_000
    max_tokens: int = 1_000_000_000
    max_seconds: float = float("inf")
    clock: Callable[[], float] = time.monotonic
    started: float = 0.0

    @classmethod
    def from_settings(cls, agent: Agent, *, clock: Callable[[], float] = time.monotonic) -> Limits:
        return cls(max_model_calls=agent.max_steps, max_tool_calls=agent.max_tool_calls,
                   max_tokens=agent.max_tokens, max_seconds=agent.max_seconds, clock=clock, started=clock())

    def value(self, name: str) -> float:
        return {"model_calls": self.max_model_calls, "tool_calls": self.max_tool_calls,
                "tokens": self.max_tokens, "wall_time": self.max_seconds}[name]

    def tool_calls_left(self, steps: list[AgentStep]) -> int:
        return self.max_tool_calls - usage_of(steps).tool_calls

    def reached(self, steps: list[AgentStep]) -> str | None:
        """The first limit reached before the next model call (which is then the tool-free summary)."""
        used = usage_of(steps)
        if used.model_calls >= self.max_model_calls:
            return "model_calls"
        if used.tool_calls >= self.max_tool_calls:
            return "tool_calls"
        if used.tokens >= self.max_tokens:
            return "tokens"
        if self.clock() - self.started >= self.max_seconds:
            return "wall_time"
        return None


def summary_request(name: str, limits: Limits) -> Message:
    """The note that asks for the last, tool-free answer."""
    what, _ = LIMITS[name]
    return Message(role="user", content=(
        f"[pizzamail] This run reached its limit of {limits.value(name):g} {what}. No more tools can be"
        " used. Reply now with a summary of what you found and did so far, and say clearly what is"
        " still not done."))


def not_run_text(limits: Limits) -> str:
    return (f"not run: this run reached its limit of {limits.max_tool_calls} tool calls"
            " (`[agent] max_tool_calls`)")


def stopped_note(finish_reason: str, agent: Agent) -> str | None:
    """The line under a reply that a limit cut short; None for a reply that finished by itself."""
    if not finish_reason.startswith(LIMIT_PREFIX):
        return None
    name = finish_reason.removeprefix(LIMIT_PREFIX)
    what, key = LIMITS.get(name, ("steps", "max_steps"))
    value = getattr(agent, key, "?")
    return (f"Stopped early: this run reached its limit of {value} {what} (`{agent.section} {key}` in"
            " config.toml). The answer above is a summary of the work so far, not a finished task;"
            " reply to this mail to let it continue.")


def run_notes(outcome: object, agent: Agent, notice: str | None) -> list[str]:
    """Our lines under a reply: the limit that stopped it, and the provider's notice (offline model)."""
    notes = []
    if isinstance(outcome, Response):
        stopped = stopped_note(outcome.finish_reason, agent)
        if stopped:
            notes.append(stopped)
    if notice:
        notes.append(notice)
    return notes


def unavailable_notes(toolbox: Toolbox) -> list[str]:
    """The short notice for MCP servers that were down while this run worked."""
    return [f"Note: the MCP server {u.server!r} was not available ({u.reason}); its tools could not be"
            " used. pizzamail keeps trying to start it; `pizzamail doctor` shows its state."
            for u in toolbox.unavailable]
