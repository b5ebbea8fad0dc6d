"""IMAP command parsing: one framed command's bytes -> a typed :class:`Command`. Pure, no I/O.

Framing (deciding where a command ends) is separate: the connection reads a line, asks
:func:`literal_at_end` whether it announces a literal, sends ``+`` for a synchronising one, reads
the literal, and repeats; the assembled bytes come here. Syntax errors raise
``ImapError(bad=True)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pizzamail.errors import ImapError
from pizzamail.imap.fetchparse import FetchAtt, fetch_atts
from pizzamail.imap.reader import Reader, SequenceSet
from pizzamail.imap.searchkeys import SearchKey, search_program

_LITERAL_AT_END = re.compile(rb"\{(\d{1,20})(\+?)\}\r?\n\Z")
_TAG = re.compile(rb"[\x21-\x7e]+")


def literal_at_end(line: bytes) -> tuple[int, bool] | None:
    """``(size, synchronising)`` when ``line`` (CRLF included) ends by announcing a literal."""
    m = _LITERAL_AT_END.search(line)
    if m is None:
        return None
    return int(m.group(1)), m.group(2) != b"+"


def peek_tag(data: bytes) -> bytes | None:
    """The tag of a (possibly malformed) command, so even a BAD answer can be tagged."""
    m = _TAG.match(data)
    if m is None or any(c in m.group() for c in b'(){%*"\\+'):
        return None
    return m.group()


# -- argument shapes -------------------------------------------------------------------------


@dataclass(frozen=True)
class NoArgs:
    pass


@dataclass(frozen=True)
class Login:
    user: bytes
    password: bytes


@dataclass(frozen=True)
class Authenticate:
    mechanism: str
    initial: bytes | None


@dataclass(frozen=True)
class MailboxName:
    name: str


@dataclass(frozen=True)
class Rename:
    old: str
    new: str


@dataclass(frozen=True)
class ListArgs:
    reference: str
    pattern: str
    special_use_only: bool = False


@dataclass(frozen=True)
class Status:
    mailbox: str
    items: tuple[str, ...]


@dataclass(frozen=True)
class Append:
    mailbox: str
    flags: tuple[str, ...]
    date: int | None
    message: bytes


@dataclass(frozen=True)
class Fetch:
    messages: SequenceSet
    atts: tuple[FetchAtt, ...]


@dataclass(frozen=True)
class Store:
    messages: SequenceSet
    mode: str  # "" replace, "+" add, "-" remove
    silent: bool
    flags: tuple[str, ...]


@dataclass(frozen=True)
class Search:
    key: SearchKey


@dataclass(frozen=True)
class Copy:
    messages: SequenceSet
    mailbox: str


@dataclass(frozen=True)
class Messages:
    messages: SequenceSet


@dataclass(frozen=True)
class Words:
    """ID parameters or ENABLE capability names, as plain words."""

    words: tuple[bytes | None, ...]


Args = (NoArgs | Login | Authenticate | MailboxName | Rename | ListArgs | Status | Append | Fetch
        | Store | Search | Copy | Messages | Words)
A = TypeVar("A", bound=Args)


@dataclass(frozen=True)
class Command:
    tag: bytes
    name: str  # upper case; UID commands are "UID FETCH", "UID STORE" …
    args: Args

    @property
    def uid(self) -> bool:
        return self.name.startswith("UID ")

    def arg(self, kind: type[A]) -> A:
        assert isinstance(self.args, kind), (self.name, self.args)
        return self.args


# -- per-command argument parsers ------------------------------------------------------------


def _none(r: Reader) -> NoArgs:
    return NoArgs()


def _login(r: Reader) -> Login:
    r.sp()
    user = r.astring()
    r.sp()
    return Login(user, r.astring())


def _authenticate(r: Reader) -> Authenticate:
    r.sp()
    mechanism = r.atom().decode("ascii").upper()
    initial = None
    if r.take(b" "):
        initial = b"" if r.take(b"=") else r.atom("a base64 initial response")
    return Authenticate(mechanism, initial)


def _mailbox(r: Reader) -> MailboxName:
    r.sp()
    name = r.mailbox()
    if r.take(b" ("):  # SELECT parameters (CONDSTORE …): none supported, so none accepted
        raise r.fail("SELECT parameters are not supported")
    return MailboxName(name)


def _rename(r: Reader) -> Rename:
    r.sp()
    old = r.mailbox()
    r.sp()
    return Rename(old, r.mailbox())


def _list(r: Reader) -> ListArgs:
    r.sp()
    special = False
    if r.take(b"("):  # LIST-EXTENDED selection options: SPECIAL-USE is honoured, others ignored
        words = _words_until_paren(r)
        special = b"SPECIAL-USE" in words
        r.sp()
    reference = r.list_mailbox()
    r.sp()
    pattern = r.list_mailbox()
    if r.take(b" RETURN ("):  # return options: the attributes we print are always returned
        _words_until_paren(r)
    return ListArgs(reference, pattern, special)


def _words_until_paren(r: Reader) -> list[bytes]:
    words: list[bytes] = []
    while not r.take(b")"):
        if words:
            r.sp()
        words.append(r.atom().upper())
    return words


def _status(r: Reader) -> Status:
    r.sp()
    mailbox = r.mailbox()
    r.sp()
    r.expect(b"(")
    items = tuple(w.decode("ascii") for w in _words_until_paren(r))
    allowed = {"MESSAGES", "RECENT", "UIDNEXT", "UIDVALIDITY", "UNSEEN"}
    if not items or not set(items) <= allowed:
        raise r.fail("STATUS items are MESSAGES RECENT UIDNEXT UIDVALIDITY UNSEEN")
    return Status(mailbox, items)


def _append(r: Reader) -> Append:
    r.sp()
    mailbox = r.mailbox()
    r.sp()
    flags: tuple[str, ...] = ()
    if r.peek() == b"(":
        flags = r.flags()
        r.sp()
    stamp = None
    if r.peek() == b'"':
        stamp = r.date_time()
        r.sp()
    if r.peek() != b"{":
        raise r.fail("APPEND needs the message as a literal")
    return Append(mailbox, flags, stamp, r.literal())


def _fetch(r: Reader) -> Fetch:
    r.sp()
    messages = r.sequence_set()
    r.sp()
    return Fetch(messages, fetch_atts(r))


def _store(r: Reader) -> Store:
    r.sp()
    messages = r.sequence_set()
    r.sp()
    mode = "+" if r.take(b"+") else "-" if r.take(b"-") else ""
    if not r.take(b"FLAGS"):
        raise r.fail("STORE supports FLAGS, +FLAGS and -FLAGS")
    silent = r.take(b".SILENT")
    r.sp()
    return Store(messages, mode, silent, r.flags())


def _search(r: Reader) -> Search:
    r.sp()
    return Search(search_program(r))


def _copy(r: Reader) -> Copy:
    r.sp()
    messages = r.sequence_set()
    r.sp()
    return Copy(messages, r.mailbox())


def _messages(r: Reader) -> Messages:
    r.sp()
    return Messages(r.sequence_set())


def _id(r: Reader) -> Words:
    r.sp()
    if r.take(b"NIL"):
        return Words(())
    r.expect(b"(")
    words: list[bytes | None] = []
    while not r.take(b")"):
        if words:
            r.sp()
        words.append(None if r.take(b"NIL") else r.string())
    return Words(tuple(words))


def _enable(r: Reader) -> Words:
    words: list[bytes | None] = []
    while r.take(b" "):
        words.append(r.atom().upper())
    if not words:
        raise r.fail("ENABLE needs at least one capability name")
    return Words(tuple(words))


PARSERS: dict[str, Callable[[Reader], Args]] = {
    **dict.fromkeys(
        ["CAPABILITY", "NOOP", "LOGOUT", "STARTTLS", "CHECK", "CLOSE", "UNSELECT", "EXPUNGE",
         "IDLE", "NAMESPACE"], _none),
    "LOGIN": _login,
    "AUTHENTICATE": _authenticate,
    **dict.fromkeys(["SELECT", "EXAMINE", "CREATE", "DELETE", "SUBSCRIBE", "UNSUBSCRIBE"], _mailbox),
    "RENAME": _rename,
    "LIST": _list,
    "LSUB": _list,
    "STATUS": _status,
    "APPEND": _append,
    "FETCH": _fetch,
    "STORE": _store,
    "SEARCH": _search,
    "COPY": _copy,
    "MOVE": _copy,
    "ID": _id,
    "ENABLE": _enable,
    "UID FETCH": _fetch,
    "UID STORE": _store,
    "UID SEARCH": _search,
    "UID COPY": _copy,
    "UID MOVE": _copy,
    "UID EXPUNGE": _messages,
}


def strip_crlf(data: bytes) -> bytes:
    """Drop the line end after the last line (literal bytes before it are left alone)."""
    if data.endswith(b"\r\n"):
        return data[:-2]
    return data[:-1] if data.endswith(b"\n") else data


def parse_command(data: bytes) -> Command:
    """Parse one framed command (its final CRLF included or not)."""
    r = Reader(strip_crlf(data))
    tag = peek_tag(r.data)
    if tag is None:
        raise ImapError("missing or invalid tag", bad=True)
    r.pos = len(tag)
    r.sp()
    name = r.keyword()
    if name == "UID":
        r.sp()
        name = "UID " + r.keyword()
    parser = PARSERS.get(name)
    if parser is None:
        raise ImapError(f"unknown command {name}", bad=True)
    args = parser(r)
    r.end()
    return Command(tag, name, args)


#: every command name the parser knows (the command table must handle each)
COMMANDS_PARSED = frozenset(PARSERS)
