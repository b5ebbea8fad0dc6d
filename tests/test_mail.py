"""The mail leaf: one parse, HTML as text, Message-IDs, the builder."""

from __future__ import annotations

import email.headerregistry
import email.utils
import uuid

import pytest

from pizzamail.mail.build import AttachedFile, build_mail
from pizzamail.mail.ids import bare, bracketed, new_message_id
from pizzamail.mail.parse import parse_bytes, parse_mail


def test_html_body_reads_as_text_without_styles_scripts_or_entities() -> None:
    parsed = parse_mail(b"Content-Type: text/html\r\n\r\n<html><head><style>p {color: red}</style>"
                        b"</head><body><p>Fish &amp; chips</p><script>alert(1)</script><p>for two</p>"
                        b"</body></html>\r\n")
    assert parsed.body == "Fish & chips\n\nfor two"


def test_message_ids_are_kept_bare_and_bracketed_in_headers() -> None:
    mid = new_message_id("pizzamail.localhost")
    assert mid.endswith("@pizzamail.localhost") and "<" not in mid
    assert (bracketed(mid), bare(f"<{mid}>"), bare(mid)) == (f"<{mid}>", mid, mid)


def test_built_mail_parses_back_to_what_it_was_built_from() -> None:
    built = build_mail(sender="bot@x", to="me@x", subject="Nightly", text="the report\n", message_id="t1@x",
                       in_reply_to="p@x", references=["r@x", "p@x"], headers=(("X-Pizzamail-Source", "cli"),),
                       attachments=(AttachedFile(filename="a.csv", content_type="text/csv", data=b"1,2\n"),))
    msg = parse_bytes(built.as_bytes())
    parsed = parse_mail(built.as_bytes())
    assert (parsed.message_id, parsed.in_reply_to, parsed.references) == ("t1@x", "p@x", ["r@x", "p@x"])
    assert (parsed.subject, parsed.body, parsed.attachments) == ("Nightly", "the report", ["a.csv"])
    assert msg["X-Pizzamail-Source"] == "cli"


def test_one_parse_carries_the_shown_headers_and_the_attached_files() -> None:
    inner = build_mail(sender="ann@y", to="me@x", subject="Invoice", text="attached", message_id="i@y")
    outer = build_mail(sender="me@x", to="bot@x", subject="Fwd: Invoice", text="see below", message_id="o@x",
                       headers=(("Cc", "Bob <bob@x>"),),
                       attachments=(AttachedFile(filename="fwd.eml", content_type="message/rfc822",
                                                 data=inner.as_bytes()),
                                    AttachedFile(filename="n.bin", content_type="application/pdf",
                                                 data=b"%PDF")))
    parsed = parse_mail(outer.as_bytes())
    shown = (parsed.header("cc"), parsed.header("To"), parsed.header("X-Other"))
    assert shown == ("Bob <bob@x>", "bot@x", "")
    [mail, pdf] = parsed.files
    assert (pdf.filename, pdf.content_type, pdf.data) == ("n.bin", "application/pdf", b"%PDF")
    assert parse_mail(mail.data).subject == "Invoice" and parsed.attachments == ["fwd.eml", "n.bin"]


def test_a_parts_type_follows_its_content_type_header_when_it_changes() -> None:
    """The type is kept between reads (the modern policy re-parses the header at each): a changed
    header, or a changed default type, is read afresh."""
    msg = parse_bytes(b"Subject: x\r\nContent-Type: text/plain\r\n\r\nhi\r\n")
    assert msg.get_content_type() == "text/plain"
    msg.replace_header("Content-Type", "text/html")
    assert msg.get_content_type() == "text/html"
    del msg["Content-Type"]
    assert msg.get_content_type() == "text/plain"
    msg.set_default_type("message/rfc822")
    assert msg.get_content_type() == "message/rfc822"


def test_a_header_value_is_parsed_once_however_often_and_in_however_many_mails_it_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The modern policy parses a header at every read; a part's Content-Type alone is read about
    ten times a mail. The same short value (the owner's From, the agent's To, the usual
    Content-Type) is parsed once, and read back as the stdlib gives it."""
    parse = email.headerregistry.ContentTypeHeader.parse
    parsed: list[str] = []

    def counted(cls: type, value: str, kwds: dict[str, object]) -> None:
        parsed.append(value)
        parse.__func__(cls, value, kwds)  # type: ignore[attr-defined]

    monkeypatch.setattr(email.headerregistry.ContentTypeHeader, "parse", classmethod(counted))
    kind = f'text/plain; charset="utf-8"; x-mark="{uuid.uuid4().hex}"'
    raw = f"From: Me <me@x>\r\nTo: bot@x\r\nSubject: s\r\nContent-Type: {kind}\r\n\r\nhi\r\n".encode()
    first, again = parse_bytes(raw), parse_mail(raw)
    assert (first.get_content_type(), first.get_content_charset(), first.get_content().strip()) == (
        "text/plain", "utf-8", "hi")
    assert (again.body, again.sender, again.header("To")) == ("hi", "me@x", "bot@x")
    assert parsed == [kind]
    assert first["content-type"].params["x-mark"] == kind.rsplit('"', 2)[1]


def test_a_long_header_value_is_parsed_at_each_read_as_before() -> None:
    subject = "word " * 200
    assert parse_mail(f"Subject: {subject}\r\n\r\nhi\r\n".encode()).subject == subject.strip()


def test_a_plain_subject_is_read_unparsed_and_a_users_from_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A small task's parse was mostly the stdlib reading headers: an unstructured header without
    encoded words is its own text (the modern policy gives it back unchanged), and the same From
    in mail after mail is read by the address grammar once."""
    subjects, addresses = [], []
    parse, parseaddr = email.headerregistry.UnstructuredHeader.parse, email.utils.parseaddr

    def counted(cls: type, value: str, kwds: dict[str, object]) -> None:
        subjects.append(value)
        parse.__func__(cls, value, kwds)  # type: ignore[attr-defined]

    def counted_address(value: str) -> tuple[str, str]:
        addresses.append(value)
        return parseaddr(value)

    monkeypatch.setattr(email.headerregistry.UnstructuredHeader, "parse", classmethod(counted))
    monkeypatch.setattr(email.utils, "parseaddr", counted_address)
    sender, task = f"{uuid.uuid4().hex}@x", f"task {uuid.uuid4().hex}"
    read = [parse_mail(f"From: {sender}\r\nSubject: {subject}\r\n\r\nhi\r\n".encode())
            for subject in (task, "  a\t(b) \"c\"  ", "=?utf-8?q?caf=C3=A9?= au lait")]
    assert [(p.subject, p.sender) for p in read] == [
        (task, sender), ('a (b) "c"', sender), ("café au lait", sender)]
    assert subjects == ["=?utf-8?q?caf=C3=A9?= au lait"] and addresses == [sender]
