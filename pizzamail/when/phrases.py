"""English schedule phrases -> five-field cron expressions, only where the meaning is unambiguous (pure).

    every day at 8, daily at 18:45, at 8pm           0 8 * * *, 45 18 * * *, 0 20 * * *
    every weekday at 8:30, weekdays at 7am           30 8 * * 1-5, 0 7 * * 1-5
    every monday at 9, every mon and thu at 17:00    0 9 * * 1, 0 17 * * 1,4
    every weekend at 10, every mon-fri at 9          0 10 * * 0,6, 0 9 * * 1-5
    every hour, hourly, every 2 hours                0 * * * *, 0 * * * *, 0 */2 * * *
    every 15 minutes, every half hour                */15 * * * *, */30 * * * *
    every month on the 1st at 9                      0 9 1 * *

Times are on the 24-hour clock unless am/pm is given: "at 8" is 08:00. Refused, with the reason:

- steps that do not divide the hour or the day ("every 7 minutes", "every 90 minutes", "every 5
  hours"). Cron counts minutes within each hour, so ``*/7`` fires at :56 and again at :00, four
  minutes later: not what "every 7 minutes" promises. Only 1, 2, 3, 4, 5, 6, 10, 12, 15, 20 and 30
  minutes (and 1, 2, 3, 4, 6, 8, 12 hours) repeat evenly;
- "every N days/weeks" (cron cannot count across months) and days of the month past the 28th (not
  in every month);
- a day without a time ("every monday": at midnight? at 9?) and anything that does not repeat
  ("sometime tomorrow").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pizzamail.when.cron import cron_problem

EXAMPLES = ('"every weekday at 8", "every mon and thu at 17:00", "every 15 minutes",'
            ' "every month on the 1st at 9"')

_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
          "other": 2}
_DAY_NAMES = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_DAILY = ("", "day", "daily", "everyday")
_GROUPS = {"weekday": [1, 2, 3, 4, 5], "workday": [1, 2, 3, 4, 5], "working day": [1, 2, 3, 4, 5],
           "business day": [1, 2, 3, 4, 5], "weekend": [0, 6], "weekend day": [0, 6]}
_FIXED = {"every minute": "* * * * *", "every half hour": "*/30 * * * *",
          "every half an hour": "*/30 * * * *", "every quarter hour": "*/15 * * * *",
          "every quarter of an hour": "*/15 * * * *"}

_INTERVAL = re.compile(r"(?:every|each) (?:(?P<n>\w+) )?(?P<unit>minute|min|hour|hr|day|week|month)s?"
                       r"(?: at :?(?P<at>\d{1,2}))?")
_AT = re.compile(r"(?:(?P<days>.*?) )?at (?P<time>.+)")
_TIME = re.compile(r"(?P<h>\d{1,2})(?:[:.](?P<m>\d{2}))?(?: ?(?P<half>am|pm))?")
_LIST = re.compile(r" ?(?:,|&|\band\b) ?")
_RANGE = re.compile(r"(?P<a>\w+)(?: ?[-\u2013] ?| (?:to|through|thru|till|until) )(?P<b>\w+)")
_MONTHLY = (re.compile(r"(?:month|monthly) on (?:the )?(?P<d>.+)"),
            re.compile(r"(?:the )?(?P<d>.+?) of (?:every|each|the) month"))
_MONTH_DAY = re.compile(r"(?:day )?(?P<d>\d{1,2})(?:st|nd|rd|th)?|(?P<first>first)")
_ONE_OFF = re.compile(r"\b(?:tomorrow|today|tonight|next|sometime|in \d+)\b")


class _Unclear(Exception):
    """Why a phrase has no single cron reading (said to the user after the phrase)."""


@dataclass(frozen=True, kw_only=True)
class Translation:
    cron: str = ""
    problem: str = ""
    """empty when ``cron`` is set: why the phrase was refused, with examples that work"""


def translate(phrase: str) -> Translation:
    """A phrase -> its cron expression, or the reason it has none."""
    try:
        return Translation(cron=_parse(_normal(phrase)))
    except _Unclear as exc:
        return Translation(problem=str(exc))


def to_cron(phrase: str) -> str | None:
    return translate(phrase).cron or None


def phrase_problem(phrase: str) -> str | None:
    """None when the phrase translates; else what is wrong, with examples (a config check)."""
    return translate(phrase).problem or None


def when_to_cron(when: str) -> Translation:
    """A cron expression as it is, or a phrase translated (the schedule_task tool takes either)."""
    if cron_problem(when.strip()) is None:
        return Translation(cron=" ".join(when.split()))
    return translate(when)


def _normal(phrase: str) -> str:
    text = phrase.lower().replace("a.m.", "am").replace("p.m.", "pm").replace("o'clock", "")
    text = " ".join(text.split()).strip(" .!")
    return re.sub(r"^hourly\b", "every hour", text)


def _parse(text: str) -> str:
    if not text:
        raise _Unclear(_not_understood())
    if text in _FIXED:
        return _FIXED[text]
    interval = _INTERVAL.fullmatch(text)
    if interval is not None and (interval["n"] or interval["unit"] in ("minute", "min", "hour", "hr")):
        return _interval(interval["n"], interval["unit"], interval["at"])
    if _ONE_OFF.search(text):
        raise _Unclear("a schedule repeats, and this names no repeating time."
                       f" Say how often, e.g. {EXAMPLES}")
    found = _AT.fullmatch(text)
    if found is None:
        _days(text)  # a day we understand but no time: say that, rather than "not understood"
        raise _Unclear(f'say at what time, e.g. "{text} at 9" (24-hour clock unless am/pm)')
    minute, hours = _times(found["time"])
    dom, dow = _days(found["days"] or "")
    return f"{minute} {hours} {dom} * {dow}"


def _count(word: str | None) -> int:
    if word is None:
        return 1
    if word.isdigit() and int(word) > 0:
        return int(word)
    if word in _WORDS:
        return _WORDS[word]
    raise _Unclear(_not_understood())


def _interval(word: str | None, unit: str, at: str | None) -> str:
    n = _count(word)
    if unit in ("minute", "min") and at is None:
        return _minutes(n)
    if unit in ("hour", "hr"):
        return _hours(n, int(at or 0))
    if unit in ("day", "week", "month") and word is not None:
        raise _Unclear("cron cannot count days, weeks or months across month boundaries; name the"
                       ' days instead, e.g. "every mon, wed and fri at 9" or "every month on the 1st at 9"')
    raise _Unclear(_not_understood())


def _minutes(n: int) -> str:
    if n == 60:
        return "0 * * * *"
    if n > 60:
        raise _Unclear("this crosses the hour, which one cron expression cannot count;"
                       ' use whole hours ("every 2 hours") or a step that divides 60')
    if 60 % n:
        last = 60 - 60 % n
        raise _Unclear(f"cron counts minutes within each hour, so this would run at :{last:02d} and"
                       f" again at :00, {60 - last} minutes later. Use a step that divides 60: every"
                       " 5, 10, 15, 20 or 30 minutes")
    return "* * * * *" if n == 1 else f"*/{n} * * * *"


def _hours(n: int, minute: int) -> str:
    if minute > 59:
        raise _Unclear(f":{minute} is not a minute of the hour (0-59)")
    if n >= 24 or 24 % n:
        raise _Unclear("cron counts hours within each day, so only steps that divide 24 repeat evenly:"
                       ' every 1, 2, 3, 4, 6, 8 or 12 hours (or "every day at 9")')
    return f"{minute} {'*' if n == 1 else f'*/{n}'} * * *"


def _times(text: str) -> tuple[int, str]:
    """(minute, hours field): several times must share their minute ("at 8 and 17")."""
    found = [_time(part) for part in _LIST.split(text) if part]
    minutes = {m for _, m in found}
    if not found or len(minutes) > 1:
        raise _Unclear("times with different minutes need one schedule each" if found
                       else _not_understood())
    return minutes.pop(), ",".join(str(h) for h in sorted({h for h, _ in found}))


def _time(text: str) -> tuple[int, int]:
    if text in ("noon", "midday"):
        return 12, 0
    if text == "midnight":
        return 0, 0
    found = _TIME.fullmatch(text.strip())
    if found is None:
        raise _Unclear(f"{text!r} is not a time; write 8, 8:30, 17:00 or 8pm")
    hour, minute = int(found["h"]), int(found["m"] or 0)
    if found["half"]:
        if not 1 <= hour <= 12:
            raise _Unclear(f"{text!r} is not a time: with am/pm the hour is 1 to 12")
        hour = hour % 12 + (12 if found["half"] == "pm" else 0)
    if hour > 23 or minute > 59:
        raise _Unclear(f"{text!r} is not a time of day (00:00 to 23:59)")
    return hour, minute


def _strip(text: str) -> str:
    """Drop the leading words that only say "repeating": every, each, on, from."""
    while (shorter := re.sub(r"^(?:every|each|on|from) ", "", text)) != text:
        text = shorter
    return text if text not in ("every", "each") else ""


def _days(spec: str) -> tuple[str, str]:
    """(day-of-month field, day-of-week field)."""
    spec = _strip(spec)
    if spec in _DAILY:
        return "*", "*"
    for pattern in _MONTHLY:
        found = pattern.fullmatch(spec)
        if found is not None:
            return _month_days(found["d"]), "*"
    return "*", _weekdays(spec)


def _month_days(text: str) -> str:
    days = []
    for part in filter(None, _LIST.split(text)):
        found = _MONTH_DAY.fullmatch(part)
        if found is None:
            raise _Unclear(f'{part!r} is not a day of the month; write "the 1st" or "the 15th"')
        day = 1 if found["first"] else int(found["d"])
        if not 1 <= day <= 28:
            raise _Unclear(f"not every month has a day {day}; use a day from the 1st to the 28th")
        days.append(day)
    if not days:
        raise _Unclear(_not_understood())
    return ",".join(str(d) for d in sorted(set(days)))


def _weekdays(spec: str) -> str:
    days: set[int] = set()
    for part in filter(None, _LIST.split(spec)):
        days.update(_weekday_part(_strip(part)))
    if not days:
        raise _Unclear(_not_understood())
    return _compress(sorted(days))


def _weekday_part(part: str) -> list[int]:
    single = part[:-1] if part.endswith("s") else part
    if single in _GROUPS:
        return _GROUPS[single]
    span = _RANGE.fullmatch(part)
    if span is None:
        return [_day(part)]
    start, end = _day(span["a"]), _day(span["b"])
    return list(range(start, end + 1)) if start <= end else [*range(start, 7), *range(0, end + 1)]


def _day(word: str) -> int:
    """monday, mondays, mon, tues, thurs … -> 0 (Sunday) to 6."""
    word = word.rstrip(".")
    if word.endswith("s") and word[:-1] in _DAY_NAMES:
        word = word[:-1]
    word = {"weds": "wed"}.get(word, word)
    found = [n for n, name in enumerate(_DAY_NAMES) if len(word) >= 3 and name.startswith(word)]
    if len(found) != 1:
        raise _Unclear(_not_understood())
    return found[0]


def _compress(days: list[int]) -> str:
    """[1, 2, 3, 4, 5] -> "1-5"; [0, 6] -> "0,6"; runs of three or more become ranges."""
    if len(days) == 7:
        return "*"
    runs: list[list[int]] = []
    for day in days:
        if runs and runs[-1][-1] == day - 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) >= 3 else ",".join(map(str, r)) for r in runs)


def _not_understood() -> str:
    return f'not a schedule pizzamail understands. Try {EXAMPLES}, or a cron expression such as "0 8 * * 1-5"'
