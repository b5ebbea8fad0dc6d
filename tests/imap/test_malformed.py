"""Mails that no decoder fully understands, in the folder a client searches and fetches: one such
mail must never fail SEARCH or FETCH for the folder (task copies are filed in INBOX)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from imaptools import Client

from pizzamail.imap.search import body_text, decode_text
from pizzamail.mailbox import Mailbox
from tests.mailcorpus import deep_multipart, deep_rfc822, mail

BROKEN_2047 = mail("zqbroken", subject=b"zqbroken =?utf-8?b?AAAAA?=")
WHOLLY_BROKEN_2047 = mail("zqwhole", subject=b"=?utf-8?b?" + b"A" * 41 + b"?=")
BINARY_TYPE = mail("zqbinary", b"Content-Type: text/\xff\xfe; charset=\"\x00")
GOOD = mail("zqgood")
HUGE_DATE = mail("zqdate", b"Date: 1 Jan 10000000000000000000 00:00")
# 16 letters of the base64 alphabet: a lenient decoder turns them into 12 bytes of nonsense
BAD_BASE64 = mail("zqbase", b"Content-Transfer-Encoding: base64", body=b"!! not base64: zqbase6")
FOLDER = [BROKEN_2047, WHOLLY_BROKEN_2047, BINARY_TYPE, deep_multipart("zqdeep", 950),
          deep_rfc822("zqnest", 950), deep_multipart("zqshallow", 10), GOOD, HUGE_DATE, BAD_BASE64]


@pytest.fixture
async def selected(mailbox: Mailbox, client: Client) -> Client:
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    for data in FOLDER:
        await mailbox.deliver(inbox, data)
    assert (await client.command(b"s SELECT INBOX"))[-1].startswith(b"s OK")
    return client


async def search(client: Client, program: bytes) -> bytes:
    *data, done = await client.command(b"x SEARCH " + program)
    assert done == b"x OK SEARCH completed\r\n", (program, done)
    [line] = data
    return line


async def test_bad_mails_do_not_fail_search_of_their_folder(selected: Client) -> None:
    for key in (b"SUBJECT", b"TEXT", b"BODY"):
        assert await search(selected, key + b" zqgood") == b"* SEARCH 7\r\n"
    # each bad mail is still found by what can be read of it
    assert await search(selected, b"SUBJECT zqbroken") == b"* SEARCH 1\r\n"
    assert await search(selected, b"SUBJECT AAAAAAAA") == b"* SEARCH 2\r\n"  # its raw text
    assert await search(selected, b"BODY zqbinary") == b"* SEARCH 3\r\n"
    assert await search(selected, b"SUBJECT zqdeep") == b"* SEARCH 4\r\n"
    assert await search(selected, b"TEXT zqnest") == b"* SEARCH 5\r\n"
    assert await search(selected, b"BODY zqshallow") == b"* SEARCH 6\r\n"
    assert await search(selected, b"SENTBEFORE 1-Jan-2000") == b"* SEARCH\r\n"
    assert await search(selected, b"SENTSINCE 1-Jan-2000 BODY zqdate") == b"* SEARCH\r\n"
    assert await search(selected, b"BODY zqbase6") == b"* SEARCH 9\r\n"  # damaged: its raw text


async def test_damaged_base64_is_not_served_as_bytes(selected: Client) -> None:
    assert await selected.command(b"b FETCH 9 BINARY[1]") == [
        b"b NO [UNKNOWN-CTE] the part's base64 is damaged\r\n"]


async def test_deep_mails_fetch_their_structure(selected: Client) -> None:
    items = b"(ENVELOPE BODYSTRUCTURE BODY BODY.PEEK[1] BODY.PEEK[1.1.1] BODY.PEEK[1.MIME] BINARY.SIZE[1])"
    for seq in (b"4", b"5"):
        lines = await selected.command(b"f FETCH " + seq + b" " + items)
        assert lines[-1] == b"f OK FETCH completed\r\n"
        assert lines[0].startswith(b"* " + seq + b" FETCH (ENVELOPE (")


encoded_word = st.builds(
    lambda charset, kind, text: f"=?{charset}?{kind}?{text}?=",
    st.sampled_from(["utf-8", "x-unknown", "zlib_codec", "idna", "utf-16", "", "utf-8*en", "iso-2022-jp"]),
    st.sampled_from(["b", "q", "B", "x", ""]),
    st.text(alphabet="AZaz09+/=_?-\xe9", max_size=12),
)


@given(st.lists(st.one_of(encoded_word, st.text(max_size=8)), max_size=5))
def test_header_decoding_never_raises(words: list[str]) -> None:
    decode_text(" ".join(words).encode("utf-8", "surrogateescape"))


@given(st.sampled_from(["base64", "quoted-printable", "x-uuencode", "7bit"]),
       st.sampled_from(["utf-8", "x-unknown", "zlib_codec", "idna", "utf-16", "", "\x00"]),
       st.binary(max_size=64))
def test_body_decoding_never_raises(encoding: str, charset: str, body: bytes) -> None:
    head = f"Content-Type: text/plain; charset=\"{charset}\"\r\nContent-Transfer-Encoding: {encoding}\r\n"
    body_text(head.encode() + b"\r\n" + body)
