"""Cron arithmetic: validation and "the next times after t", in a time zone; and which zone is ours.

Everything is pure except :func:`machine_zone`, which reads ``$TZ`` and ``/etc/localtime``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
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


def machine_zone(environ: Mapping[str, str] | None = None,
                 localtime: Path = Path("/etc/localtime")) -> str:
    """This machine's IANA zone: ``$TZ`` if it names one, else the ``/etc/localtime`` link, else UTC.

    Only a name is any use to a schedule (it is stored, and read again after a move to another
    zone), so a POSIX rule such as ``CET-1CEST`` or a copied (not linked) localtime means UTC.
    """
    given = (os.environ if environ is None else environ).get("TZ", "").lstrip(":")
    for candidate in (given.rpartition("zoneinfo/")[2], _linked_zone(localtime)):
        if candidate and tz_problem(candidate) is None:
            return candidate
    return "UTC"


def _linked_zone(localtime: Path) -> str:
    try:
        target = os.readlink(localtime)  # e.g. /usr/share/zoneinfo/Europe/Berlin
    except OSError:
        return ""
    return target.rpartition("zoneinfo/")[2] if "zoneinfo/" in target else ""


def default_zone(configured: str) -> str:
    """The zone of a schedule that names none: ``[agent] timezone``, else this machine's."""
    return configured or machine_zone()


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
