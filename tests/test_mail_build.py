"""``plain_bytes``: the bytes of ``build_mail(...).as_bytes()``, written out without the email package;
``alternative_bytes``: a reply's text and HTML, read back as the email package's mail says them; the
boundaries of the multipart mails pizzamail writes."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from email.generator import BytesGenerator
from email.utils import formataddr
from pathlib import Path
from typing import Any

import pytest

from pizzamail.composer import Composer, MailContext
from pizzamail.config import Config
from pizzamail.mail import build
from pizzamail.mail.build import alternative_bytes, build_mail, plain_bytes, text_message
from pizzamail.mail.parse import parse_bytes

WORDS = ["Task", "c3-117", "—", "step", "1,", "web__fetch", "Grüße", "a\"quoted\"", "(paren)", "x;y", "über",
         "[working]", "re:", "=?utf-8?q?x?=", "tab\there", "", "long" * 12, "日本", "#42", "a@b.c", "<x>"]
NAMES = ["pizzamail", "Bot, Inc.", "Zoë", "J. R. Bot", "", "a\"b", "Team Bot", "x" * 70]
ADDRESSES = ["bot@pizzamail.localhost", "me@example.org", "a.b+c@sub.example.co.uk"]


def text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 6)):
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14)))
        lines.append(line[: rng.choice([10, 78, 79, 200])])
    return rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n", "\n\n"])


def mail(rng: random.Random) -> dict[str, Any]:
    refs = [f"{rng.randint(1, 10**9)}.{rng.choice(['x', 'status.1.done'])}@pizzamail.localhost"
            for _ in range(rng.randint(0, 6))]
    zone = timezone(timedelta(hours=rng.randint(-12, 12)))
    return {
        "sender": formataddr((rng.choice(NAMES), rng.choice(ADDRESSES))),
        "to": rng.choice([*ADDRESSES, formataddr((rng.choice(NAMES), ADDRESSES[0]))]),
        "subject": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))),
        "text": text(rng),
        "message_id": f"{rng.choice(['status.17.running.d51d46a540e9', 'a' * 80])}@pizzamail.localhost",
        "in_reply_to": refs[-1] if refs else None,
        "references": refs,
        "date": datetime(2026, 12, 2, 9, 0, tzinfo=UTC).astimezone(zone),
        "headers": [("X-Pizzamail-Thread", str(rng.randint(1, 10**6))), ("X-Pizzamail-Kind", "status"),
                    *([("X-Note", " ".join(rng.choice(WORDS) for _ in range(5)))] if rng.random() < 0.3
                      else [])],
    }


@pytest.mark.parametrize("seed", range(4))
def test_the_bytes_are_those_the_email_package_writes(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(250):
        fields = mail(rng)
        assert plain_bytes(**fields) == build_mail(**fields).as_bytes(), fields


def html(rng: random.Random) -> str:
    body = text(rng).replace("\n", "</p>\n<p>")
    cjk = "日本語のテキスト。" * rng.randint(1, 40)
    return rng.choice([f'<p style="color: #888;">{body}</p>\n', cjk, ""])


@pytest.mark.parametrize("seed", range(4))
def test_a_text_and_its_html_read_back_as_the_email_package_writes_them(seed: int) -> None:
    """Every header, the text and the HTML read the same from ``alternative_bytes`` as from the
    email package's mail; every line is 7-bit and ends in CRLF, and the body's are at most 78
    characters, so any server carries the mail as it is."""
    rng = random.Random(seed)
    encodings = set()
    for _ in range(250):
        fields, markup = mail(rng), html(rng)
        written = alternative_bytes(**fields, html=markup)
        theirs = text_message(**fields)
        theirs.add_alternative(markup, subtype="html")
        read, expected = parse_bytes(written), parse_bytes(build.mail_bytes(theirs))
        assert [(k, str(v)) for k, v in read.items() if k != "Content-Type"] == [
            (k, str(v)) for k, v in expected.items() if k != "Content-Type"], fields
        assert [p.get_content_type() for p in read.walk()] == [
            "multipart/alternative", "text/plain", "text/html"]
        for kind in ("plain", "html"):
            ours, package = read.get_body((kind,)), expected.get_body((kind,))
            assert ours is not None and package is not None
            assert ours.get_content() == package.get_content(), (fields, markup)
            encodings.add(ours["Content-Transfer-Encoding"])
        head, _, body = written.partition(b"\r\n\r\n")
        lines = body.split(b"\r\n")
        assert lines[-1] == b"" and all(len(line) <= 78 and line.isascii() for line in lines)
        assert all(len(line) <= 998 and line.isascii() for line in head.split(b"\r\n"))
        assert b"\r" not in written.replace(b"\r\n", b"") and b"\n" not in written.replace(b"\r\n", b"")
    assert encodings == {"7bit", "quoted-printable", "base64"}


def test_plain_text_and_plain_headers_skip_the_email_package(monkeypatch: pytest.MonkeyPatch) -> None:
    fields: dict[str, Any] = {
        "sender": "pizzamail <bot@pizzamail.localhost>", "to": "me@pizzamail.localhost",
        "subject": "[done] Task 1, web__fetch",
        "text": "Done.\n\nstarted 09:00\n", "message_id": "status.1.done.0123456789ab@pizzamail.localhost",
        "in_reply_to": "1.x@pizzamail.localhost", "references": ["1.x@pizzamail.localhost"],
        "date": datetime(2026, 12, 2, 9, 0, tzinfo=UTC), "headers": [("X-Pizzamail-Run", "1")]}
    expected = build_mail(**fields).as_bytes()

    def refused(*args: object, **kwargs: object) -> object:
        raise AssertionError("the email package was used")

    class Refusing:
        max_line_length = 78
        fold_binary = header_store_parse = staticmethod(refused)

    monkeypatch.setattr(build, "build_mail", refused)
    monkeypatch.setattr(build, "_POLICY", Refusing())
    assert plain_bytes(**fields) == expected


def test_a_reply_without_files_skips_the_email_package(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> object:
        raise AssertionError("the email package was used")

    monkeypatch.setattr("pizzamail.composer.text_message", refused)
    ctx = MailContext(thread_id=1, run_id=2, subject="Plan", in_reply_to="t@x")
    read = parse_bytes(Composer(config=Config()).reply(ctx, "**Done** · 100 %").as_bytes())
    assert read.get_body(("plain",)).get_content().splitlines()[0] == "**Done** · 100 %"  # type: ignore[union-attr]
    assert "<strong>Done</strong> · 100 %" in read.get_body(("html",)).get_content()  # type: ignore[union-attr]


def test_multiparts_get_a_random_boundary_not_one_searched_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A reply with an attachment (multipart/mixed around multipart/alternative) is written with
    boundaries of its own: the email package's search for one (a new regular expression a mail)
    is never made, each mail's are new, and the parts read back as written."""

    def searched(*args: object, **kwargs: object) -> str:
        raise AssertionError("the email package searched for a boundary")

    monkeypatch.setattr(BytesGenerator, "_make_boundary", classmethod(searched))
    (tmp_path / "notes.txt").write_text("--=_ a line that looks like a delimiter\n")
    ctx = MailContext(thread_id=1, run_id=2, subject="Plan", in_reply_to="t@x")
    written = [Composer(config=Config()).reply(ctx, "**Done**", files=[tmp_path / "notes.txt"]).as_bytes()
               for _ in range(2)]
    read = [parse_bytes(raw) for raw in written]
    boundaries = [part.get_boundary() for msg in read for part in msg.walk() if part.is_multipart()]
    assert [p.get_content_type() for p in read[0].walk()] == [
        "multipart/mixed", "multipart/alternative", "text/plain", "text/html", "text/plain"]
    assert len(set(boundaries)) == 4 and all(b and b.startswith("=_") for b in boundaries)
    attached = next(read[0].iter_attachments())
    assert attached.get_content().splitlines() == ["--=_ a line that looks like a delimiter"]
