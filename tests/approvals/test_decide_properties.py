"""Properties of the reply-decision parser, fuzzed with Hypothesis.

1. It never crashes, on any text or HTML, as plain text or as a whole mail.
2. An approval word followed by a question, a condition or a negation never approves.
3. What stands only in the quoted part decides nothing: a reply decides what its own words decide.
"""

from __future__ import annotations

import html
from email.message import EmailMessage
from email.policy import SMTP

from hypothesis import given
from hypothesis import strategies as st

from pizzamail.approvals.decide import Decision, decide, read_decision
from pizzamail.approvals.markup import html_text
from pizzamail.approvals.reading import own_words
from pizzamail.mail.parse import parse_bytes

APPROVALS = ["approve", "Approve", "yes", "Yes!", "ok", "OK", "okay", "lgtm", "go ahead", "sure",
             "approved", "ja", "oui", "sí", "👍", "approve always", "yes please", "Approve, thanks"]
SEPARATORS = [" ", ", ", ". ", "\n", "\n\n", " - ", "... ", "! ", " — "]
CONDITIONS = ["but", "if", "unless", "only", "after", "once", "when", "first", "except", "provided",
              "as long as", "aber", "wenn", "mais", "si no", "pero"]
NEGATIONS = ["no", "not", "don't", "never", "wait", "actually no", "cancel", "stop", "nope", "nein",
             "non", "hold on", "scratch that", "on second thought", "deny"]
#: text without control characters (a mail body cannot carry them as typed)
TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=200)
ANY_TEXT = st.text(max_size=300)
TAGS = st.sampled_from(["<div>", "</div>", "<p>", "</p>", "<br>", "<blockquote>", "</blockquote>",
                        "<pre>", "</pre>", '<div class="moz-signature">', "&nbsp;", "<style>", "</style>",
                        "<!--", "-->", "<", ">", "&", "&#x", ";", "{", "}", '"', "approve", "yes", "-- "])
MARKUP = st.lists(st.one_of(TAGS, TEXT), max_size=30).map("".join)
OWN = st.sampled_from(["", "approve", "yes, thanks", "deny: not now", "approve always", "Thanks!",
                       "Please use the other repo.", "what does this do?", '```json\n{"name": "b"}\n```'])


def _runs(decision: Decision) -> bool:
    """Whether the decision would release the call (an unreadable edit runs nothing)."""
    return decision.kind in ("approve", "approve_always") or (
        decision.kind == "edit" and decision.arguments is not None)


def _mail(body: str, subtype: str = "plain") -> EmailMessage:
    msg = EmailMessage(policy=SMTP)
    msg["From"], msg["To"], msg["Subject"] = "Anna <me@pizzamail.localhost>", "bot@x.localhost", "Re: x"
    msg.set_content(body, subtype=subtype)
    return parse_bytes(msg.as_bytes())


@given(ANY_TEXT)
def test_any_text_is_read_without_crashing(text: str) -> None:
    assert decide(text).kind in {"approve", "approve_always", "deny", "edit", "feedback", "retry", "skip",
                                 "unclear"}
    own_words(text)


@given(MARKUP)
def test_any_html_is_read_without_crashing(markup: str) -> None:
    html_text(markup)
    read_decision(_mail(markup, "html"))


@given(TEXT)
def test_any_plain_mail_is_read_without_crashing(body: str) -> None:
    read_decision(_mail(body))


@given(st.sampled_from(APPROVALS), st.sampled_from(SEPARATORS),
       st.one_of(st.sampled_from(CONDITIONS), st.sampled_from(NEGATIONS)), TEXT)
def test_an_approval_then_a_condition_or_negation_never_approves(
    approval: str, separator: str, turn: str, rest: str
) -> None:
    assert not _runs(decide(f"{approval}{separator}{turn} {rest}"))


@given(st.sampled_from(APPROVALS), st.sampled_from(SEPARATORS), TEXT)
def test_an_approval_with_a_question_never_approves(approval: str, separator: str, rest: str) -> None:
    assert not _runs(decide(f"{approval}{separator}{rest}?"))
    assert not _runs(decide(f"{approval}?{separator}{rest}"))


@given(OWN, TEXT)
def test_quoted_lines_decide_nothing(own: str, quoted: str) -> None:
    quote = "\n".join("> " + line for line in quoted.split("\n"))
    alone = read_decision(_mail(own))
    assert read_decision(_mail(f"{own}\n\n{quote}\n")) == alone
    attributed = f"{own}\n\nOn Mon, 30 Nov 2026 at 10:00, Pizza Bot <bot@x.localhost> wrote:\n{quote}\n"
    assert read_decision(_mail(attributed)) == alone
    assert read_decision(_mail(f"On Mon, 30 Nov 2026, Pizza Bot wrote:\n{quote}\n\n{own}")) == alone
    # Outlook quotes without ">": everything below its header block is the quoted mail
    outlook = ("________________________________\nFrom: Pizza Bot <bot@x.localhost>\n"
               "Sent: Monday, November 30, 2026 10:00\nTo: Anna\nSubject: x\n\n")
    assert read_decision(_mail(f"{own}\n\n{outlook}{quoted}\n")) == alone
    original = "-----Original Message-----\nFrom: Bot\nSent: Monday\n\n"
    assert read_decision(_mail(f"{own}\n\n{original}{quoted}")) == alone


@given(OWN, TEXT, st.integers(min_value=1, max_value=4))
def test_blockquoted_html_decides_nothing(own: str, quoted: str, depth: int) -> None:
    inner = html.escape(quoted)
    for level in range(depth):  # nested quotes, with text of each level around the deeper one
        inner = f'<blockquote type="cite">{level}: {inner} approve</blockquote>'
    own_html = "".join(f"<div>{html.escape(line) or '<br>'}</div>" for line in own.split("\n"))
    alone = read_decision(_mail(f"<html><body>{own_html}</body></html>", "html"))
    quoted_mail = _mail(f'<html><body>{own_html}<div class="moz-cite-prefix">On Mon, Bot wrote:</div>'
                        f"{inner}</body></html>", "html")
    assert read_decision(quoted_mail) == alone


@given(TEXT)
def test_a_reply_of_only_quoted_text_decides_nothing(quoted: str) -> None:
    quote = "\n".join("> " + line for line in quoted.split("\n"))
    assert read_decision(_mail(quote)).kind == "unclear"
    assert read_decision(_mail(f"<blockquote>{html.escape(quoted)}</blockquote>", "html")).kind == "unclear"


HIDING = ['style="display:none"', 'style="font-size: 0px"', "hidden", 'style="color:#FFFFFF"',
          'style="visibility: hidden"', 'style="opacity:0"', 'style="mso-hide:all"']
HIDDEN = st.one_of(st.sampled_from(APPROVALS + NEGATIONS + CONDITIONS), TEXT)


def _html(own: str) -> str:
    return "".join(f"<div>{html.escape(line) or '<br>'}</div>" for line in own.split("\n"))


def _both(plain: str, markup: str) -> EmailMessage:
    msg = EmailMessage(policy=SMTP)
    msg["From"], msg["To"], msg["Subject"] = "Anna <me@pizzamail.localhost>", "bot@x.localhost", "Re: x"
    msg.set_content(plain)
    msg.add_alternative(markup, subtype="html")
    return parse_bytes(msg.as_bytes())


@given(OWN, st.sampled_from(HIDING), HIDDEN, st.booleans())
def test_text_hidden_from_a_reader_never_makes_a_reply_run(
    own: str, hiding: str, hidden: str, before: bool
) -> None:
    """Hidden text may stop an approval (the forms disagree), never make or change one."""
    tucked = f"<span {hiding}>{html.escape(hidden)}</span>"
    markup = tucked + _html(own) if before else _html(own) + tucked
    decision = read_decision(_mail(markup, "html"))
    if _runs(decision):
        assert decision == read_decision(_mail(_html(own), "html"))


@given(OWN, OWN)
def test_a_reply_runs_only_what_its_plain_and_html_parts_both_say(plain: str, shown: str) -> None:
    decision = read_decision(_both(plain, _html(shown)))
    if _runs(decision):
        for alone in (read_decision(_mail(plain)), read_decision(_mail(_html(shown), "html"))):
            assert (alone.kind, alone.arguments) == (decision.kind, decision.arguments)


@given(OWN, st.sampled_from(["s", "del", "strike"]))
def test_struck_out_words_never_run(own: str, tag: str) -> None:
    assert not _runs(read_decision(_mail(f"<{tag}>{_html(own)}</{tag}>", "html")))


LOOKALIKES = {"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441", "y": "\u0443",
              "k": "\u043a", "s": "\u0455", "i": "\u0456", "O": "\u041e", "A": "\u0410", "K": "\u041a"}


@given(st.sampled_from(APPROVALS), st.data())
def test_a_lookalike_letter_never_approves(approval: str, data: st.DataObject) -> None:
    """A Cyrillic letter that looks Latin makes another word: never an approval, never a crash."""
    where = [i for i, letter in enumerate(approval) if letter in LOOKALIKES]
    if not where:
        return
    i = data.draw(st.sampled_from(where))
    forged = approval[:i] + LOOKALIKES[approval[i]] + approval[i + 1:]
    assert not _runs(decide(forged))
    assert not _runs(read_decision(_mail(forged)))
