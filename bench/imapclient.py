"""The benchmarks' IMAP client: a minimal blocking one that reads whole responses, and the
listings it times (bench/imap.py)."""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import Iterator

USER, PASSWORD = "me", "pw"
#: the listing of (b) and (e): the fields the header cache holds since the start
HEADER_LISTING = (b"UID FETCH 1:* (UID FLAGS RFC822.SIZE INTERNALDATE "
                  b"BODY.PEEK[HEADER.FIELDS (FROM TO SUBJECT DATE MESSAGE-ID)])")
#: Thunderbird's own, on opening a folder (nsImapProtocol: IMAP_ENV_AND_DB_HEADERS)
#: a server-side search of a header field, as a phone or webmail sends when the user searches
SEARCH_FROM = b'UID SEARCH FROM "bot"'
THUNDERBIRD_LISTING = (b"UID FETCH 1:* (UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS (From To Cc Bcc"
                       b" Subject Date Message-ID Priority X-Priority References Newsgroups In-Reply-To"
                       b" Content-Type Reply-To)])")

_LITERAL = re.compile(rb"\{(\d+)\}\r\n$")


class Imap:
    """A minimal blocking IMAP client that reads whole responses, literals included."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=600)
        self.file = self.sock.makefile("rb")
        self.tags = 0
        self.read_line()  # greeting

    def read_line(self) -> bytes:
        line = self.file.readline()
        if not line:
            raise ConnectionError("server closed the connection")
        return line

    def response(self) -> bytes:
        """One response, its literals and continuation lines included."""
        parts = [self.read_line()]
        while m := _LITERAL.search(parts[-1]):
            parts.append(self.file.read(int(m.group(1))))
            parts.append(self.read_line())
        return b"".join(parts)

    def send(self, data: bytes) -> bytes:
        self.tags += 1
        tag = b"T%d" % self.tags
        self.sock.sendall(tag + b" " + data + b"\r\n")
        return tag

    def command(self, data: bytes) -> list[bytes]:
        """Send a command; its untagged responses. Raises unless it ends in OK."""
        tag = self.send(data)
        untagged: list[bytes] = []
        while True:
            resp = self.response()
            if resp.startswith(tag + b" "):
                if not resp.startswith(tag + b" OK"):
                    raise RuntimeError(f"{data[:60]!r} -> {resp!r}")
                return untagged
            untagged.append(resp)

    def login(self) -> Imap:
        self.command(f"LOGIN {USER} {PASSWORD}".encode())
        return self

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, ConnectionError):
            self.command(b"LOGOUT")
        self.file.close()
        self.sock.close()


@contextlib.contextmanager
def client(port: int) -> Iterator[Imap]:
    c = Imap(port).login()
    try:
        yield c
    finally:
        c.close()


def timed(fn: object, *args: object) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn(*args)  # type: ignore[operator]
    return time.perf_counter() - started, result


def select_inbox(c: Imap) -> int:
    untagged = c.command(b"SELECT INBOX")
    exists = [int(r.split()[1]) for r in untagged if r.rstrip().endswith(b"EXISTS")]
    return exists[0]


def header_listing(c: Imap) -> int:
    return sum(1 for r in c.command(HEADER_LISTING) if b" FETCH " in r[:20])



def thunderbird_listing(c: Imap) -> int:
    return sum(1 for r in c.command(THUNDERBIRD_LISTING) if b" FETCH " in r[:20])


def search_from(c: Imap) -> int:
    [found] = [r for r in c.command(SEARCH_FROM) if r.startswith(b"* SEARCH")]
    return len(found.split()) - 2
