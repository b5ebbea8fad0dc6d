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
from pizzamail.imap.listparse import ListArgs, list_args
from pizzamail.imap.reader import Reader, SequenceSet
from pizzamail.imap.searchkeys import SearchKey, search_program

_LITERAL_AT_END = re.compile(rb"\{(\d{1,20})(\+?)\}\r?\n\Z")
_TAG = re.compile(rb"[\x21-\x7e]+")
_NOT_IN_TAG = re.compile(rb'[(){%*"\\+]')


def literal_at_end(line: bytes) -> tuple[int, bool] | None:
    """``(size, synchronising)`` when ``line`` (CRLF included) ends by announcing a literal."""
    m = _LITERAL_AT_END.search(line)
    if m is None:
        return None
    return int(m.group(1)), m.group(2) != b"+"


def peek_tag(data: bytes) -> bytes | None:
    """The tag of a (possibly malformed) command, so even a BAD answer can be tagged."""
    m = _TAG.match(data)
    if m is None or _NOT_IN_TAG.search(m.group()):
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
class Qresync:
    """SELECT's ``(QRESYNC (uidvalidity modseq [known-uids]))``; sequence match data is read and
    ignored (we keep every expunge's modseq, so the client's hints are never needed)."""

    uidvalidity: int
    modseq: int
    known: SequenceSet | None


@dataclass(frozen=True)
class Select:
    name: str
    condstore: bool = False
    qresync: Qresync | None = None


@dataclass(frozen=True)
class Rename:
    old: str
    new: str


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
    changedsince: int | None = None  # RFC 7162 FETCH modifier
    vanished: bool = False  # with CHANGEDSINCE, in UID FETCH under QRESYNC


@dataclass(frozen=True)
class Store:
    messages: SequenceSet
    mode: str  # "" replace, "+" add, "-" remove
    silent: bool
    flags: tuple[str, ...]
    unchangedsince: int | None = None  # RFC 7162 STORE modifier


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


Args = (NoArgs | Login | Authenticate | MailboxName | Select | Rename | ListArgs | Status | Append | Fetch
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
    return MailboxName(r.mailbox())


def _select(r: Reader) -> Select:
    r.sp()
    name = r.mailbox()
    condstore, qresync = False, None
    if r.take(b" ("):
        while True:
            word = r.keyword()
            if word == "CONDSTORE":
                condstore = True
            elif word == "QRESYNC":
                r.sp()
                qresync = _qresync(r)
            else:
                raise r.fail(f"unknown SELECT parameter {word}")
            if r.take(b")"):
                break
            r.sp()
    return Select(name, condstore, qresync)


def _qresync(r: Reader) -> Qresync:
    r.expect(b"(")
    uidvalidity = r.nz_number()
    r.sp()
    modseq = r.mod_sequence()
    known = None
    if r.take(b" ") and r.peek() != b"(":
        known = r.sequence_set()
        r.take(b" ")
    if r.take(b"("):  # seq-match-data: (sequence-set SP uid-set)
        r.sequence_set()
        r.sp()
        r.sequence_set()
        r.expect(b")")
    r.expect(b")")
    return Qresync(uidvalidity, modseq, known)


def _rename(r: Reader) -> Rename:
    r.sp()
    old = r.mailbox()
    r.sp()
    return Rename(old, r.mailbox())


def _list(r: Reader) -> ListArgs:
    return list_args(r, extended=True, status_items=STATUS_ITEMS)


def _lsub(r: Reader) -> ListArgs:
    return list_args(r, extended=False, status_items=STATUS_ITEMS)


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
    return Status(mailbox, _status_items(r, items))


STATUS_ITEMS = ("MESSAGES", "RECENT", "UIDNEXT", "UIDVALIDITY", "UNSEEN", "HIGHESTMODSEQ")


def _status_items(r: Reader, items: tuple[str, ...]) -> tuple[str, ...]:
    if not items or not set(items) <= set(STATUS_ITEMS):
        raise r.fail("STATUS items are " + " ".join(STATUS_ITEMS))
    return items


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
    r.take(b"~")  # RFC 3516 literal8: the same bytes, possibly with NULs
    if r.peek() != b"{":
        raise r.fail("APPEND needs the message as a literal")
    return Append(mailbox, flags, stamp, r.literal())


#: the item lists (with their modifiers) of the latest FETCHes, parsed, by their text: a client
#: fetching message after message (mbsync's pull) sends the same one each time
_FETCH_ITEMS: dict[bytes, tuple[tuple[FetchAtt, ...], int | None, bool]] = {}
_FETCH_ITEMS_KEPT = 64


#: a FETCH of one message whose items were parsed before: mbsync pulls a folder with one such
#: command a message (``UID FETCH 4711 (BODY.PEEK[])``), which the whole parse took 5.5 us to read
_ONE_FETCH = re.compile(rb"([\x21-\x7e]+) (UID )?FETCH ([0-9]{1,10}) (.*)", re.S)


def _one_fetch(line: bytes) -> Command | None:
    """``line`` read as :func:`parse_command` reads it, when it is such a FETCH (in upper case,
    items already known); otherwise None, for the whole parse."""
    m = _ONE_FETCH.fullmatch(line)
    if m is None:
        return None
    tag, uid, digits, items = m.groups()
    known = _FETCH_ITEMS.get(items)
    number = int(digits)
    if known is None or number == 0 or _NOT_IN_TAG.search(tag):
        return None
    return Command(tag, "UID FETCH" if uid else "FETCH", Fetch(SequenceSet(((number, number),)), *known))


def _fetch(r: Reader) -> Fetch:
    r.sp()
    messages = r.sequence_set()
    r.sp()
    text = r.data[r.pos:]
    known = _FETCH_ITEMS.get(text)
    if known is not None:
        r.pos = len(r.data)
        return Fetch(messages, *known)
    known = _fetch_items(r)
    if r.at_end():  # else the command is refused for what follows, every time
        if len(_FETCH_ITEMS) >= _FETCH_ITEMS_KEPT:
            _FETCH_ITEMS.clear()
        _FETCH_ITEMS[text] = known
    return Fetch(messages, *known)


def _fetch_items(r: Reader) -> tuple[tuple[FetchAtt, ...], int | None, bool]:
    atts = fetch_atts(r)
    changedsince, vanished = None, False
    if r.take(b" ("):
        while True:
            word = r.keyword()
            if word == "CHANGEDSINCE":
                r.sp()
                changedsince = r.mod_sequence()
            elif word == "VANISHED":
                vanished = True
            else:
                raise r.fail(f"unknown FETCH modifier {word}")
            if r.take(b")"):
                break
            r.sp()
    if vanished and changedsince is None:
        raise r.fail("VANISHED needs CHANGEDSINCE")
    return atts, changedsince, vanished


def _store(r: Reader) -> Store:
    r.sp()
    messages = r.sequence_set()
    r.sp()
    unchangedsince = None
    if r.take(b"(UNCHANGEDSINCE "):
        unchangedsince = r.mod_sequence(zero_ok=True)
        r.expect(b")")
        r.sp()
    mode = "+" if r.take(b"+") else "-" if r.take(b"-") else ""
    if not r.take(b"FLAGS"):
        raise r.fail("STORE supports FLAGS, +FLAGS and -FLAGS")
    silent = r.take(b".SILENT")
    r.sp()
    return Store(messages, mode, silent, r.flags(), unchangedsince)


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
    "SELECT": _select,
    "EXAMINE": _select,
    **dict.fromkeys(["CREATE", "DELETE", "SUBSCRIBE", "UNSUBSCRIBE"], _mailbox),
    "RENAME": _rename,
    "LIST": _list,
    "LSUB": _lsub,
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
    line = strip_crlf(data)
    quick = _one_fetch(line)
    if quick is not None:
        return quick
    r = Reader(line)
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
