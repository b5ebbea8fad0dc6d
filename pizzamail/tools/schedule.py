"""``schedule_task``: the agent sets up a recurring task that continues the thread it was asked in.

It is held for approval and may never run by itself (``never_auto``, like ``draft_email``): every
occurrence is posted as a task *from the owner*, so a schedule made without approval would let text
the model read (a web page, a mail) plant a prompt that runs with the owner's authority, unattended,
for ever. ``[tools.policy]`` may still deny it.

The tool is :class:`~pizzamail.tools.Explained`. The arguments are checked before the call is held
(:meth:`ScheduleTask.check`): a phrase without a cron reading goes back to the model as an error it can
fix, never into a request the user would approve for nothing. The request says what approving does
(:meth:`ScheduleTask.describe`): the times in words, the cron, the zone, the next occurrences, what
happens after downtime, and the prompt. Released, the call saves (upserts) the schedule with source
``agent`` and the asking thread, so a call repeated after a crash changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from pizzamail.config import ScheduleSettings, schedule_settings
from pizzamail.errors import ConfigError
from pizzamail.providers.types import ToolSpec
from pizzamail.store import Store
from pizzamail.store.schedules import find_schedule, new_schedule, save_schedule
from pizzamail.tools import ToolResult
from pizzamail.when.cron import default_zone, next_after
from pizzamail.when.phrases import when_to_cron
from pizzamail.when.words import cron_in_words, local_time

_ARGUMENTS = ("name", "when", "prompt", "tz", "catch_up")
_SOURCES = {"config": "in config.toml", "cli": "added with `pizzamail schedule add`",
            "agent": "set up in another thread"}
_CATCH_UP = {"once": "run once", "skip": "skipped"}
_SHOWN_TIMES = 3


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


SPEC = ToolSpec(name="schedule_task", description=(
    "Set up a recurring task: at each time the prompt is started again as a task in this thread, so"
    " each run sees what earlier ones found. The user approves it first. Calling it again with the"
    " same name changes that schedule."),
    parameters={"type": "object", "required": ["name", "when", "prompt"], "properties": {
        "name": _text("a short name of letters, digits, _ and -, such as weekly-issues"),
        "when": _text('in words, such as "every weekday at 8", "every monday at 9:30", "every 15'
                      ' minutes", "every month on the 1st at 9" (24-hour clock unless am/pm), or a'
                      ' cron expression such as "0 8 * * 1-5"'),
        "prompt": _text("the task to do at each time, complete in itself"),
        "tz": _text("optional IANA time zone such as Europe/Berlin (default: the user's)"),
        "catch_up": {"type": "string", "enum": ["once", "skip"], "description": (
            "after pizzamail was not running: once (default) runs one missed occurrence, skip does not")},
    }})


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True)
class ScheduleTask:
    store: Store
    thread_id: int
    """the thread the call was made in: every occurrence continues it"""
    agent_tz: str = ""
    """``[agent] timezone``: the zone when the call names none ('' = this machine's)"""
    clock: Callable[[], datetime] = utcnow
    spec = SPEC

    async def check(self, arguments: dict[str, Any]) -> ToolResult | None:
        """Before the call is held: what is wrong with the arguments (None: nothing)."""
        found = await self._settings(arguments)
        return found if isinstance(found, ToolResult) else None

    def describe(self, arguments: dict[str, Any]) -> str | None:
        """For the approval request: what approving starts, and when (None: the arguments make no
        schedule). The next times are counted from now, in the zone the schedule will have."""
        settings = _parsed(arguments)
        if isinstance(settings, ToolResult):
            return None
        tz = settings.tz or default_zone(self.agent_tz)
        times = _next_times(settings.cron, tz, self.clock())
        return (f"Start this task {_when(settings.cron, tz)}, each time in this thread."
                f" Next: {_dates(times)}."
                f" Missed occurrences after downtime: {_CATCH_UP.get(settings.catch_up, settings.catch_up)}."
                f"\n\n{_quoted(settings.prompt)}")

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        found = await self._settings(arguments)
        if isinstance(found, ToolResult):
            return found
        name = str(arguments["name"])
        # source ``agent``, continuing the asking thread, due from now
        saved = await save_schedule(self.store, new_schedule(
            name, found, source="agent", at=self.clock(), agent_tz=self.agent_tz, thread_id=self.thread_id))
        next_due = local_time(saved.next_due, saved.tz)
        return ToolResult(text=f"scheduled {name}: next occurrence {next_due} (cron \"{saved.cron}\");"
                               " each occurrence continues this thread")

    async def _settings(self, arguments: dict[str, Any]) -> ScheduleSettings | ToolResult:
        settings = _parsed(arguments)
        if isinstance(settings, ToolResult):
            return settings
        name = str(arguments.get("name", "")).strip()
        existing = await find_schedule(self.store, name)
        if existing is not None and (existing.source != "agent" or existing.thread_id != self.thread_id):
            return _error(f"a schedule named {name!r} already exists ({_SOURCES.get(existing.source, '')});"
                          " choose another name")
        return settings


def _parsed(arguments: dict[str, Any]) -> ScheduleSettings | ToolResult:
    """The arguments as schedule settings, or what is wrong with them (the name is not looked up)."""
    wrong = [k for k in _ARGUMENTS if k in arguments and not isinstance(arguments[k], str)]
    if wrong:
        return _error(f"{wrong[0]} must be a string")
    name, when = str(arguments.get("name", "")).strip(), str(arguments.get("when", ""))
    translated = when_to_cron(when)
    if not translated.cron:
        return _error(f"when {when!r}: {translated.problem}")
    table = {"cron": translated.cron, "prompt": arguments.get("prompt", ""),
             **{k: arguments[k] for k in ("tz", "catch_up") if arguments.get(k)}}
    try:
        return schedule_settings(name, table)
    except ConfigError as exc:
        return _error(_argument_problem(exc, name))


def _argument_problem(exc: ConfigError, name: str) -> str:
    field = exc.key.removeprefix(f"schedules.{name}").lstrip(".") or "name"
    return f"{field} {exc.value!r}: {exc.allowed}"


def _error(text: str) -> ToolResult:
    return ToolResult(text=f"not scheduled: {text}", is_error=True)


# -- the call in words, for the approval request ---------------------------------------------------


def _when(cron: str, tz: str) -> str:
    words = cron_in_words(cron)
    if words is None:
        return f"at the times of cron `{cron}` (time zone {tz})"
    return f"{words} (cron `{cron}`, time zone {tz})"


def _next_times(cron: str, tz: str, after: datetime) -> list[datetime]:
    times: list[datetime] = []
    for _ in range(_SHOWN_TIMES):
        after = next_after(cron, tz, after)
        times.append(after.astimezone(ZoneInfo(tz)))
    return times


def _dates(times: list[datetime]) -> str:
    """``Mon 6 Jan 2025 09:00, Mon 13 Jan 09:00``: the year on the first and where it changes."""
    years = [i == 0 or t.year != times[i - 1].year for i, t in enumerate(times)]
    return ", ".join(f"{t:%a} {t.day} {t:%b}{f' {t.year}' if year else ''} {t:%H:%M}"
                     for t, year in zip(times, years, strict=True))


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in text.strip().splitlines())
