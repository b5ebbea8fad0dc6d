"""Parser transcripts: exact command bytes in, parsed structure out; malformed input -> BAD."""

from __future__ import annotations

from datetime import date

import pytest

from pizzamail.errors import ImapError
from pizzamail.imap.fetchparse import FetchAtt, Section
from pizzamail.imap.parser import (
    COMMANDS_PARSED,
    Append,
    Authenticate,
    Command,
    Copy,
    Fetch,
    ListArgs,
    Login,
    MailboxName,
    Search,
    Select,
    Status,
    Store,
    literal_at_end,
    parse_command,
    peek_tag,
)
from pizzamail.imap.reader import SequenceSet
from pizzamail.imap.searchkeys import (
    AndKey,
    DateKey,
    FlagKey,
    HeaderKey,
    NotKey,
    OrKey,
    SetKey,
    SizeKey,
    TextKey,
)


def test_login_with_atoms_quoted_and_literals() -> None:
    assert parse_command(b"a1 LOGIN me pw\r\n") == Command(b"a1", "LOGIN", Login(b"me", b"pw"))
    assert parse_command(b'a2 login "m\\"e" "p w"\r\n').args == Login(b'm"e', b"p w")
    framed = b"a3 LOGIN {2}\r\nme {3+}\r\np\r\n\r\n"
    assert parse_command(framed).args == Login(b"me", b"p\r\n")


def test_uid_commands_and_sequence_sets() -> None:
    cmd = parse_command(b"7 UID FETCH 1:3,5,9:* FLAGS\r\n")
    assert cmd.name == "UID FETCH" and cmd.uid
    assert cmd.args == Fetch(SequenceSet(((1, 3), (5, 5), (9, 0))), (FetchAtt("FLAGS"),))
    assert SequenceSet(((9, 0),)).bounds(4) == [(4, 9)]


def test_fetch_sections_partials_and_macros() -> None:
    cmd = parse_command(
        b"f FETCH 2 (UID BODY.PEEK[HEADER.FIELDS (From Subject)]<0.100> BODY[1.2.MIME] "
        b"BODY[] BODY[2.TEXT] RFC822.SIZE)\r\n"
    )
    assert cmd.arg(Fetch).atts == (
        FetchAtt("UID"),
        FetchAtt("BODY[]", Section((), "HEADER.FIELDS", (b"From", b"Subject")), True, (0, 100)),
        FetchAtt("BODY[]", Section((1, 2), "MIME")),
        FetchAtt("BODY[]", Section()),
        FetchAtt("BODY[]", Section((2,), "TEXT")),
        FetchAtt("RFC822.SIZE"),
    )
    fast = parse_command(b"f FETCH 1 FAST").arg(Fetch).atts
    assert [a.name for a in fast] == ["FLAGS", "INTERNALDATE", "RFC822.SIZE"]
    assert Section((), "HEADER.FIELDS.NOT", (b"To",)).wire() == b"HEADER.FIELDS.NOT (To)"


def test_store_append_status_list_copy() -> None:
    store = parse_command(b"s UID STORE 4 +FLAGS.SILENT (\\seen $Label1)\r\n").args
    assert store == Store(SequenceSet(((4, 4),)), "+", True, ("\\Seen", "$Label1"))
    append = parse_command(b'a APPEND Sent (\\Seen) " 5-Jul-2026 10:00:00 +0200" {4+}\r\nhi\r\n\r\n')
    assert append.args == Append("Sent", ("\\Seen",), 1783238400, b"hi\r\n")
    status = parse_command(b"s STATUS inbox (UIDNEXT MESSAGES)").args
    assert status == Status("INBOX", ("UIDNEXT", "MESSAGES"))
    assert parse_command(b'l LIST "" ""').args == ListArgs("", ("",))
    special = ListArgs("", ("*",), frozenset({"SPECIAL-USE"}))
    assert parse_command(b'l LIST (SPECIAL-USE) "" *').args == special
    assert parse_command(b"l LSUB \"\" %/&AOk-t&AOk-").args == ListArgs("", ("%/été",))
    assert parse_command(b'l LIST (SUBSCRIBED RECURSIVEMATCH) "" ("INBOX" %) RETURN (CHILDREN STATUS '
                         b'(MESSAGES HIGHESTMODSEQ))').args == ListArgs(
        "", ("INBOX", "%"), frozenset({"SUBSCRIBED", "RECURSIVEMATCH"}), frozenset({"CHILDREN", "STATUS"}),
        ("MESSAGES", "HIGHESTMODSEQ"))
    with pytest.raises(ImapError):
        parse_command(b'l LIST (RECURSIVEMATCH) "" *')
    with pytest.raises(ImapError):
        parse_command(b'l LSUB (SUBSCRIBED) "" *')
    assert parse_command(b"c UID MOVE 1:* Archive").args == Copy(SequenceSet(((1, 0),)), "Archive")
    assert parse_command(b"s SELECT &AOk-t&AOk-").args == Select("été")
    assert parse_command(b"s DELETE &AOk-t&AOk-").args == MailboxName("été")


def test_authenticate_with_and_without_initial_response() -> None:
    assert parse_command(b"a AUTHENTICATE PLAIN AG1lAHB3").args == Authenticate("PLAIN", b"AG1lAHB3")
    assert parse_command(b"a AUTHENTICATE plain").args == Authenticate("PLAIN", None)
    assert parse_command(b"a AUTHENTICATE PLAIN =").args == Authenticate("PLAIN", b"")


def test_search_keys() -> None:
    cmd = parse_command(
        b"s UID SEARCH CHARSET UTF-8 OR SEEN NOT (FROM {5}\r\nJ\xc3\xbcrg 1:3) "
        b"UNKEYWORD $Junk SINCE 1-Feb-2026 LARGER 100 HEADER Message-ID <x@y> BODY approve\r\n"
    )
    assert cmd.args == Search(AndKey((
        OrKey(FlagKey("\\Seen", True), NotKey(AndKey((
            HeaderKey("from", "Jürg"), SetKey(SequenceSet(((1, 3),)), uid=False))))),
        FlagKey("$Junk", False),
        DateKey(False, "SINCE", date(2026, 2, 1)),
        SizeKey(True, 100),
        HeaderKey("message-id", "<x@y>"),
        TextKey("approve", body_only=True),
    )))
    assert parse_command(b"s SEARCH UID 5:*").args == Search(SetKey(SequenceSet(((5, 0),)), uid=True))


@pytest.mark.parametrize("line", [
    b"a1 FETCH 1 (FLAGS\r\n",            # unclosed list
    b"a1 FETCH 0 FLAGS\r\n",             # sequence numbers start at 1
    b"a1 FETCH 1 BODY[HEADER.FIELDS]\r\n",  # missing field list
    b"a1 FETCH 1 BODY[1.]\r\n",
    b"a1 FETCH 1 BODY[]<5>\r\n",
    b"a1 FROB\r\n",
    b"a1 LOGIN me\r\n",
    b'a1 LOGIN "me pw\r\n',
    b"a1 LOGIN {5}\r\nme pw\r\n",          # literal shorter than announced
    b"a1 NOOP extra\r\n",
    b"a1 SEARCH FOO\r\n",
    b"a1 STORE 1 FLAG (\\Seen)\r\n",
    b"a1 SELECT &Jjo\r\n",                 # broken modified UTF-7
    b"a1 STATUS INBOX (SIZE)\r\n",
])
def test_malformed_commands_are_bad(line: bytes) -> None:
    with pytest.raises(ImapError) as info:
        parse_command(line)
    assert info.value.bad
    assert info.value.imap_response(b"a1").startswith(b"a1 BAD ")


def test_unknown_charset_is_no_with_badcharset() -> None:
    with pytest.raises(ImapError) as info:
        parse_command(b"a SEARCH CHARSET KOI8-R ALL")
    assert info.value.imap_response(b"a") == b"a NO [BADCHARSET (UTF-8 US-ASCII)] unsupported charset\r\n"


def test_framing_helpers() -> None:
    assert literal_at_end(b"a LOGIN {2}\r\n") == (2, True)
    assert literal_at_end(b"a APPEND INBOX {310+}\r\n") == (310, False)
    assert literal_at_end(b'a LOGIN "{2}"\r\n') is None
    assert peek_tag(b"a.1 NOOP") == b"a.1"
    assert peek_tag(b"+ x") is None
    assert peek_tag(b"") is None


def test_every_parsed_command_has_a_handler() -> None:
    from pizzamail.imap.commands import COMMANDS

    assert set(COMMANDS_PARSED) == set(COMMANDS)
