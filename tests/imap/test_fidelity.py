"""MIME fidelity: a varied corpus (and the sample Maildir) delivered, then fetched with imaplib —
BODY[] byte for byte, and every section's boundaries where the corpus says they are."""

from __future__ import annotations

import asyncio
import base64
import imaplib
from dataclasses import dataclass, field

from imaptools import sample_files

from pizzamail.imap import ImapServer
from pizzamail.mailbox import Mailbox

Part = tuple[bytes, bytes]  # (header fields, each ending in CRLF; body)


def multipart(boundary: bytes, parts: list[Part], preamble: bytes = b"", epilogue: bytes = b"") -> bytes:
    out = preamble
    for header, body in parts:
        out += b"--" + boundary + b"\r\n" + header + b"\r\n" + body + b"\r\n"
    return out + b"--" + boundary + b"--\r\n" + epilogue


@dataclass
class Case:
    """A message and the bytes some of its sections must be."""

    header: bytes
    body: bytes
    sections: dict[str, bytes] = field(default_factory=dict)

    @property
    def data(self) -> bytes:
        return self.header + b"\r\n" + self.body


TEXT = (b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n",
        "Grüße — the summary is ready.\r\nSecond line.".encode())
HTML = (b"Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n",
        b"<p>Gr=C3=BC=C3=9Fe =E2=80=94 the <b>summary</b> is ready.</p>")
PDF = (b'Content-Type: application/pdf; name="report.pdf"\r\nContent-Transfer-Encoding: base64\r\n'
       b'Content-Disposition: attachment; filename="report.pdf"\r\n',
       b"\r\n".join(base64.encodebytes(bytes(range(256)) * 8).splitlines()))
ALT = multipart(b"alt-1", [TEXT, HTML])
INNER_HEADER = (b"From: Alice <alice@acme.example>\r\nSubject: =?utf-8?q?Rechnung_f=C3=BCr_M=C3=A4rz?=\r\n"
                b"Message-ID: <inner@acme.example>\r\nMIME-Version: 1.0\r\n"
                b'Content-Type: multipart/alternative; boundary="alt-1"\r\n')
INNER = INNER_HEADER + b"\r\n" + ALT
LONG = b"x" * 5000


def corpus() -> list[Case]:
    base = (b"From: Pizzamail Bot <bot@pizzamail.localhost>\r\nTo: me@pizzamail.localhost\r\n"
            b"MIME-Version: 1.0\r\n")
    return [
        Case(base + b'Subject: alternative\r\nContent-Type: multipart/alternative; boundary="alt-1"\r\n', ALT,
             {"1": TEXT[1], "1.MIME": TEXT[0] + b"\r\n", "2": HTML[1], "2.MIME": HTML[0] + b"\r\n"}),
        Case(base + b'Subject: attachment\r\nContent-Type: multipart/mixed; boundary="mix"\r\n',
             multipart(b"mix", [(b'Content-Type: multipart/alternative; boundary="alt-1"\r\n', ALT), PDF],
                       preamble=b"This is a multi-part message in MIME format.\r\n",
                       epilogue=b"epilogue text\r\n"),
             {"1.1": TEXT[1], "1.2.MIME": HTML[0] + b"\r\n", "1": ALT, "2": PDF[1],
              "2.MIME": PDF[0] + b"\r\n"}),
        Case(base + b'Subject: Fwd: invoice\r\nContent-Type: multipart/mixed; boundary="fwd"\r\n',
             multipart(b"fwd", [(b"Content-Type: text/plain\r\n", b"See below."),
                                (b"Content-Type: message/rfc822\r\n", INNER)]),
             {"1": b"See below.", "2": INNER, "2.HEADER": INNER_HEADER + b"\r\n", "2.TEXT": ALT,
              "2.1": TEXT[1], "2.2": HTML[1], "2.2.MIME": HTML[0] + b"\r\n"}),
        Case(("From: =?utf-8?b?SsO8cmdlbg==?= <j@example.org>\r\nTo: me@pizzamail.localhost\r\n"
              "Subject: Übersetzung prüfen — 8-bit header\r\n"
              "X-Folded: one\r\n\ttwo\r\n three\r\n").encode(),
             "Körper in 8 Bit.\r\n".encode(), {"1": "Körper in 8 Bit.\r\n".encode()}),
        Case(base + b"Subject: long lines\r\nX-Long: " + LONG + b"\r\n", LONG + b"\r\nshort\r\n" + LONG,
             {"TEXT": LONG + b"\r\nshort\r\n" + LONG}),
        Case(b"Subject: no body at all\r\n", b"", {"TEXT": b"", "1": b""}),
    ]


def fetch_one(m: imaplib.IMAP4, uid: int, item: str) -> bytes:
    typ, data = m.uid("FETCH", str(uid), f"({item})")
    assert typ == "OK", (item, data)
    first = data[0]
    assert isinstance(first, tuple), (item, data)
    return first[1]


def _check(port: int, cases: list[tuple[int, Case | bytes]]) -> None:
    with imaplib.IMAP4("127.0.0.1", port) as m:
        m.login("me", "pw")
        m.select("INBOX", readonly=True)
        for uid, case in cases:
            data = case.data if isinstance(case, Case) else case
            assert fetch_one(m, uid, "BODY.PEEK[]") == data
            header, text = fetch_one(m, uid, "BODY.PEEK[HEADER]"), fetch_one(m, uid, "BODY.PEEK[TEXT]")
            assert header + text == data and header.endswith(b"\r\n\r\n")
            assert fetch_one(m, uid, "BODY.PEEK[]<7.100>") == data[7:107]
            _, sized = m.uid("FETCH", str(uid), "(RFC822.SIZE)")
            assert f"RFC822.SIZE {len(data)}".encode() in (sized[0] or b"")
            if isinstance(case, Case):
                for section, expected in case.sections.items():
                    assert fetch_one(m, uid, f"BODY.PEEK[{section}]") == expected, (uid, section)
        m.logout()


async def test_corpus_round_trips_byte_for_byte(server: ImapServer, mailbox: Mailbox) -> None:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    cases: list[tuple[int, Case | bytes]] = []
    for case in corpus():
        cases.append((await mailbox.deliver(inbox, case.data), case))
    for path in sample_files() + sample_files(".Action"):
        cases.append((await mailbox.deliver(inbox, path.read_bytes()), path.read_bytes()))
    await asyncio.to_thread(_check, server.port, cases)
