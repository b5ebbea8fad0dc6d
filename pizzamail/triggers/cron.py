"""Pure cron arithmetic: validation and "the next times after t", in a time zone (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

#: how late an occurrence may fire and still count as on time (not missed)
GRACE_SECONDS = 60


def cron_problem(expression: str) -> str | None:
    if expression and len(expression.split()) == 5 and croniter.is_valid(expression):
        return None
    return 'a five-field cron expression such as "0 8 * * 1-5" (minute hour day month weekday)'


def tz_problem(name: str) -> str | None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return "an IANA time zone such as UTC or Europe/Berlin"
    return None


def next_after(expression: str, tz: str, after: datetime) -> datetime:
    """The first occurrence strictly after ``after`` (aware), returned in UTC."""
    local = after.astimezone(ZoneInfo(tz))
    found: datetime = croniter(expression, local).get_next(datetime)
    return found.astimezone(UTC)


def to_text(moment: datetime) -> str:
    """UTC ISO text that sorts like time (the store's format)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_text(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
