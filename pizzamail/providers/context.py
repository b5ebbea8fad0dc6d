"""Fitting a conversation into a smaller context after the provider said it is too long.

The order of sacrifice: the thread's older messages (before the task) first, then the middle of long
messages after it (tool results), and the task itself only when asked to (the tiny offline model).
The system prompt and the task message are never dropped.
"""

from __future__ import annotations

from dataclasses import replace

from pizzamail.providers.types import Message

TRIMMED = "\n[… trimmed to fit the model's context …]\n"
#: context-length errors, as the providers word them
_TOO_LONG_MARKERS = ("context length", "context_length", "maximum context", "too long", "context window",
                     "exceed_context_size", "prompt is too long", "input is too long", "too many tokens")


def is_context_error(text: str) -> bool:
    lowered = text.lower()
    return any(marker in lowered for marker in _TOO_LONG_MARKERS)


def size(messages: list[Message]) -> int:
    return sum(len(m.content) + sum(len(c.raw_arguments or str(c.arguments)) for c in m.tool_calls)
               for m in messages)


def fit_history(
    messages: list[Message], *, keep_ratio: float = 0.5, trim_task: bool = False
) -> list[Message]:
    """The conversation cut to about ``keep_ratio`` of its size."""
    budget = int(size(messages) * keep_ratio)
    lead = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
    task = _task_index(messages, lead)
    system, older, rest = messages[:lead], messages[lead:task], messages[task:]
    while older and size([*system, *older, *rest]) > budget:
        older = older[1:]
    if older and older[0].role == "tool":  # never start on an orphaned tool result
        older = older[1:]
    kept = [*system, *older, *rest]
    over = size(kept) - budget
    if over <= 0:
        return kept
    task_at = len(system) + len(older)
    return [m if i == task_at and not trim_task else _shorten(m, over) for i, m in enumerate(kept)]


def _task_index(messages: list[Message], lead: int) -> int:
    """The task: the last user message before the run's own steps (tool traffic)."""
    for i in range(len(messages) - 1, lead - 1, -1):
        if messages[i].role == "user" and not messages[i].content.startswith("[pizzamail]"):
            return i
    return lead


def _shorten(message: Message, over: int) -> Message:
    """Cut the middle of a long message (system prompts stay whole)."""
    if message.role == "system" or len(message.content) < 2000:
        return message
    keep = max(1000, len(message.content) - over)
    head, tail = message.content[: keep * 2 // 3], message.content[-(keep // 3):]
    return replace(message, content=head + TRIMMED + tail)
