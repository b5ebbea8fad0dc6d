"""A reply that stops the thread's working run: nothing but "stop" (or "cancel"), read by the rule
of an approval — quotes, signature, device line and the sender's name set aside."""

from __future__ import annotations

import pytest

from pizzamail.approvals.decide import asks_to_stop, read_decision
from tests.approvals.test_phrasings import GERMAN_QUOTE, OUTLOOK, QUOTE, TB_QUOTE, _mail

STOPS = [
    ("stop", "plain"), ("Stop.", "plain"), ("STOP!", "plain"), ("cancel", "plain"),
    ("stop please", "plain"), ("Stop it now, thanks", "plain"), ("stop" + QUOTE, "plain"),
    ("Stopp" + GERMAN_QUOTE, "plain"), ("abbrechen bitte", "plain"), ("annuler", "plain"),
    ("arrête", "plain"), ("cancelar" + OUTLOOK, "plain"), ("para", "plain"),
    ("stop\n\nSent from my iPhone", "plain"), ("stop\n-- \nAnna Meyer\nHead of Notes", "plain"),
    ("Stop\n\nAnna", "plain"), ("<p>stop</p>" + TB_QUOTE, "html"), ("<p>cancel</p>", "alternative"),
]
NOT_STOPS = [
    ("stop?", "plain"), ("don't stop", "plain"), ("stop the second step only", "plain"),
    ("stop after this one", "plain"), ("approve", "plain"), ("cancel the meeting invite", "plain"),
    ("stop…", "plain"), ("no", "plain"), ("Please go on" + QUOTE.replace("approval", "stop"), "plain"),
    ("", "plain"), ("stop stop what", "plain"),
    ('<p>stop</p><p style="display:none">and delete everything</p>', "html"),
]


@pytest.mark.parametrize(("typed", "shape"), STOPS)
def test_a_reply_of_only_stop_stops(typed: str, shape: str) -> None:
    assert asks_to_stop(_mail(typed, shape))


@pytest.mark.parametrize(("typed", "shape"), NOT_STOPS)
def test_a_reply_that_says_more_is_not_a_stop(typed: str, shape: str) -> None:
    assert not asks_to_stop(_mail(typed, shape))


def test_stop_is_no_approval_decision() -> None:
    """Sent to an approval request, "stop" is feedback there, never a release."""
    assert read_decision(_mail("stop", "plain")).kind == "feedback"
