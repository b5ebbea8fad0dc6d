"""The user's own words in a plain-text reply (mail.reply), and a follow-up's task text."""

from __future__ import annotations

from email.message import EmailMessage

from pizzamail.intake.tasks import task_text
from pizzamail.mail.parse import parse_mail
from pizzamail.mail.reply import user_words

QUOTED = ("On Mon, 30 Nov 2026 at 10:00, Pizza Bot <bot@pizzamail.localhost> wrote:\n"
          "> Day 1: hike\n> Day 2: workshop\n")
OUTLOOK = ("________________________________\nFrom: Pizza Bot <bot@pizzamail.localhost>\n"
           "Sent: Monday, November 30, 2026 10:00\nTo: Anna Meyer\nSubject: Offsite\n\nDay 1: hike\n")


def test_quotes_attributions_signatures_and_device_lines_are_set_aside() -> None:
    assert user_words("Add a dinner.\n\n" + QUOTED) == "Add a dinner."
    assert user_words("Add a dinner.\n\n" + OUTLOOK) == "Add a dinner."
    assert user_words("Add a dinner.\n-- \nAnna Meyer\nHead of Offsites") == "Add a dinner."
    assert user_words("Add a dinner.\n\nSent from my iPhone") == "Add a dinner."
    assert user_words("Bis dann\n\nAm 30.11.2026 um 10:00 schrieb Pizza Bot:\n> hallo\n") == "Bis dann"


def test_words_written_between_quotes_are_kept() -> None:
    assert user_words("> Day 1: hike\nMake it a walk.\n> Day 2: workshop\nFine.") == "Make it a walk.\nFine."


def _mail(body: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "me@pizzamail.localhost", "bot@pizzamail.localhost", "Offsite"
    msg.set_content(body)
    return msg


def test_a_follow_up_gives_the_model_its_own_words_and_a_first_mail_all_of_its_text() -> None:
    parsed = parse_mail(_mail("Add a dinner.\n\n" + QUOTED + "\n-- \nAnna").as_bytes())
    assert task_text(parsed, follow_up=True) == "Add a dinner."
    forwarded = parse_mail(_mail("Summarise this:\n\n" + QUOTED).as_bytes())
    assert "> Day 2: workshop" in task_text(forwarded)  # a forward's quote is the task's content
    only_quote = parse_mail(_mail(QUOTED).as_bytes())
    assert task_text(only_quote, follow_up=True) == "Offsite"  # nothing of their own: the subject
