"""The pure side: which words decide what, in the shapes real clients send them."""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import SMTP

import pytest

from pizzamail.approvals.decide import decide, parse_approval_header, plus_token, route
from pizzamail.approvals.reading import reply_text, unflow
from pizzamail.mail.parse import parse_bytes


@pytest.mark.parametrize(("words", "kind"), [
    ("approve", "approve"), ("Yes", "approve"), ("ok.", "approve"), ("Approve always", "approve_always"),
    ("deny", "deny"), ("No", "deny"), ("retry", "retry"), ("skip", "skip"),
    ("please use the other repo", "feedback"), ("", "unclear"),
])
def test_first_words_decide(words: str, kind: str) -> None:
    assert decide(words).kind == kind


def test_a_deny_reason_is_kept() -> None:
    assert decide("deny: too early\nask me tomorrow").note == "too early ask me tomorrow"


def test_an_edited_block_carries_its_arguments_or_why_not() -> None:
    assert decide('```json\n{"a": 1}\n```').arguments == {"a": 1}
    assert "not valid JSON" in decide("```json\n{a: 1}\n```").error
    assert "JSON object" in decide("```\n[1]\n```").error


def test_the_approval_header_and_plus_address_name_the_nonce() -> None:
    assert parse_approval_header("12; nonce=abc_D-9") == (12, "abc_D-9")
    assert parse_approval_header("12") is None
    assert plus_token("bot+xyz@pizzamail.localhost") == "xyz"
    assert plus_token("bot@pizzamail.localhost") is None


def _mail(body: str, *, subtype: str = "plain", **params: str) -> EmailMessage:
    msg = EmailMessage(policy=SMTP)
    msg["From"], msg["To"], msg["Subject"] = "me@pizzamail.localhost", "bot@pizzamail.localhost", "Re: x"
    msg["In-Reply-To"] = "<req-1@pizzamail.localhost>"
    msg["X-Pizzamail-Approval"] = "3; nonce=tok"
    msg.set_content(body, subtype=subtype)
    for key, value in params.items():
        msg.set_param(key, value)
    return parse_bytes(msg.as_bytes())


def test_routing_names_every_clue() -> None:
    found = route(_mail("approve"), ["bot+plus@pizzamail.localhost"])
    assert found.nonces == ("plus", "tok") and found.message_ids == ("req-1@pizzamail.localhost",)


def test_thunderbird_format_flowed_bottom_posted() -> None:
    body = ("On 30/11/2026 10:00, Pizza Bot wrote:\n> I would like to run **delete_note** and am \n"
            "> waiting for your approval.\n> \n> Reply with one of:\n\n"
            "deny because this note is still \nneeded by the team\n\n-- \nMe\n")
    msg = _mail(body, format="flowed")
    assert decide(reply_text(msg)).note == "because this note is still needed by the team"


def test_top_posted_with_the_request_quoted_below() -> None:
    body = "approve\n\nOn Mon, 30 Nov 2026 at 10:00, Pizza Bot <bot@pizzamail.localhost> wrote:\n> deny\n"
    assert decide(reply_text(_mail(body))).kind == "approve"


def test_an_html_only_reply_with_a_blockquote() -> None:
    body = ("<html><body><div>Yes</div><div><br></div><div>On Mon wrote:</div>"
            "<blockquote type=\"cite\">deny<br>approve always</blockquote></body></html>")
    assert decide(reply_text(_mail(body, subtype="html"))).kind == "approve"


def test_quoted_words_never_decide() -> None:
    assert decide(reply_text(_mail("> approve\n> yes\n"))).kind == "unclear"


def test_unflow_keeps_hard_breaks_and_the_signature_separator() -> None:
    assert unflow("a \nb\n-- \nsig") == "a b\n-- \nsig"
    assert unflow(" From me") == "From me"


def test_the_senders_name_is_set_aside_but_never_a_word_that_turns_the_reply_around() -> None:
    assert decide("approve\n\nAnna", names=["Anna Meyer"]).kind == "approve"
    assert decide("approve\n\nAnna", names=[]).kind == "feedback"
    assert decide("approve never", names=["Never Land"]).kind == "feedback"
    assert decide("approve, wait", names=["Wait Smith"]).kind == "feedback"


@pytest.mark.parametrize(("name", "words"), [
    ("Anna Only", "approve only"), ("Will After", "approve after"), ("June First", "approve first"),
    ("Ray Until", "ok until"), ("Al Tomorrow", "approve tomorrow"), ("Tom Wenn", "ja wenn"),
    ("Bob Once", "yes once"), ("Hope Except", "approve except"), ("Max Erst", "ja erst morgen"),
])
def test_a_name_that_is_also_a_condition_or_a_time_is_read_as_one(name: str, words: str) -> None:
    assert decide(words, names=[name]).kind == "feedback"
