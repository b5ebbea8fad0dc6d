"""Pure rendering pieces: modified UTF-7, the byte-exact MIME tree, ENVELOPE and BODYSTRUCTURE,
including malformed input that must degrade rather than crash."""

from __future__ import annotations

import pytest
from imaptools import sample_files

from pizzamail.imap import mime, structure, wire
from pizzamail.imap.fetchparse import Section


@pytest.mark.parametrize(("name", "encoded"), [
    ("INBOX", b"INBOX"),
    ("Entwürfe", b"Entw&APw-rfe"),
    ("R&D", b"R&-D"),
    ("~peter/mail/台北/日本語", b"~peter/mail/&U,BTFw-/&ZeVnLIqe-"),
])
def test_modified_utf7_round_trip(name: str, encoded: bytes) -> None:
    assert wire.encode_mailbox(name) == encoded
    assert wire.decode_mailbox(encoded) == name


def test_strings_are_quoted_or_literal() -> None:
    assert wire.string(b'say "hi"\\') == b'"say \\"hi\\"\\\\"'
    assert wire.string("Jürgen".encode()) == b"{7}\r\nJ\xc3\xbcrgen"
    assert wire.astring(b"INBOX") == b"INBOX"
    assert wire.astring(b"My Folder") == b'"My Folder"'
    assert wire.date_time(1764000000) == b'"24-Nov-2025 16:00:00 +0000"'
    assert wire.date_time(1764979200) == b'" 6-Dec-2025 00:00:00 +0000"'


def test_sample_forward_structure_and_sections() -> None:
    data = sample_files()[3].read_bytes()
    root = mime.parse(data)
    assert structure.body_structure(root, extended=False) == (
        b'(("TEXT" "PLAIN" ("CHARSET" "us-ascii") NIL NIL "7BIT" 75 1)'
        b'("MESSAGE" "RFC822" NIL NIL NIL "7BIT" 307 ("Mon, 24 Nov 2025 18:12:00 -0500" "Invoice question" '
        b'(("Alice Customer" NIL "alice" "acme.example")) (("Alice Customer" NIL "alice" "acme.example")) '
        b'(("Alice Customer" NIL "alice" "acme.example")) (("Me" NIL "me" "pizzamail.localhost")) '
        b'NIL NIL NIL '
        b'"<inv-991@acme.example>") ("TEXT" "PLAIN" ("CHARSET" "us-ascii") NIL NIL "7BIT" 83 3) 10) "MIXED")'
    )
    inner = mime.section_bytes(data, Section((2,)))
    assert inner.startswith(b"From: Alice Customer") and inner.endswith(b"Alice")
    assert mime.section_bytes(data, Section((2,), "TEXT")).startswith(b"Hello, invoice 991")
    assert mime.section_bytes(data, Section((2, 1))).startswith(b"Hello, invoice 991")
    assert mime.section_bytes(data, Section((2,), "MIME")) == (
        b"Content-Type: message/rfc822\r\nContent-Disposition: inline\r\n\r\n")
    assert mime.section_bytes(data, Section((7,))) == b""
    assert mime.section_bytes(data, Section((1,), "HEADER")) == b""  # not a message part


def test_every_sample_renders_and_sizes_add_up() -> None:
    for path in sample_files():
        data = path.read_bytes()
        root = mime.parse(data)
        assert structure.body_structure(root, extended=True).startswith(b"(")
        assert structure.envelope(root.fields).startswith(b"(")
        assert root.header + root.body == data


def test_eight_bit_header_goes_out_as_literal() -> None:
    data = sample_files()[5].read_bytes()
    env = structure.envelope_of_header(mime.split_header(data)[0])
    assert b'"Wed, 26 Nov 2025 10:15:00 +0100" {40}\r\n\xc3\x9cbersetzung' in env
    assert b'(({15}\r\nJ\xc3\xbcrgen M\xc3\xbcller NIL "juergen" "example.org"))' in env


def test_header_field_selection_keeps_raw_lines() -> None:
    header = b"Subject: a\r\n folded\r\nX-A: 1\r\nsubject: second\r\n\r\n"
    assert mime.filter_header(header, (b"SUBJECT",), keep=True) == (
        b"Subject: a\r\n folded\r\nsubject: second\r\n\r\n")
    assert mime.filter_header(header, (b"Subject",), keep=False) == b"X-A: 1\r\n\r\n"
    assert mime.header_fields(header)[0] == (b"subject", b"a folded")


@pytest.mark.parametrize("data", [
    b"",
    b"no header at all",
    b"\r\nbody only\r\n",
    b"Content-Type: multipart/mixed\r\n\r\nno boundary\r\n",
    b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\nunterminated part',
    b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\n--b\r\n\r\nx\r\n--b--\r\n',
    b"Content-Type: message/rfc822\r\n\r\n",
    b"Content-Type: text/\xff\xfe; charset=\"\r\nFrom: <<<@@>>>, \"unterminated\r\nTo: ;;;\r\n\r\n",
    b"Content-Type: text/plain; name*=utf-8''%E2%82%AC.txt\r\n\r\neuro",
    b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
    + b'--b\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n' * 50,
])
def test_malformed_mime_never_crashes(data: bytes) -> None:
    root = mime.parse(data)
    structure.body_structure(root, extended=True)
    structure.body_structure(root, extended=False)
    structure.envelope(root.fields)
    for section in (Section(), Section((1,)), Section((1, 1), "MIME"), Section((), "TEXT")):
        mime.section_bytes(data, section)


def test_rfc2231_parameters_are_decoded() -> None:
    root = mime.parse(b"Content-Type: text/plain; name*=utf-8''%E2%82%AC.txt\r\n\r\neuro")
    assert root.params == [("name", "€.txt".encode())]


def test_sample_maildir_is_in_wire_form() -> None:
    files = sample_files() + sample_files(".Action")
    assert len(files) == 10
    for path in files:
        data = path.read_bytes()
        assert b"\n" not in data.replace(b"\r\n", b""), path.name
        assert data.endswith(b"\r\n")
