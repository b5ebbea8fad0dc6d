"""Who wrote a mail found in the owner's own mailbox: Authentication-Results read strictly (only the
configured server's topmost field), the Sent folder as proof, and a reused Message-ID refused."""

from __future__ import annotations

import asyncio

from pizzamail.intake.owner import Verdict, check_owner, same_text
from pizzamail.mail.authres import parse_authres, trusted, vouches_for
from pizzamail.mail.parse import parse_bytes, parsed_mail

OWNER = "me@example.com"
APPROVERS = frozenset({OWNER, "boss@corp.example"})


def test_authres_reads_methods_properties_and_drops_comments() -> None:
    found = parse_authres("mx.example.com 1; spf=pass smtp.mailfrom=example.net;"
                          " dkim=pass (good sig) header.d=Example.net header.s=sel1;"
                          ' dmarc=pass (p=none) header.from="example.net"')
    assert found is not None and found.authserv_id == "mx.example.com"
    methods = [(r.method, r.result) for r in found.results]
    assert methods == [("spf", "pass"), ("dkim", "pass"), ("dmarc", "pass")]
    assert found.results[1].props == {"header.d": "Example.net", "header.s": "sel1"}
    assert found.results[2].props == {"header.from": "example.net"}


def test_authres_none_and_empty() -> None:
    found = parse_authres("mx.example.com; none")
    assert found is not None and found.results == ()
    assert parse_authres("  ") is None


def test_only_the_topmost_field_of_the_configured_server_counts() -> None:
    fields = ["mx.example.com; dmarc=fail header.from=example.com",
              "mx.example.com; dmarc=pass header.from=example.com",  # forged below the real one
              "evil.example; dmarc=pass header.from=example.com"]
    top = trusted(fields, "MX.example.com")
    assert top is not None and vouches_for(top, "example.com") is None
    assert trusted(fields, "") is None
    assert trusted(fields[2:], "mx.example.com") is None


def test_dkim_counts_only_for_the_senders_own_domain() -> None:
    other = parse_authres("mx.example.com; dkim=pass header.d=mailer.example")
    own = parse_authres("mx.example.com; dkim=pass header.i=@example.com")
    assert other is not None and vouches_for(other, "example.com") is None
    assert own is not None
    assert vouches_for(own, "example.com") == "dkim=pass (d=example.com) from mx.example.com"
    dmarc_other = parse_authres("mx.example.com; dmarc=pass header.from=other.example")
    assert dmarc_other is not None and vouches_for(dmarc_other, "example.com") is None


class Sent:
    def __init__(self, mails: dict[str, bytes]) -> None:
        self.mails = mails
        self.asked: list[str] = []

    async def copy_of(self, message_id: str) -> bytes | None:
        self.asked.append(message_id)
        return self.mails.get(message_id)


def mail(sender: str, body: str = "approve", *, extra: str = "") -> bytes:
    return (f"{extra}From: {sender}\r\nTo: me+bot@example.com\r\nMessage-ID: <m1@example.com>\r\n"
            f"Subject: Re: request\r\n\r\n{body}\r\n").encode()


def check(raw: bytes, sent: Sent, authserv_id: str = "mx.example.com") -> Verdict:
    msg = parse_bytes(raw)
    return asyncio.run(check_owner(msg, parsed_mail(msg), raw, owner=OWNER, approvers=APPROVERS,
                                   authserv_id=authserv_id, sent=sent))


def test_the_owners_mail_found_in_sent_is_the_owners() -> None:
    sent_copy = mail(OWNER).replace(b"\r\n", b"\n")
    delivered = mail(OWNER, extra="Delivered-To: me+bot@example.com\r\nReceived: from x\r\n")
    verdict = check(delivered, Sent({"m1@example.com": sent_copy}))
    assert verdict == Verdict(owner=True, why="found in Sent")


def test_a_spoofed_owner_mail_not_in_sent_is_an_outsiders() -> None:
    verdict = check(mail(OWNER), Sent({}))
    assert not verdict.owner
    assert "not found in Sent" in verdict.why


def test_a_reused_message_id_with_other_words_is_refused() -> None:
    verdict = check(mail(OWNER, "approve"), Sent({"m1@example.com": mail(OWNER, "see you at lunch")}))
    assert verdict == Verdict(owner=False, why="its Message-ID is in Sent, but that mail's text differs")


def test_authentication_results_of_the_trusted_server_vouch_without_sent() -> None:
    sent = Sent({})
    raw = mail(OWNER, extra="Authentication-Results: mx.example.com; dmarc=pass header.from=example.com\r\n")
    assert check(raw, sent).owner
    assert sent.asked == []  # no IMAP round trip needed
    assert not check(raw, sent, authserv_id="").owner


def test_another_approver_needs_authentication_results() -> None:
    boss = "boss@corp.example"
    sent = Sent({"m1@example.com": mail(boss)})
    assert not check(mail(boss), sent).owner
    assert sent.asked == []  # the account's Sent holds only the owner's mail
    passed = mail(boss, extra="Authentication-Results: mx.example.com; dkim=pass header.d=corp.example\r\n")
    assert check(passed, sent).owner


def test_a_stranger_is_never_the_owner() -> None:
    raw = mail("eve@evil.example", extra="Authentication-Results: mx.example.com; dmarc=pass\r\n")
    verdict = check(raw, Sent({"m1@example.com": raw}))
    assert verdict == Verdict(owner=False, why="<eve@evil.example> is not an approver")


def test_same_text_ignores_line_ends_and_trailing_space_only() -> None:
    assert same_text(b"A: 1\r\n\r\nhello \r\nworld\r\n\r\n", b"A: 1\nB: 2\n\nhello\nworld\n")
    assert not same_text(b"A: 1\n\nhello\n", b"A: 1\n\nhello!\n")
