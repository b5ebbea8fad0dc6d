"""A cron expression in words ("every weekday (Monday to Friday) at 08:00"), for people reading a
schedule: approval requests, ``pizzamail schedule list`` and ``pizzamail triggers``.

It knows the shapes :mod:`.phrases` writes; any other expression is None and shown as cron.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from pizzamail.when.cron import from_text

_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def when_in_words(cron: str, tz: str) -> str:
    """``every weekday (Monday to Friday) at 08:00 (Europe/Berlin)``, or the cron where words fail."""
    return f"{cron_in_words(cron) or cron} ({tz})"


def local_time(utc_text: str | None, tz: str) -> str:
    """A stored UTC time (``2026-12-01T07:00:00Z``) as the schedule's zone reads it."""
    if not utc_text:
        return "none"
    return f"{from_text(utc_text).astimezone(ZoneInfo(tz)):%Y-%m-%d %H:%M} {tz}"


def cron_in_words(cron: str) -> str | None:
    """The shapes the phrase reader writes, in words; None for any other (the cron says it)."""
    minute, hour, dom, month, dow = cron.split()
    if month != "*":
        return None
    if hour == "*" or hour.startswith("*/"):
        return _interval(minute, hour) if dom == dow == "*" else None
    days = _days(dom, dow)
    if days is None or not minute.isdigit() or _numbers(hour) is None:
        return None
    return f"{days} at " + " and ".join(f"{int(h):02d}:{int(minute):02d}" for h in hour.split(","))


def _interval(minute: str, hour: str) -> str | None:
    step = hour.removeprefix("*/")
    if hour == "*" and minute in ("*", "*/1"):
        return "every minute"
    if hour == "*" and minute.startswith("*/") and minute[2:].isdigit():
        return f"every {minute[2:]} minutes"
    if not minute.isdigit():
        return None
    if hour == "*":
        return f"every hour at :{int(minute):02d}"
    return f"every {step} hours from 00:{int(minute):02d}" if step.isdigit() else None


def _days(dom: str, dow: str) -> str | None:
    if dom == "*" and dow == "*":
        return "every day"
    if dom == "*":
        days = _weekdays(dow)
        if days == [1, 2, 3, 4, 5]:
            return "every weekday (Monday to Friday)"
        return "every " + _and([_DAYS[d] for d in days]) if days else None
    numbers = _numbers(dom) if dow == "*" else None
    return f"on the {_and([_ordinal(n) for n in numbers])} of every month" if numbers else None


def _weekdays(dow: str) -> list[int] | None:
    """``1-5`` or ``1,4`` or ``0,6``: the days, Monday first; None for steps and names."""
    days: set[int] = set()
    for part in dow.split(","):
        first, _, last = part.partition("-")
        if not (first.isdigit() and (last or first).isdigit()):
            return None
        days.update(d % 7 for d in range(int(first), int(last or first) + 1))
    return sorted(days, key=lambda d: (d - 1) % 7)


def _numbers(field: str) -> list[int] | None:
    parts = field.split(",")
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
