"""A generated corpus of malformed mails: each kind is a named builder, nothing is stored as a file.

Every mail is from the owner to the agent (unless breaking that is the point) and carries a word of
its own (``Case.token``). A case says where a search must still find that word once the mail is
stored (``subject``, ``body``; TEXT finds it if either does), or that the mail is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

OWNER = b"me@pizzamail.localhost"
BOT = b"bot@pizzamail.localhost"
Builder = Callable[[str], bytes]


@dataclass(frozen=True)
class Case:
    name: str
    build: Builder
    subject: bool = True  # SEARCH SUBJECT finds the token
    body: bool = True  # SEARCH BODY finds it
    refused: bool = False  # SMTP answers 5xx and nothing is stored

    @property
    def token(self) -> str:
        return "zq" + self.name.replace("_", "")

    def data(self) -> bytes:
        return self.build(self.token)


CASES: list[Case] = []


def case(*, subject: bool = True, body: bool = True, refused: bool = False) -> Callable[[Builder], Builder]:
    def register(build: Builder) -> Builder:
        CASES.append(Case(build.__name__, build, subject, body, refused))
        return build
    return register


def mail(token: str, *headers: bytes, body: bytes | None = None, subject: bytes | None = None,
         eol: bytes = b"\r\n") -> bytes:
    """From, To, Subject (``token`` unless given), the extra header lines, a blank line, the body."""
    subject = token.encode() if subject is None else subject
    lines = [b"From: Me <" + OWNER + b">", b"To: " + BOT, b"Subject: " + subject, *headers]
    text = b"Please look at " + token.encode() + b" today." if body is None else body
    return eol.join(lines) + eol + eol + text + eol


def deep_multipart(token: str, depth: int) -> bytes:
    """``depth`` multiparts, each the only part of the one above; the text is the innermost part."""
    opening = b"".join(b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (i, i)
                       for i in range(depth))
    closing = b"".join(b"\r\n--b%d--" % i for i in reversed(range(depth)))
    inner = b"Content-Type: text/plain\r\n\r\ndeep text " + token.encode()
    head = b"From: " + OWNER + b"\r\nTo: " + BOT + b"\r\nSubject: deep " + token.encode() + b"\r\n"
    return head + b"MIME-Version: 1.0\r\n" + opening + inner + closing + b"\r\n"


def deep_rfc822(token: str, depth: int) -> bytes:
    """A mail attached to a mail attached to a mail ... ``depth`` times."""
    head = b"From: " + OWNER + b"\r\nTo: " + BOT + b"\r\nSubject: deep " + token.encode() + b"\r\n"
    nested = b"".join(b"Content-Type: message/rfc822\r\n\r\nSubject: level %d\r\n" % i for i in range(depth))
    return head + nested + b"Content-Type: text/plain\r\n\r\ninnermost " + token.encode() + b"\r\n"


def multipart(token: str, *parts: bytes, boundary: bytes = b"b1", kind: bytes = b"mixed",
              close: bool = True) -> bytes:
    body = b"".join(b"--" + boundary + b"\r\n" + p + b"\r\n" for p in parts)
    if close:
        body += b"--" + boundary + b"--\r\n"
    ctype = b"Content-Type: multipart/" + kind + b'; boundary="' + boundary + b'"'
    return mail(token, b"MIME-Version: 1.0", ctype, body=b"preamble\r\n" + body)


def text_part(token: str, *headers: bytes, body: bytes | None = None) -> bytes:
    head = b"".join(h + b"\r\n" for h in headers) or b"Content-Type: text/plain\r\n"
    return head + b"\r\n" + (b"part text " + token.encode() if body is None else body)


# -- headers ----------------------------------------------------------------------------------


@case(subject=False)
def no_header_at_all(token: str) -> bytes:
    return b"\r\njust a body with " + token.encode() + b"\r\n"


@case(body=False)
def header_only_no_body(token: str) -> bytes:
    return b"From: " + OWNER + b"\r\nTo: " + BOT + b"\r\nSubject: " + token.encode() + b"\r\n"


@case()
def missing_from(token: str) -> bytes:
    return mail(token).replace(b"From: Me <" + OWNER + b">\r\n", b"")


@case(subject=False)
def missing_subject(token: str) -> bytes:
    return mail(token).replace(b"Subject: " + token.encode() + b"\r\n", b"")


@case()
def garbage_date(token: str) -> bytes:
    return mail(token, b"Date: the day after tomorrow, probably")


@case()
def date_out_of_range(token: str) -> bytes:
    return mail(token, b"Date: Mon, 31 Feb 99999 99:99:99 +9999")


@case()
def duplicate_subject(token: str) -> bytes:
    return mail(token, b"Subject: a second subject")


@case()
def duplicate_from(token: str) -> bytes:
    return mail(token, b"From: " + OWNER)


@case()
def duplicate_message_id(token: str) -> bytes:
    return mail(token, b"Message-ID: <dup-1@client>", b"Message-ID: <dup-2@client>")


@case()
def overlong_unfolded_subject(token: str) -> bytes:
    return mail(token, subject=token.encode() + b" " + b"x" * 20_000)


@case()
def many_continuation_lines(token: str) -> bytes:
    return mail(token, subject=token.encode() + b"\r\n word" * 5_000)


@case()
def very_many_headers(token: str) -> bytes:
    return mail(token, *(b"X-Filler-%d: %d" % (i, i) for i in range(10_000)))


@case()
def huge_header_block(token: str) -> bytes:
    return mail(token, *(b"X-Big: " + b"y" * 900 for _ in range(600)))


@case()
def eight_bit_utf8_subject(token: str) -> bytes:
    return mail(token, subject=token.encode() + " Grüße aus Köln".encode())


@case()
def latin1_raw_subject(token: str) -> bytes:
    return mail(token, subject=token.encode() + b" Gr\xfc\xdfe")


@case()
def invalid_utf8_header(token: str) -> bytes:
    return mail(token, subject=token.encode() + b" \xff\xfe\xc3")


@case()
def nul_in_header(token: str) -> bytes:
    return mail(token, subject=token.encode() + b" \x00nul")


@case()
def nul_in_body(token: str) -> bytes:
    return mail(token, body=b"before\x00after " + token.encode())


@case()
def control_characters_in_header(token: str) -> bytes:
    return mail(token, b"X-Odd: \x01\x02\x1b[31m\x7f", subject=token.encode() + b"\x07\x08")


@case()
def line_without_colon_in_header(token: str) -> bytes:
    return mail(token, b"this line is not a header at all", b"X-After: 1")


@case()
def header_name_with_space(token: str) -> bytes:
    return mail(token, b"Bad Name: value", b"X Y Z: value")


@case()
def empty_header_name(token: str) -> bytes:
    return mail(token, b": no name", b":")


@case()
def continuation_as_first_line(token: str) -> bytes:
    return b"   folded before anything\r\n" + mail(token)


@case()
def garbage_from_address(token: str) -> bytes:
    return mail(token).replace(b"From: Me <" + OWNER + b">", b"From: <<<@@>>>, \"unterminated")


@case()
def from_without_address(token: str) -> bytes:
    return mail(token).replace(b"From: Me <" + OWNER + b">", b"From: Me")


@case()
def garbage_to(token: str) -> bytes:
    return mail(token, b"Cc: ;;;,,,<>@", b"Bcc: \"\"\"").replace(b"To: " + BOT, b"To: ;;;,,,")


@case()
def group_syntax_recipients(token: str) -> bytes:
    return mail(token).replace(b"To: " + BOT, b"To: undisclosed-recipients:;")


@case(refused=True)
def forged_from(token: str) -> bytes:
    return mail(token).replace(b"From: Me <" + OWNER + b">", b"From: boss@example.org")


# -- encodings --------------------------------------------------------------------------------


@case()  # searched as its raw text, which is all there is
def bad_base64_body(token: str) -> bytes:
    return mail(token, b"Content-Transfer-Encoding: base64", body=b"!!!not base64 at all " + token.encode())


@case(body=False)
def truncated_base64(token: str) -> bytes:
    return mail(token, b"Content-Transfer-Encoding: base64", body=b"SGVsbG8gd29ybG")


@case()
def bad_quoted_printable(token: str) -> bytes:
    body = b"=ZZ =\r\n=4 broken =C3=28 " + token.encode() + b" =\xff"
    return mail(token, b"Content-Transfer-Encoding: quoted-printable", body=body)


@case()
def unknown_transfer_encoding(token: str) -> bytes:
    return mail(token, b"Content-Transfer-Encoding: x-rot13")


@case()
def unknown_body_charset(token: str) -> bytes:
    return mail(token, b"Content-Type: text/plain; charset=x-no-such-charset")


@case()
def non_text_codec_as_charset(token: str) -> bytes:
    return mail(token, b"Content-Type: text/plain; charset=zlib_codec")


@case()
def charset_mismatch(token: str) -> bytes:
    return mail(token, b"Content-Type: text/plain; charset=utf-8",
                body=b"caf\xe9 and " + token.encode())


@case()
def rfc2047_bad_base64(token: str) -> bytes:
    return mail(token, subject=token.encode() + b" =?utf-8?b?AAAAA?=")


@case()
def rfc2047_unknown_charset(token: str) -> bytes:
    return mail(token, subject=token.encode() + b" =?x-unknown?q?caf=E9?=")


@case()
def rfc2047_bad_q(token: str) -> bytes:
    return mail(token, subject=token.encode() + b" =?utf-8?q?=ZZ=?= =?utf-8?q?=C3?=")


@case()
def rfc2047_unterminated(token: str) -> bytes:
    return mail(token, subject=token.encode() + b" =?utf-8?q?never_ends")


@case()
def rfc2047_unknown_encoding(token: str) -> bytes:
    return mail(token, subject=token.encode() + b" =?utf-8?x?abc?=")


@case(subject=False)
def rfc2047_whole_subject_broken(token: str) -> bytes:
    return mail(token, subject=b"=?utf-8?b?" + b"A" * 41 + b"?=")


@case()
def rfc2047_in_display_name(token: str) -> bytes:
    broken = b"From: =?utf-8?b?AAAAA?= =?x-bad?q?x?= <" + OWNER + b">"
    return mail(token).replace(b"From: Me <" + OWNER + b">", broken)


@case()
def rfc2231_bad_percent(token: str) -> bytes:
    part = text_part(token, b"Content-Type: text/plain; name*=utf-8''%ZZ%E2%82",
                     b"Content-Disposition: attachment; filename*=utf-8''%ZZ%")
    return multipart(token, text_part(token), part)


@case()
def rfc2231_unknown_charset(token: str) -> bytes:
    part = text_part(token, b"Content-Type: application/octet-stream",
                     b"Content-Disposition: attachment; filename*=x-unknown''abc%E9")
    return multipart(token, text_part(token), part)


@case()
def rfc2231_continuations_out_of_order(token: str) -> bytes:
    part = text_part(token, b"Content-Type: text/plain",
                     b"Content-Disposition: attachment; filename*2=c; filename*0=a; filename*7*=''x")
    return multipart(token, text_part(token), part)


@case()
def garbage_content_type(token: str) -> bytes:
    return mail(token, b"Content-Type: ;;;/;=\"")


@case()
def content_type_without_subtype(token: str) -> bytes:
    return mail(token, b"Content-Type: text")


@case()
def binary_content_type(token: str) -> bytes:
    return mail(token, b"Content-Type: text/\xff\xfe; charset=\"\x00")


# -- nesting ----------------------------------------------------------------------------------


@case(body=False)
def deep_multipart_950(token: str) -> bytes:
    return deep_multipart(token, 950)


@case(body=False)
def deep_rfc822_950(token: str) -> bytes:
    return deep_rfc822(token, 950)


@case(body=False)
def deep_multipart_5000(token: str) -> bytes:
    return deep_multipart(token, 5000)


@case()
def nested_just_deep_enough(token: str) -> bytes:
    return deep_multipart(token, 20)


@case()
def multipart_without_boundary(token: str) -> bytes:
    return mail(token, b"MIME-Version: 1.0", b"Content-Type: multipart/mixed")


@case()
def boundary_never_appears(token: str) -> bytes:
    return mail(token, b"MIME-Version: 1.0", b'Content-Type: multipart/mixed; boundary="nowhere"')


@case()
def missing_closing_boundary(token: str) -> bytes:
    return multipart(token, text_part(token), close=False)


@case()
def unterminated_part(token: str) -> bytes:
    return multipart(token, text_part(token), close=False)[:-2] + b" and then the connection"


@case(body=False)
def empty_multipart(token: str) -> bytes:
    return multipart(token)


@case()
def inner_reuses_outer_boundary(token: str) -> bytes:
    inner = b'Content-Type: multipart/alternative; boundary="b1"\r\n\r\n--b1\r\n' + text_part(token)
    return multipart(token, inner, text_part(token))


@case(body=False)
def empty_message_rfc822(token: str) -> bytes:
    return multipart(token, b"Content-Type: message/rfc822\r\n\r\n")


@case()
def digest_of_garbage(token: str) -> bytes:
    return multipart(token, b"not a mail at all", text_part(token), kind=b"digest")


@case()
def many_sibling_parts(token: str) -> bytes:
    return multipart(token, text_part(token), *(text_part("filler") for _ in range(3_000)))


@case(body=False)
def attachment_only(token: str) -> bytes:
    part = b"Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=a.bin\r\n" \
           b"Content-Transfer-Encoding: base64\r\n\r\nAAECAw=="
    return multipart(token, part).replace(b"preamble", b"preamble " + token.encode())


# -- sizes ------------------------------------------------------------------------------------


@case(refused=True)
def empty_mail(token: str) -> bytes:
    return b""


@case(refused=True)
def only_blank_lines(token: str) -> bytes:
    return b"\r\n\r\n\r\n"


@case(refused=True)
def headers_but_nothing_to_do(token: str) -> bytes:
    return b"From: " + OWNER + b"\r\nTo: " + BOT + b"\r\n\r\n"


@case()
def one_megabyte_single_line(token: str) -> bytes:
    return mail(token, body=token.encode() + b" " + b"z" * 1_000_000)


@case()
def one_megabyte_header_line(token: str) -> bytes:
    return mail(token, b"X-Huge: " + b"h" * 1_000_000)


# -- line endings -----------------------------------------------------------------------------


@case()
def bare_lf(token: str) -> bytes:
    return mail(token, eol=b"\n")


@case()
def bare_cr(token: str) -> bytes:
    return mail(token, eol=b"\r")


@case()
def mixed_line_endings(token: str) -> bytes:
    return b"From: " + OWNER + b"\nTo: " + BOT + b"\r\nSubject: " + token.encode() + b"\r\r\n\n" \
        + b"one\rtwo\nthree\r\n" + token.encode() + b"\n"


@case(subject=False)
def cr_cr_lf(token: str) -> bytes:
    return mail(token, eol=b"\r\r\n")


@case()
def no_final_line_end(token: str) -> bytes:
    return mail(token)[:-2]


@case()
def long_lf_text_file(token: str) -> bytes:
    lines = [b"line %d of an ordinary report" % i for i in range(200)]
    return mail(token, body=b"\n".join([*lines, token.encode()]), eol=b"\n")


# -- threading headers ------------------------------------------------------------------------


@case()
def garbage_references(token: str) -> bytes:
    return mail(token, b"References: <<<>>> <@> <a b c> not-an-id <" + b"\xff" * 10 + b">",
                b"In-Reply-To: ((( <")


@case()
def overlong_references(token: str) -> bytes:
    refs = b" ".join(b"<ref-%d@nowhere.example>" % i for i in range(20_000))
    return mail(token, b"References: " + refs)


@case()
def self_reference(token: str) -> bytes:
    own = b"<self-" + token.encode() + b"@client>"
    return mail(token, b"Message-ID: " + own, b"In-Reply-To: " + own, b"References: " + own)


@case()
def reference_loop_first(token: str) -> bytes:
    return mail(token, b"Message-ID: <loop-a@client>", b"References: <loop-b@client>")


@case()
def reference_loop_second(token: str) -> bytes:
    return mail(token, b"Message-ID: <loop-b@client>", b"References: <loop-a@client> <loop-b@client>",
                b"In-Reply-To: <loop-a@client>")


@case()
def in_reply_to_unknown(token: str) -> bytes:
    return mail(token, b"In-Reply-To: <never-seen@anywhere.example>")


@case()
def garbage_message_id(token: str) -> bytes:
    return mail(token, b"Message-ID: not an id at all")


@case()
def overlong_message_id(token: str) -> bytes:
    return mail(token, b"Message-ID: <" + b"m" * 50_000 + b"@client>")


@case()
def many_in_reply_to_ids(token: str) -> bytes:
    return mail(token, b"In-Reply-To: " + b" ".join(b"<irt-%d@x>" % i for i in range(2_000)))
