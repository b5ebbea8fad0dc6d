"""Which agent a mail in the owner's INBOX is for, when the agents live at plus-addresses of the
owner's own address; and the rules a run on an outsider's mail gets."""

from __future__ import annotations

from email.message import EmailMessage

from pizzamail.approvals.decide import plus_token
from pizzamail.config import Config
from pizzamail.intake.inbox import addressed, agent_reached, reaches_an_agent
from pizzamail.mail.parse import parse_bytes
from pizzamail.triggers.policy import OUTSIDE_DEFAULT, on_outside_content, run_rules

AGENTS = frozenset({"me+bot@example.com", "me+research@example.com"})


def test_an_agent_and_its_request_addresses_are_reached_the_owner_is_not() -> None:
    assert agent_reached("Me+Bot@Example.com", AGENTS) == "me+bot@example.com"
    assert agent_reached("me+bot+Xy7Q@example.com", AGENTS) == "me+bot@example.com"
    assert agent_reached("me+research+n1@example.com", AGENTS) == "me+research@example.com"
    assert agent_reached("me@example.com", AGENTS) is None
    assert agent_reached("me+botany@example.com", AGENTS) is None
    assert agent_reached("me+bot@other.example", AGENTS) is None


def test_a_request_nonce_is_the_last_plus_part_in_its_own_case() -> None:
    assert plus_token("me+bot+Xy7Q@example.com") == "Xy7Q"
    assert plus_token("bot+Xy7Q@pizzamail.localhost") == "Xy7Q"
    assert plus_token("bot@pizzamail.localhost") is None


def head(headers: str) -> EmailMessage:
    return parse_bytes(f"{headers}From: me@example.com\r\nSubject: s\r\n\r\nhi\r\n".encode())


def test_to_runs_cc_only_records_a_bcc_runs() -> None:
    to = addressed(head("To: Me <me+research@example.com>, me+bot@example.com\r\n"), AGENTS)
    assert to is not None and (to.agent, to.runs) == ("me+research@example.com", True)
    cc = addressed(head("To: friend@example.net\r\nCc: me+bot@example.com\r\n"), AGENTS)
    assert cc is not None and (cc.agent, cc.runs) == ("me+bot@example.com", False)
    bcc = addressed(head("To: friend@example.net\r\nDelivered-To: me+bot@example.com\r\n"), AGENTS)
    assert bcc is not None and (bcc.agent, bcc.runs) == ("me+bot@example.com", True)
    assert addressed(head("To: me@example.com\r\n"), AGENTS) is None


def test_recipients_keep_their_case_for_the_nonce() -> None:
    to = addressed(head("To: me+bot+Xy7Q@example.com\r\n"), AGENTS)
    assert to is not None and to.recipients == ("me+bot+Xy7Q@example.com",)


def test_an_outsiders_mail_runs_under_the_outsider_rules() -> None:
    source = "mailbox:me+bot@example.com"
    assert run_rules(Config(), sender="me@example.com", sources=[source]) == (OUTSIDE_DEFAULT,)
    assert on_outside_content([source])


def test_the_addressing_headers_alone_say_whether_a_mail_is_fetched() -> None:
    assert not reaches_an_agent(b"To: me@example.com\r\nCc: Ann <ann@example.net>\r\n\r\n", AGENTS)
    assert reaches_an_agent(b"To: me@example.com\r\nDelivered-To: me+bot@example.com\r\n", AGENTS)
    assert reaches_an_agent(b"Cc: me+research+n1@example.com", AGENTS)
    assert not reaches_an_agent(b"", AGENTS)
