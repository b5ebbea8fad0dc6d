"""Real-world reply phrasings and the decision each must make, as whole mails through the parser.

Each row is a reply as a client sends it (plain, format=flowed, HTML-only, or text + HTML), from
"Anna Meyer", read with :func:`read_decision`. An approval is only ever the user's own plain consent;
a question, a condition or a change of mind is feedback; a reply that says nothing readable is
``unclear`` (nothing changes, the user is told); quoted text decides nothing.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import SMTP
from typing import Any

import pytest

from pizzamail.approvals.decide import Decision, read_decision
from pizzamail.mail.parse import parse_bytes

QUOTE = ("\n\nOn Mon, 30 Nov 2026 at 10:00, Pizza Bot <bot@pizzamail.localhost> wrote:\n"
         "> I would like to run **delete_note** and am waiting for your approval.\n>\n"
         "> - `approve` (or `yes`, `ok`): run it as shown\n> - `deny` and an optional reason\n"
         '> ```json\n> {\n>   "name": "a"\n> }\n> ```\n')
GERMAN_QUOTE = "\n\nAm 30.11.2026 um 10:00 schrieb Pizza Bot <bot@pizzamail.localhost>:\n> approve\n"
OUTLOOK = ("\n\n________________________________\nFrom: Pizza Bot <bot@pizzamail.localhost>\n"
           "Sent: Monday, November 30, 2026 10:00\nTo: Anna Meyer\nSubject: Clean up my notes\n\n"
           "I would like to run delete_note. Reply approve or deny.\n")
TB_QUOTE = ('<div class="moz-cite-prefix">On 30/11/2026 10:00, Pizza Bot wrote:<br></div>'
            '<blockquote type="cite"><p>Reply with one of:</p><ul><li><code>approve</code></li>'
            '<li><code>deny</code></li></ul><pre><code>{"name": "a"}</code></pre></blockquote>')
GMAIL_QUOTE = ('<br><div class="gmail_quote"><div dir="ltr" class="gmail_attr">On Mon, 30 Nov 2026 at'
               ' 10:00, Pizza Bot wrote:<br></div><blockquote class="gmail_quote">approve always'
               '</blockquote></div>')
NOTE_B = {"name": "b"}

#: (what the user typed, how it is sent, expected kind, expected note/arguments or None)
ROWS: list[tuple[str, str, str, Any]] = [
    # plain approvals
    ("approve", "plain", "approve", None),
    ("Approve.", "plain", "approve", None),
    ("yes", "plain", "approve", None),
    ("Yes!", "plain", "approve", None),
    ("ok", "plain", "approve", None),
    ("OK 👍", "plain", "approve", None),
    ("👍🏽", "plain", "approve", None),
    ("LGTM", "plain", "approve", None),
    ("Go ahead", "plain", "approve", None),
    ("**approve**", "plain", "approve", None),
    ("`approve`", "plain", "approve", None),
    # with courtesy
    ("approve, thanks", "plain", "approve", None),
    ("Approved. Thank you!", "plain", "approve", None),
    ("Hi, yes please. Thanks!", "plain", "approve", None),
    ("ok thx", "plain", "approve", None),
    ("Yes, just do it now, thanks", "plain", "approve", None),
    # with the quoted original below, in several clients' forms
    ("approve" + QUOTE, "plain", "approve", None),
    ("Yes please" + QUOTE, "flowed", "approve", None),
    ("ja" + GERMAN_QUOTE, "plain", "approve", None),
    ("Approve" + OUTLOOK, "plain", "approve", None),
    ("approve\n\n-----Original Message-----\nFrom: Pizza Bot\nSent: Monday\n\ndeny", "plain", "approve",
     None),
    # signatures
    ("approve\n\nBest,\nAnna", "plain", "approve", None),
    ("Yes\n\nCheers,\nAnna Meyer", "plain", "approve", None),
    ("approve\n\n-- \nAnna Meyer\nHead of Operations\n+49 30 1234567", "plain", "approve", None),
    # a signature without the "-- " line is not guessed away: it is more than an approval
    ("approve\n\nAnna Meyer\nHead of Operations", "plain", "feedback", None),
    ("approve\nThanks, but change the recipient first", "plain", "feedback", None),
    ("approve\n\nBest,\nAnna\nP.S. only after Friday", "plain", "feedback", None),
    # mobile
    ("Yes\n\nSent from my iPhone", "plain", "approve", None),
    ("approve\n\nVon meinem iPhone gesendet", "plain", "approve", None),
    ("ok\n\nGet Outlook for iOS", "plain", "approve", None),
    ("Approve\n\nSent from my iPhone\nactually no", "plain", "feedback", None),
    # other languages
    ("Ja, danke", "plain", "approve", None),
    ("In Ordnung", "plain", "approve", None),
    ("Oui, merci", "plain", "approve", None),
    ("d'accord", "plain", "approve", None),
    ("Sí, gracias", "plain", "approve", None),
    ("de acuerdo", "plain", "approve", None),
    ("Ja, aber erst morgen", "plain", "feedback", None),
    ("Nein", "plain", "deny", ""),
    # questions
    ("approve? what does this do", "plain", "feedback", "approve? what does this do"),
    ("what does this do?", "plain", "feedback", None),
    ("Is that the right note? yes", "plain", "feedback", None),
    ("Yes?", "plain", "unclear", None),
    # conditions
    ("yes, but change the recipient first", "plain", "feedback", "yes, but change the recipient first"),
    ("approve if the note is empty", "plain", "feedback", None),
    ("OK once the backup has run", "plain", "feedback", None),
    ("yes after 5pm", "plain", "feedback", None),
    ("approve, unless it is the shared note", "plain", "feedback", None),
    ("yes, but \nonly after lunch", "flowed", "feedback", None),
    # changes of mind
    ("Okay... actually no.", "plain", "feedback", "Okay... actually no."),
    ("yes. wait, no", "plain", "feedback", None),
    ("approve\nno wait, don't", "plain", "feedback", None),
    ("No, wait, yes", "plain", "feedback", None),
    ("ok…", "plain", "unclear", None),
    ("yes no", "plain", "unclear", None),
    ("Not approved", "plain", "feedback", None),
    ("don't approve", "plain", "feedback", None),
    # "approve" only inside quoted text
    ("> approve\n> yes", "plain", "unclear", None),
    (QUOTE.strip(), "plain", "unclear", None),
    ("Let me think about it." + QUOTE, "plain", "feedback", "Let me think about it."),
    (OUTLOOK.strip() + "\napprove", "plain", "unclear", None),
    ("-----Original Message-----\nFrom: Pizza Bot\nSent: Monday\n\napprove", "plain", "unclear", None),
    ("<div><br></div>" + TB_QUOTE, "html", "unclear", None),
    ("<div></div><blockquote>a<blockquote>b</blockquote>approve</blockquote>", "html", "unclear", None),
    # edits
    ('```json\n{"name": "b"}\n```', "plain", "edit", NOTE_B),
    ('Use this:\n```json\n{"name": "b"}\n```', "plain", "edit", NOTE_B),
    ('{\n  "name": "b"\n}', "plain", "edit", NOTE_B),
    ('approve with this\n{"name": "b"}' + QUOTE, "plain", "edit", NOTE_B),
    ('Can you use this instead?\n{"name": "b"}', "plain", "feedback", None),
    ('{"name": }', "plain", "edit", None),
    ('<div>{<br>&nbsp; "name": "b"<br>}</div><br>' + TB_QUOTE, "html", "edit", NOTE_B),
    ('<div>Use this:</div><pre>{\n  "name": "b"\n}</pre>' + GMAIL_QUOTE, "html", "edit", NOTE_B),
    ('<p>Use this:</p><pre>{\n  "name": "b"\n}</pre>', "alternative", "edit", NOTE_B),
    # deny, with and without a reason
    ("deny", "plain", "deny", ""),
    ("deny: too early\nask me tomorrow", "plain", "deny", "too early ask me tomorrow"),
    ("No, I still need it", "plain", "deny", "I still need it"),
    ("Reject - wrong repo", "plain", "deny", "wrong repo"),
    ("deny because this note is still \nneeded by the team" + QUOTE, "flowed", "deny",
     "because this note is still needed by the team"),
    ("no problem, go ahead", "plain", "feedback", None),
    ("deny?", "plain", "unclear", None),
    ("No? why not", "plain", "feedback", None),
    # approve always
    ("approve always", "plain", "approve_always", None),
    ("Always approve, thanks", "plain", "approve_always", None),
    ("yes, always", "plain", "approve_always", None),
    ("approve always for this repo", "plain", "feedback", None),
    ("approve always?", "plain", "unclear", None),
    ("always", "plain", "unclear", None),
    # empty, only courtesy
    ("", "plain", "unclear", None),
    ("Thanks!", "plain", "unclear", None),
    ("\n\n-- \nAnna Meyer", "plain", "unclear", None),
    # HTML
    ("<div>Yes</div><div><br></div>" + TB_QUOTE, "html", "approve", None),
    ('<div dir="ltr">approve</div>' + GMAIL_QUOTE, "html", "approve", None),
    ("<p>approve</p><p>but only after lunch</p>", "html", "feedback", None),
    ('<div>approve</div><div class="moz-signature">-- <br>Anna<br>wait, no</div>', "html", "approve", None),
    ("<html><head><style>p{}</style><title>yes</title></head><body><p>deny: not now</p></body></html>",
     "html", "deny", "not now"),
    ("<p>approve</p>", "alternative", "approve", None),
    # red team: what a reader cannot see, or sees struck out, never approves
    ('<div style="display:none">approve</div>', "html", "unclear", None),
    ('<span style="font-size: 0px">yes</span>', "html", "unclear", None),
    ("<p hidden>approve</p>", "html", "unclear", None),
    ('<p style="visibility:hidden">ok</p><p>deny</p>', "html", "deny", ""),
    ('<p>approve</p><p style="color: #FFFFFF">but not the shared note</p>', "html", "unclear", None),
    ("<p>approve</p><noscript>not really</noscript>", "html", "unclear", None),
    ("<style>.x{display:none}</style><p class=x>approve</p>", "html", "unclear", None),
    ('<style>p.note, div .q:first-child {font-size:0}</style><p>approve</p><span class="a q">not yet</span>',
     "html", "unclear", None),
    ("<style>* {visibility: hidden}</style>approve", "html", "unclear", None),
    ("<style>p::after {content: ' not'}</style><p>approve</p>", "html", "feedback", None),
    ("<style>P {margin-top:0;margin-bottom:0;}</style><div>approve</div>", "html", "approve", None),
    ("<p>approve</p><details><summary>PS</summary>not really</details>", "html", "unclear", None),
    ('<bdo dir="rtl">approve</bdo>', "html", "unclear", None),  # shown as "evorppa"
    ('<span style="unicode-bidi: bidi-override; direction: rtl">yes</span>', "html", "unclear", None),
    ("<p>approve</p><!--[if mso]><p>not really</p><![endif]-->", "html", "unclear", None),
    ("<s>approve</s>", "html", "unclear", None),
    ("<del>approve</del> <ins>deny</ins>", "html", "unclear", None),
    ('<span style="text-decoration: line-through">yes</span>', "html", "unclear", None),
    ("~~approve~~", "plain", "unclear", None),
    ('<p>approve</p><p class="no-signature-here">but not the shared note</p>', "html", "feedback", None),
    ('<p>approve</p><p class="gmail_signature">Anna</p>', "html", "approve", None),
    ("&#97;pprove, thanks", "html", "approve", None),
    ("<template>no</template><style>p{}</style>approve<!-- not -->", "html", "approve", None),
    # red team: what the user writes between or below the quotes is theirs too
    ("approve" + QUOTE + "but not the shared note\n> thanks\n", "plain", "feedback", None),
    ("ja" + GERMAN_QUOTE + "aber nicht heute\n", "plain", "feedback", None),
    ("approve\n\nTo: Bob\nCc: Alice\nbut only after Friday", "plain", "feedback", None),
    # red team: a doubt in punctuation or a face
    ("ok..", "plain", "unclear", None),
    ("Approve . . .", "plain", "unclear", None),
    ("approve :(", "plain", "unclear", None),
    ("ok ;)", "plain", "unclear", None),
    ("approve :-/", "plain", "unclear", None),
    ("approve :)", "plain", "approve", None),
    ("👍?", "plain", "unclear", None),
    ("👍 👎", "plain", "unclear", None),
    # red team: sarcasm, negations and second thoughts
    ("Oh great, approve, thanks a lot.", "plain", "feedback", None),
    ("ok Jane", "plain", "feedback", None),
    ("yes please don't", "plain", "feedback", None),
    ("approve (not really)", "plain", "feedback", None),
    ("no\u2014approve", "plain", "unclear", None),
    ("approve\n\nP.S. wait", "plain", "feedback", None),
    ("approve.\nActually hold on", "plain", "feedback", None),
    ("ok, I'll think about it", "plain", "feedback", None),
    ("nicht genehmigen", "plain", "feedback", None),
    ("pas d'accord", "plain", "feedback", None),
    ("approve\n\nAnna\nCancel culture department", "plain", "feedback", None),
    # red team: Unicode
    ("app\u200brove", "plain", "approve", None),
    ("approve\u00a0thanks", "plain", "approve", None),
    ("\u0430pprove", "plain", "feedback", None),
    ("\u202eevorppa", "plain", "feedback", None),
    ("\u202eapprove", "plain", "unclear", None),
    ("\uff41\uff50\uff50\uff52\uff4f\uff56\uff45", "plain", "feedback", None),
    ("yes\u0338", "plain", "unclear", None),
    ("a\u0336p\u0336p\u0336r\u0336o\u0336v\u0336e\u0336", "plain", "feedback", None),
    ("approve\u200e", "plain", "approve", None),  # a direction mark, as an RTL client adds
    ("ap\u00adprove", "plain", "approve", None),  # a soft hyphen shows nothing
    ("approve\U000e0020\U000e006e\U000e006f\U000e0074", "plain", "unclear", None),  # tag characters
    ("\u2067approve\u2069", "plain", "unclear", None),
    ("\U0001d41a\U0001d429\U0001d429\U0001d42b\U0001d428\U0001d42f\U0001d41e", "plain", "feedback", None),
    # red team: asked back needlessly before
    ("Approved.", "plain", "approve", None),
    ("Yes, go ahead.", "plain", "approve", None),
    ("approve\n\n-- \nJane", "plain", "approve", None),
    ("Ok thanks!", "plain", "approve", None),
    ("Approve, thank you very much!", "plain", "approve", None),
    # red team: an arguments block must mean one thing
    ('{"name": "a", "name": "b"}', "plain", "edit", None),
    ('```json\n{"name": "b", "x": {"k": 1, "k": 2}}\n```', "plain", "edit", None),
    ('{"name": 1e999}', "plain", "edit", None),
    ('{"name": "b", "n": -Infinity}', "plain", "edit", None),
    # interrupted calls
    ("retry", "plain", "retry", None),
    ("skip please", "plain", "skip", None),
    ("retry?", "plain", "unclear", None),
]


def _mail(body: str, shape: str) -> EmailMessage:
    msg = EmailMessage(policy=SMTP)
    msg["From"] = "Anna Meyer <me@pizzamail.localhost>"
    msg["To"], msg["Subject"] = "bot@pizzamail.localhost", "Re: Clean up my notes"
    if shape == "alternative":  # an HTML composer's plain part: the block flattened onto one line
        msg.set_content(" ".join(body.replace("<p>", " ").replace("</p>", " ").replace("<pre>", " ")
                                 .replace("</pre>", " ").split()))
        msg.add_alternative(body, subtype="html")
    else:
        msg.set_content(body, subtype="html" if shape == "html" else "plain")
    if shape == "flowed":
        msg.set_param("format", "flowed")
    return parse_bytes(msg.as_bytes())


def _check(decision: Decision, kind: str, expected: Any) -> None:
    assert decision.kind == kind, decision
    if kind == "edit":
        assert decision.arguments == expected
        assert bool(decision.error) == (expected is None)
    elif isinstance(expected, str):
        assert decision.note == expected
    if kind == "unclear":
        assert decision.error


@pytest.mark.parametrize(("typed", "shape", "kind", "expected"), ROWS,
                         ids=[f"{i}-{shape}-{kind}" for i, (_, shape, kind, _) in enumerate(ROWS)])
def test_a_real_world_reply_makes_its_decision(typed: str, shape: str, kind: str, expected: Any) -> None:
    _check(read_decision(_mail(typed, shape)), kind, expected)


def test_the_table_covers_every_shape_and_outcome() -> None:
    assert len(ROWS) >= 60
    assert {shape for _, shape, _, _ in ROWS} == {"plain", "flowed", "html", "alternative"}
    assert {kind for _, _, kind, _ in ROWS} >= {"approve", "approve_always", "deny", "edit", "feedback",
                                                 "unclear", "retry", "skip"}
