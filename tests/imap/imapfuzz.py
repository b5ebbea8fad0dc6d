"""Hypothesis strategies for IMAP command lines: well-formed commands of every kind (so a session
gets past the first token), lightly mutated, and soups of IMAP-ish tokens."""

from __future__ import annotations

from hypothesis import strategies as st

from pizzamail.imap import wire
from pizzamail.imap.parser import PARSERS

Bytes = st.SearchStrategy[bytes]


def literal(data: bytes, plus: bool) -> bytes:
    return b"{%d%s}\r\n" % (len(data), b"+" if plus else b"") + data


def words(*options: str) -> Bytes:
    return st.sampled_from([w.encode() for w in options])


def spaced(*parts: Bytes) -> Bytes:
    """The parts in order, one space between those that are not empty."""
    return st.tuples(*parts).map(lambda t: b" ".join(p for p in t if p))


def parenthesised(items: Bytes, min_size: int = 0) -> Bytes:
    return st.lists(items, min_size=min_size, max_size=4).map(lambda xs: b"(" + b" ".join(xs) + b")")


TOKENS = st.one_of(
    words("BODY", "BODY.PEEK", "BINARY", "BINARY.SIZE", "HEADER", "HEADER.FIELDS", "HEADER.FIELDS.NOT",
          "TEXT", "MIME", "FLAGS", "FLAGS.SILENT", "+FLAGS", "-FLAGS", "UID", "ENVELOPE", "BODYSTRUCTURE",
          "RFC822", "RFC822.SIZE", "MODSEQ", "ALL", "FAST", "CHANGEDSINCE", "VANISHED", "UNCHANGEDSINCE",
          "\\Seen", "\\Recent", "$Junk", "CHARSET", "UTF-8", "NOT", "OR", "SUBJECT", "SINCE", "LARGER",
          "KEYWORD", "NEW", "INBOX", "RETURN", "SUBSCRIBED", "RECURSIVEMATCH", "STATUS", "MESSAGES",
          "CONDSTORE", "QRESYNC", "NIL", "DONE", "PLAIN", "=", "1-Feb-2026", '"17-Jul-1996 02:44:25 -0700"',
          "1:*", "*", "1,3:5", "4294967296", "0", "&AOk-t&AOk-", "&Jjo", "~"),
    st.sampled_from(list(b"()[]<>. *%&\\\"{}:,+-")).map(lambda c: bytes([c])),
    st.integers(0, 2**64).map(lambda n: b"%d" % n),
    st.text(max_size=8).map(lambda t: wire.quoted(t.encode())),
    st.builds(literal, st.binary(max_size=12), st.booleans()),
    st.binary(max_size=4),
)
TAGS = st.sampled_from([b"a", b"A001", b"t.1"] * 6 + [b"*", b"+", b"", b"x{1}", b"(t"])

NUMBER = st.integers(1, 12).map(lambda n: b"%d" % n) | words("*", "0", "4294967296")
SEQSET = st.lists(NUMBER | spaced(NUMBER, NUMBER).map(lambda b: b.replace(b" ", b":")),
                  min_size=1, max_size=3).map(b",".join)
MAILBOX = words("INBOX", "inbox", "Trash", "Sent", "A/B", "a.b", "&AOk-t&AOk-", '""', "Nowhere") | st.text(
    max_size=12).map(lambda t: wire.astring(wire.encode_mailbox(t)))
FLAG = words("\\Seen", "\\Deleted", "\\Flagged", "\\Answered", "\\Draft", "\\Recent", "$Junk", "\\Bogus")
SECTION = words("", "1", "1.2", "HEADER", "TEXT", "1.MIME", "2.TEXT", "0", "1.") | parenthesised(
    words("From", "TO", "Subject", '"x y"'), 1).map(lambda fields: b"HEADER.FIELDS " + fields)
SIMPLE_ATT = words("UID", "FLAGS", "ENVELOPE", "BODYSTRUCTURE", "BODY", "RFC822", "RFC822.SIZE",
                   "RFC822.HEADER", "RFC822.TEXT", "INTERNALDATE", "MODSEQ", "ALL", "FAST", "FULL")
SECTION_ATT = st.tuples(words("BODY", "BODY.PEEK", "BINARY", "BINARY.PEEK", "BINARY.SIZE"), SECTION,
                        words("", "<0.10>", "<5.1>", "<0.0>")).map(lambda t: t[0] + b"[" + t[1] + b"]" + t[2])
FETCH_ATT = SIMPLE_ATT | SECTION_ATT
SEARCH_KEY = st.recursive(
    st.one_of(
        words("ALL", "NEW", "OLD", "SEEN", "UNSEEN", "DELETED", "RECENT", "FLAGGED"), SEQSET,
        spaced(words("SUBJECT", "FROM", "TO", "BODY", "TEXT"), TOKENS),
        spaced(words("SINCE", "BEFORE", "ON", "SENTSINCE"), words("1-Feb-2026", "31-Feb-2026", "x")),
        spaced(words("LARGER", "SMALLER", "MODSEQ", "UID"), NUMBER),
        spaced(words("KEYWORD", "UNKEYWORD"), FLAG),
        words('HEADER Message-ID "<a@b>"', 'MODSEQ "/flags/\\\\draft" all 3'),
    ),
    lambda key: key.map(lambda k: b"NOT " + k) | spaced(words("OR"), key, key) | parenthesised(key, 1),
    max_leaves=6,
)
ARGUMENTS: dict[str, Bytes] = {
    "FETCH": spaced(SEQSET, FETCH_ATT | parenthesised(FETCH_ATT, 1),
                    words("", "(CHANGEDSINCE 3)", "(CHANGEDSINCE 3 VANISHED)")),
    "STORE": spaced(SEQSET, words("", "(UNCHANGEDSINCE 5)"), words("FLAGS", "+FLAGS.SILENT", "-FLAGS"),
                    parenthesised(FLAG)),
    "SEARCH": spaced(words("", "CHARSET UTF-8", "CHARSET KOI8-R"), SEARCH_KEY, words("", "ALL")),
    "COPY": spaced(SEQSET, MAILBOX),
    "MOVE": spaced(SEQSET, MAILBOX),
    "EXPUNGE": words("") | SEQSET,
    "SELECT": spaced(MAILBOX, words("", "(CONDSTORE)", "(QRESYNC (1 2 1:5))")),
    "EXAMINE": MAILBOX, "CREATE": MAILBOX, "DELETE": MAILBOX, "SUBSCRIBE": MAILBOX, "UNSUBSCRIBE": MAILBOX,
    "RENAME": spaced(MAILBOX, MAILBOX),
    "STATUS": spaced(MAILBOX, words("(MESSAGES)", "(UNSEEN RECENT UIDNEXT HIGHESTMODSEQ)", "()")),
    "LIST": spaced(words("", "(SUBSCRIBED)", "(SPECIAL-USE RECURSIVEMATCH)"), words('""', "A/"), MAILBOX,
                   words("", "RETURN (CHILDREN)", "RETURN (STATUS (MESSAGES))")),
    "APPEND": spaced(MAILBOX, parenthesised(FLAG), words("", '"17-Jul-1996 02:44:25 -0700"'),
                     st.builds(literal, st.binary(max_size=60), st.booleans())),
    "ENABLE": words("CONDSTORE", "QRESYNC", "X-NONE"),
    "ID": words("NIL", '("name" "fuzz")', "()"),
    **dict.fromkeys(["NOOP", "CHECK", "IDLE", "CLOSE", "UNSELECT", "NAMESPACE", "LOGOUT"], words("")),
}
_BY_UID = ("FETCH", "STORE", "SEARCH", "COPY", "MOVE", "EXPUNGE")


@st.composite
def commands(draw: st.DrawFn) -> bytes:
    """A well-formed command most of the time; now and then a token or two changed."""
    name = draw(st.sampled_from(sorted(ARGUMENTS)))
    uid = name in _BY_UID and draw(st.booleans())
    line = b" ".join(p for p in (b"UID" if uid else b"", name.encode(), draw(ARGUMENTS[name])) if p)
    pieces = line.split(b" ")
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        at = draw(st.integers(0, len(pieces)))
        pieces[at:at + draw(st.integers(0, 1))] = [draw(TOKENS)]
    return draw(TAGS) + b" " + b" ".join(pieces)


@st.composite
def token_soup(draw: st.DrawFn) -> bytes:
    name = draw(st.sampled_from([*sorted(PARSERS), "UID", "BOGUS", ""]).map(str.encode))
    tokens = draw(st.lists(st.tuples(st.sampled_from([b" ", b""]), TOKENS), max_size=12))
    return draw(TAGS) + b" " + name + b"".join(sep + token for sep, token in tokens)


def command_lines() -> Bytes:
    return commands() | token_soup()
