"""Property-based fuzzing of the IMAP command parser and of a session (Hypothesis).

Bad input is the client's mistake: it may only ever raise the parser's own error (``ImapError``,
rendered as BAD/NO); values the server writes read back as themselves; and a logged-in session fed
random command lines answers every one, never with ``[SERVERBUG]``.
"""

from __future__ import annotations

import asyncio
import calendar
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from imapfuzz import command_lines, literal
from imaptools import ACCOUNTS, seed

from pizzamail.errors import ImapError
from pizzamail.guard import Gate
from pizzamail.home import Home
from pizzamail.imap import Limits, parser, wire
from pizzamail.imap.commands import COMMANDS
from pizzamail.imap.fetchparse import Section
from pizzamail.imap.parser import literal_at_end, parse_command, peek_tag
from pizzamail.imap.searchkeys import HeaderKey
from pizzamail.imap.session import Session, Shared
from pizzamail.mailbox import Mailbox
from pizzamail.store import Store as Db


def _parses_or_refuses(data: bytes) -> None:
    try:
        parse_command(data)
    except ImapError as exc:
        line = exc.imap_response(b"t")
        assert line.endswith(b"\r\n") and b"\r" not in line[:-2] and b"\n" not in line[:-2] and line.isascii()


@given(st.binary(max_size=300))
def test_arbitrary_bytes_parse_or_raise_the_parsers_error(data: bytes) -> None:
    _parses_or_refuses(data)
    peek_tag(data)
    literal_at_end(data)


@settings(max_examples=500)
@given(command_lines())
def test_command_like_lines_parse_or_raise_the_parsers_error(data: bytes) -> None:
    _parses_or_refuses(data)


def test_deeply_nested_search_programs_are_refused() -> None:
    for program in (b"NOT " * 5000 + b"ALL", b"(" * 5000 + b"ALL" + b")" * 5000, b"OR ALL " * 3000 + b"ALL"):
        with pytest.raises(ImapError, match="search program nested more than 100 deep") as refused:
            parse_command(b"t SEARCH " + program)
        assert refused.value.imap_response(b"t").startswith(b"t BAD ")
    parse_command(b"t SEARCH " + b"NOT " * 50 + b"ALL")  # deep enough for any real client


# -- round trips: what the server writes, the parser reads back ------------------------------

MAILBOX_NAMES = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30).filter(
    lambda n: n.upper() != "INBOX")
SEQ = st.integers(0, 2**32 - 1)  # 0 is "*"


@given(MAILBOX_NAMES)
def test_mailbox_names_round_trip(name: str) -> None:
    assert wire.decode_mailbox(wire.encode_mailbox(name)) == name
    command = parse_command(b"t SELECT " + wire.astring(wire.encode_mailbox(name)))
    assert command.args == parser.Select(name)


@given(st.lists(st.tuples(SEQ, SEQ), min_size=1, max_size=6))
def test_sequence_sets_round_trip(ranges: list[tuple[int, int]]) -> None:
    def number(n: int) -> bytes:
        return b"*" if n == 0 else b"%d" % n

    text = b",".join(number(a) if a == b else number(a) + b":" + number(b) for a, b in ranges)
    args = parse_command(b"t UID FETCH " + text + b" UID").args
    assert isinstance(args, parser.Fetch) and args.messages.ranges == tuple(ranges)


@st.composite
def sections(draw: st.DrawFn) -> Section:
    part = tuple(draw(st.lists(st.integers(1, 2**31), max_size=3)))
    texts = [None, "HEADER", "HEADER.FIELDS", "HEADER.FIELDS.NOT", "TEXT"] + (["MIME"] if part else [])
    text = draw(st.sampled_from(texts))
    fields: tuple[bytes, ...] = ()
    if text and text.startswith("HEADER.FIELDS"):
        names = st.sampled_from([b"From", b"TO", b"x-pizzamail-thread", b"Message-ID"])
        fields = tuple(draw(st.lists(names, min_size=1, max_size=3)))
    return Section(part, text, fields)


@given(sections(), st.none() | st.tuples(st.integers(0, 2**31), st.integers(1, 2**31)), st.booleans())
def test_body_sections_round_trip(section: Section, partial: tuple[int, int] | None, peek: bool) -> None:
    text = b"BODY.PEEK[" if peek else b"BODY["
    text += section.wire() + b"]" + (b"<%d.%d>" % partial if partial else b"")
    args = parse_command(b"t FETCH 1 " + text).args
    assert isinstance(args, parser.Fetch)
    [att] = args.atts
    assert (att.name, att.section, att.peek, att.partial) == ("BODY[]", section, peek, partial)


KEYWORDS = st.text(st.sampled_from(sorted(chr(c) for c in wire.ATOM_CHARS if chr(c) != "\\")), min_size=1,
                   max_size=10)


@given(st.lists(st.sampled_from(wire.SYSTEM_FLAGS), max_size=5), st.lists(KEYWORDS, max_size=5),
       st.booleans())
def test_flag_lists_round_trip(system: list[str], keywords: list[str], shout: bool) -> None:
    flags = {*system, *keywords}
    listed = wire.flag_list(flags)
    args = parse_command(b"t STORE 1 +FLAGS " + (listed.upper() if shout else listed)).args
    assert isinstance(args, parser.Store)
    expected = {f if f in wire.SYSTEM_FLAGS or not shout else f.upper() for f in flags}
    assert set(args.flags) == expected


@given(st.integers(0, calendar.timegm((9999, 12, 31, 23, 59, 59))), st.binary(max_size=200))
def test_append_date_and_message_round_trip(stamp: int, message: bytes) -> None:
    line = b"t APPEND Sent () " + wire.date_time(stamp) + b" " + literal(message, True) + b"\r\n"
    assert parse_command(line).args == parser.Append("Sent", (), stamp, message)


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40))
def test_search_text_round_trips_in_utf8(text: str) -> None:
    data = text.encode()
    args = parse_command(b"t SEARCH CHARSET UTF-8 SUBJECT " + literal(data, False) + b"\r\n").args
    assert args == parser.Search(HeaderKey("subject", text))


# -- a session fed random command lines -------------------------------------------------------


class _Connection:
    """In memory: what the session sends is collected; every line it reads is DONE (ending an
    IDLE, or a refused AUTHENTICATE answer)."""

    secure = False
    local = True
    peer = "127.0.0.1:50000"

    def __init__(self, gate: Gate) -> None:
        self.out = bytearray()
        self.visitor = gate.admit(lambda why: None)

    async def send(self, data: bytes) -> None:
        self.out += data

    async def flush(self) -> None:
        pass

    async def start_tls(self, context: object, handshake_timeout: float) -> None:
        raise AssertionError("no TLS is configured")

    async def read_line(self) -> bytes | None:
        return b"DONE\r\n"

    def waiting_line(self) -> bytes | None:
        return None


async def _session_answers(root: Path, lines: list[bytes]) -> None:
    home = Home(root=root)
    home.create_dirs()
    async with Db(path=home.database) as db:
        mailbox = await Mailbox(root=home.maildir, store=db).open()
        await seed(mailbox)
        shared = Shared(mailbox=mailbox, accounts=ACCOUNTS, limits=Limits(login_delay=0))
        conn = _Connection(shared.gate)
        session = Session(shared, conn, COMMANDS)
        for raw in [b"a LOGIN me pw", b"b SELECT INBOX", *lines]:
            conn.out.clear()
            going_on = await session.handle(raw + b"\r\n")
            answer = bytes(conn.out)
            assert b"SERVERBUG" not in answer, (raw, answer)
            last = answer.rstrip(b"\r\n").rsplit(b"\r\n", 1)[-1]
            tag = peek_tag(raw) or b"*"
            endings = (tag + b" OK", tag + b" NO", tag + b" BAD", b"* BAD", b"* BYE")
            assert last.startswith(endings), (raw, answer)
            if not going_on:
                return


@settings(max_examples=60)
@given(st.lists(command_lines(), min_size=1, max_size=8))
def test_a_session_answers_every_random_command(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_session_answers(Path(tmp), lines))


_ITEMS = [b"(BODY.PEEK[])", b"(UID FLAGS)", b"BODY[]", b"(BODY.PEEK[HEADER.FIELDS (FROM)])",
          b"(FLAGS) (CHANGEDSINCE 5)", b"(BODY.PEEK[]", b"(NOPE)", b"", b"(BODY.PEEK[])\r", b"ALL extra",
          b"(RFC822.SIZE)"]


def _outcome(data: bytes) -> object:
    try:
        return parse_command(data)
    except ImapError as exc:
        return str(exc)


@settings(max_examples=400, deadline=None)
@given(tag=st.sampled_from([b"a1", b"UID", b"t+", b"x(", b"]", b"A0001", b""]),
       name=st.sampled_from([b"UID FETCH", b"FETCH", b"uid fetch", b"UID  FETCH", b"UIDFETCH"]),
       number=st.sampled_from([b"1", b"0", b"007", b"4294967295", b"9999999999", b"12345678901", b"1:2", b"*",
                               b"-1", b"1,3"]),
       items=st.sampled_from(_ITEMS), end=st.sampled_from([b"\r\n", b"\n", b""]))
def test_a_fetch_of_one_message_reads_as_the_whole_parse_reads_it(
    tag: bytes, name: bytes, number: bytes, items: bytes, end: bytes
) -> None:
    """The quick read of ``UID FETCH n items`` (mbsync's pull) gives exactly what the whole parse
    gives, or leaves the line to it: the same command, or the same refusal."""
    _outcome(b"p FETCH 1 " + items)  # its items known, when they parse
    line = tag + b" " + name + b" " + number + b" " + items + end
    quick = _outcome(line)
    original = parser._one_fetch
    parser._one_fetch = lambda line: None
    try:
        assert quick == _outcome(line)
    finally:
        parser._one_fetch = original


def test_a_fetch_of_one_message_whose_items_are_known_takes_the_quick_read() -> None:
    parse_command(b"p UID FETCH 1 (BODY.PEEK[])")
    line = b"q UID FETCH 42 (BODY.PEEK[])"
    assert parser._one_fetch(line) == parse_command(line) and parser._one_fetch(line) is not None
    assert parser._one_fetch(b"q UID FETCH 42 (BODY.PEEK[]) ") is None  # never parsed: the whole parse's
