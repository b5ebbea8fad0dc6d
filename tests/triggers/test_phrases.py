"""Schedule phrases -> cron: what translates, to exactly what, and what is refused (and why)."""

from __future__ import annotations

import pytest
from croniter import croniter

from pizzamail.when.phrases import phrase_problem, to_cron, translate, when_to_cron


@pytest.mark.parametrize(("phrase", "cron"), [
    ("every day at 8", "0 8 * * *"),
    ("Every day at 8.", "0 8 * * *"),
    ("daily at 18:45", "45 18 * * *"),
    ("at 8pm", "0 20 * * *"),
    ("at 8", "0 8 * * *"),
    ("at 12am", "0 0 * * *"),
    ("at 12pm", "0 12 * * *"),
    ("every day at noon", "0 12 * * *"),
    ("every day at midnight", "0 0 * * *"),
    ("every day at 8 o'clock", "0 8 * * *"),
    ("every day at 7:30 p.m.", "30 19 * * *"),
    ("every day at 8 and 17", "0 8,17 * * *"),
    ("every weekday at 8:30", "30 8 * * 1-5"),
    ("weekdays at 7am", "0 7 * * 1-5"),
    ("every workday at 6", "0 6 * * 1-5"),
    ("every monday at 9", "0 9 * * 1"),
    ("mondays at 9", "0 9 * * 1"),
    ("on mondays at 9", "0 9 * * 1"),
    ("every mon and thu at 17:00", "0 17 * * 1,4"),
    ("every mon, wed, and fri at 9", "0 9 * * 1,3,5"),
    ("every tues and thurs at 9", "0 9 * * 2,4"),
    ("every mon-fri at 9", "0 9 * * 1-5"),
    ("every monday to wednesday at 9", "0 9 * * 1-3"),
    ("every fri-mon at 9", "0 9 * * 0,1,5,6"),
    ("every weekday and saturday at 9", "0 9 * * 1-6"),
    ("every weekend at 10", "0 10 * * 0,6"),
    ("weekends at 10am", "0 10 * * 0,6"),
    ("every sunday at 23:59", "59 23 * * 0"),
    ("every hour", "0 * * * *"),
    ("hourly", "0 * * * *"),
    ("hourly at :30", "30 * * * *"),
    ("every hour at :15", "15 * * * *"),
    ("every 2 hours", "0 */2 * * *"),
    ("every two hours", "0 */2 * * *"),
    ("every other hour", "0 */2 * * *"),
    ("every 12 hours", "0 */12 * * *"),
    ("every minute", "* * * * *"),
    ("every 15 minutes", "*/15 * * * *"),
    ("every 5 mins", "*/5 * * * *"),
    ("every half hour", "*/30 * * * *"),
    ("every 60 minutes", "0 * * * *"),
    ("every month on the 1st at 9", "0 9 1 * *"),
    ("monthly on the 15th at 9:30", "30 9 15 * *"),
    ("every month on the 1st and 15th at 8", "0 8 1,15 * *"),
    ("on the 1st of every month at 9", "0 9 1 * *"),
    ("every month on the first at 9", "0 9 1 * *"),
])
def test_phrases_translate(phrase: str, cron: str) -> None:
    assert to_cron(phrase) == cron
    assert croniter.is_valid(cron)
    assert phrase_problem(phrase) is None


@pytest.mark.parametrize(("phrase", "reason"), [
    ("every 7 minutes", "again at :00, 4 minutes later"),
    ("every 45 minutes", "divides 60"),
    ("every 90 minutes", "crosses the hour"),
    ("every 5 hours", "divide 24"),
    ("every 24 hours", "divide 24"),
    ("every 2 days at 9", "across month boundaries"),
    ("every other week at 9", "across month boundaries"),
    ("sometime tomorrow", "a schedule repeats"),
    ("tomorrow at 9", "a schedule repeats"),
    ("every monday", "say at what time"),
    ("every day", "say at what time"),
    ("every day at 25", "not a time of day"),
    ("every day at 13pm", "hour is 1 to 12"),
    ("every day at 8:75", "not a time of day"),
    ("every day at 8:30 and 17:00", "different minutes"),
    ("every day at dawn", "not a time"),
    ("every month on the 31st at 9", "not every month has a day 31"),
    ("every funday at 9", "not a schedule pizzamail understands"),
    ("every t at 9", "not a schedule pizzamail understands"),
    ("every week at 9", "not a schedule pizzamail understands"),
    ("", "not a schedule pizzamail understands"),
    ("banana", "not a schedule pizzamail understands"),
    ("every 0 minutes", "not a schedule pizzamail understands"),
])
def test_ambiguous_phrases_are_refused_with_a_reason(phrase: str, reason: str) -> None:
    result = translate(phrase)
    assert result.cron == "" and to_cron(phrase) is None
    assert reason in result.problem


def test_not_understood_gives_examples() -> None:
    problem = phrase_problem("whenever you like") or ""
    assert '"every weekday at 8"' in problem and '"0 8 * * 1-5"' in problem


@pytest.mark.parametrize(("when", "cron"), [
    ("0 8 * * 1-5", "0 8 * * 1-5"),
    ("  30  9 * * 1 ", "30 9 * * 1"),
    ("every weekday at 8", "0 8 * * 1-5"),
])
def test_when_takes_cron_or_a_phrase(when: str, cron: str) -> None:
    assert when_to_cron(when).cron == cron


def test_when_refuses_what_is_neither() -> None:
    assert "not a schedule" in when_to_cron("0 8 * *").problem
