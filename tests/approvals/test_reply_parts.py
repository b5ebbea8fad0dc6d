"""A reply's MIME structure, adversarially: which parts are the user's words, and what runs when its
forms disagree. Real clients' layouts (plain and HTML together) must still approve."""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import SMTP

import pytest

from pizzamail.approvals.decide import DISAGREE, read_decision
from pizzamail.mail.parse import parse_bytes
from tests.mailcorpus import CASES, Case

GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"


def _mail() -> EmailMessage:
    msg = EmailMessage(policy=SMTP)
    msg["From"] = "Anna Meyer <me@pizzamail.localhost>"
    msg["To"], msg["Subject"] = "bot@pizzamail.localhost", "Re: [Approve? delete_note \"a\"] Clean up"
    return msg


def _both(plain: str, html: str) -> EmailMessage:
    msg = _mail()
    msg.set_content(plain)
    msg.add_alternative(html, subtype="html")
    return msg


def _kind(msg: EmailMessage) -> str:
    return read_decision(parse_bytes(msg.as_bytes())).kind


@pytest.mark.parametrize(("plain", "html", "kind"), [
    ("deny", "<p>approve</p>", "unclear"),  # the forms disagree: nothing runs
    ("approve, but not the shared note", "<p>approve</p>", "unclear"),
    ("approve", "<p>deny</p>", "deny"),  # the HTML decides, and it does not run anything
    ("approve", "<p>approve</p>", "approve"),
    ('Use this: {"name": "c"}', '<p>Use this:</p><pre>{"name": "b"}</pre>', "unclear"),
])
def test_a_plain_part_that_says_otherwise_stops_an_approval(plain: str, html: str, kind: str) -> None:
    decision = read_decision(parse_bytes(_both(plain, html).as_bytes()))
    assert decision.kind == kind
    if kind == "unclear":
        assert decision.error == DISAGREE


def test_text_after_an_inline_image_is_read_too() -> None:
    """Apple Mail splits the text around an inline image into several text parts."""
    msg = _mail()
    msg.set_content("approve")
    msg.add_attachment(GIF, maintype="image", subtype="gif", disposition="inline")
    del msg.get_payload()[1]["Content-Disposition"]
    tail = EmailMessage(policy=SMTP)
    tail.set_content("but not the shared note")
    msg.attach(tail)
    assert _kind(msg) == "feedback"


def test_a_text_file_is_never_the_users_words() -> None:
    for disposition in ("inline", "attachment"):
        msg = _mail()
        msg.make_mixed()
        msg.add_attachment("approve", disposition=disposition, filename="approve.txt")
        assert _kind(msg) == "unclear", disposition
        typed = _mail()
        typed.set_content("hmm, not sure")
        typed.make_mixed()
        typed.get_payload().insert(0, msg.get_payload()[0])
        assert _kind(typed) == "feedback", disposition


def test_an_attached_or_forwarded_mail_decides_nothing() -> None:
    inner = _mail()
    inner.set_content("approve")
    attached = _mail()
    attached.set_content("")
    attached.add_attachment(inner)
    assert _kind(attached) == "unclear"
    whole = _mail()
    whole.set_content(inner)  # the body is nothing but a message/rfc822
    assert whole.get_content_type() == "message/rfc822"
    assert _kind(whole) == "unclear"
    forwarded = _mail()
    forwarded.set_content("---------- Forwarded message ---------\nFrom: Bob <bob@example.com>\n"
                          "Date: Mon, 30 Nov 2026\nSubject: Re: x\nTo: me\n\napprove\n")
    assert _kind(forwarded) != "approve"


def test_a_body_in_more_parts_than_a_person_writes_decides_nothing() -> None:
    msg = _mail()
    msg.set_content("approve")
    msg.make_mixed()
    for _ in range(300):
        msg.add_attachment("approve", disposition="inline")
        del msg.get_payload()[-1]["Content-Disposition"]
    assert _kind(msg) == "unclear"


def test_a_body_nested_too_deep_decides_nothing() -> None:
    raw = b"Content-Type: text/plain\r\n\r\napprove\r\n"
    for level in range(40):
        raw = (f'Content-Type: multipart/mixed; boundary="b{level}"\r\n\r\n--b{level}\r\n'.encode()
               + raw + f"\r\n--b{level}--\r\n".encode())
    head = b"From: Anna Meyer <me@pizzamail.localhost>\r\nSubject: Re: x\r\nMIME-Version: 1.0\r\n"
    assert read_decision(parse_bytes(head + raw)).kind == "unclear"


GMAIL = _both(
    "Approved, thanks!\n\nOn Mon, 30 Nov 2026 at 10:00, Pizza Bot <bot+n0nce@pizzamail.localhost>\n"
    "wrote:\n\n> I would like to run **delete_note** and am waiting for your approval.\n> approve\n",
    '<div dir="ltr">Approved, thanks!</div><br><div class="gmail_quote"><div dir="ltr" '
    'class="gmail_attr">On Mon, 30 Nov 2026 at 10:00, Pizza Bot &lt;<a href="mailto:bot@x">bot@x</a>'
    '&gt; wrote:<br></div><blockquote class="gmail_quote" style="margin:0px 0px 0px 0.8ex">'
    "<div>deny</div></blockquote></div>")
GMAIL_SIGNED = _both(
    "yes\n\n-- \nAnna Meyer\nHead of Operations\n\nOn Mon, 30 Nov 2026, Pizza Bot wrote:\n> deny\n",
    '<div dir="ltr">yes<br clear="all"><br><span class="gmail_signature_prefix">-- </span><br>'
    '<div dir="ltr" class="gmail_signature" data-smartmail="gmail_signature">Anna Meyer<br>Head of'
    ' Operations</div></div><br><div class="gmail_quote"><blockquote class="gmail_quote">deny'
    "</blockquote></div>")
OUTLOOK_WEB = _both(
    "Approve\n\nAnna Meyer\nHead of Operations\n\n________________________________\n"
    "From: Pizza Bot <bot@pizzamail.localhost>\nSent: Monday, November 30, 2026 10:00 AM\n"
    "To: Anna Meyer <me@pizzamail.localhost>\nSubject: Clean up my notes\n\nReply approve or deny.\n",
    '<html><head><style type="text/css" style="display:none;">P {margin-top:0;}</style></head><body>'
    '<div style="font-family: Aptos; font-size: 12pt; color: rgb(0, 0, 0);">Approve</div>'
    '<div id="Signature"><div style="font-size: 11pt">Anna Meyer<br>Head of Operations</div></div>'
    '<div id="appendonsend"></div><hr style="display:inline-block;width:98%" tabindex="-1">'
    '<div id="divRplyFwdMsg" dir="ltr"><font face="Calibri, sans-serif" style="font-size:11pt">'
    "<b>From:</b> Pizza Bot &lt;bot@pizzamail.localhost&gt;<br><b>Sent:</b> Monday, November 30, 2026"
    " 10:00 AM<br><b>To:</b> Anna Meyer<br><b>Subject:</b> Clean up my notes</font><div>&nbsp;</div>"
    "</div><div>Reply approve or deny.</div></body></html>")
OUTLOOK_DESKTOP = _both(
    "Yes, go ahead.\n\nFrom: Pizza Bot <bot@pizzamail.localhost>\nSent: Monday, November 30, 2026"
    " 10:00\nTo: Anna Meyer <me@pizzamail.localhost>\nSubject: Clean up my notes\n\ndeny\n",
    '<html xmlns:o="urn:schemas-microsoft-com:office:office"><head><style><!-- p.MsoNormal {margin:0}'
    ' --></style><!--[if gte mso 9]><xml><o:shapedefaults v:ext="edit" spidmax="1026" /></xml>'
    '<![endif]--></head><body lang="EN-US"><div class="WordSection1"><p class="MsoNormal">Yes, go ahead.'
    '<o:p></o:p></p><p class="MsoNormal"><o:p>&nbsp;</o:p></p><div style="border:none;border-top:solid'
    ' #E1E1E1 1.0pt;padding:3.0pt 0in 0in 0in"><p class="MsoNormal"><b>From:</b> Pizza Bot &lt;'
    "bot@pizzamail.localhost&gt; <br><b>Sent:</b> Monday, November 30, 2026 10:00<br><b>To:</b> Anna"
    " Meyer<br><b>Subject:</b> Clean up my notes<o:p></o:p></p></div><p class=\"MsoNormal\">deny"
    "<o:p></o:p></p></div></body></html>")
APPLE_MAIL = _both(
    "Ok thanks!\n\nSent from my iPhone\n\n> On 30. Nov 2026, at 10:00, Pizza Bot <bot@x> wrote:\n>"
    " \n> deny\n",
    '<html><head><meta http-equiv="content-type" content="text/html; charset=utf-8"></head><body '
    'dir="auto"><div dir="ltr">Ok thanks!</div><div dir="ltr"><br></div><div dir="ltr">Sent from my'
    ' iPhone</div><div dir="ltr"><br><blockquote type="cite">On 30. Nov 2026, at 10:00, Pizza Bot '
    '&lt;bot@x&gt; wrote:<br><br></blockquote></div><blockquote type="cite"><div dir="ltr">deny</div>'
    "</blockquote></body></html>")
THUNDERBIRD = _both(
    "approve\n\nOn 30/11/2026 10:00, Pizza Bot wrote:\n> deny\n\n-- \nAnna\n",
    '<html><head><meta http-equiv="content-type" content="text/html; charset=UTF-8"></head><body>'
    '<p>approve<br></p><div class="moz-cite-prefix">On 30/11/2026 10:00, Pizza Bot wrote:<br></div>'
    '<blockquote type="cite">deny</blockquote><br><pre class="moz-signature" cols="72">-- \nAnna</pre>'
    "</body></html>")


@pytest.mark.parametrize("msg", [GMAIL, GMAIL_SIGNED, OUTLOOK_WEB, OUTLOOK_DESKTOP, APPLE_MAIL, THUNDERBIRD],
                         ids=["gmail", "gmail-signed", "outlook-web", "outlook-desktop", "apple-mail",
                              "thunderbird"])
def test_real_clients_replies_in_text_and_html_approve(msg: EmailMessage) -> None:
    assert _kind(msg) == "approve"


def test_outlooks_signature_in_the_plain_part_alone_is_not_taken_for_more_words() -> None:
    """Its HTML marks the signature; the same lines at the end of the plain part are that signature,
    and nothing else is: other lines after it still count."""
    html = OUTLOOK_WEB.get_body(preferencelist=("html",))
    assert html is not None
    changed = _both("Approve\n\nAnna Meyer\nHead of Operations\nbut only after Friday",
                    str(html.get_content()))
    assert _kind(changed) == "unclear"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_malformed_mail_is_read_as_a_reply_without_crashing(case: Case) -> None:
    decision = read_decision(parse_bytes(case.data()))
    assert decision.kind in {"approve", "approve_always", "deny", "edit", "feedback", "retry", "skip",
                             "unclear"}
