"""``[mailbox]``: local by default; in IMAP mode the account and the agents' plus-addresses."""

from __future__ import annotations

import pytest

from pizzamail.config import parse_config
from pizzamail.errors import ConfigError

FASTMAIL = {"mode": "imap", "imap": {"host": "imap.fastmail.com", "user": "me@example.com"}}


def test_local_is_the_default_and_keeps_the_addresses() -> None:
    config = parse_config({"agents": {"research": {}}})
    assert config.mailbox.mode == "local" and config.mailbox.imap.prefix == "pizzamail"
    assert [a.address for a in config.all_agents()] == ["bot@pizzamail.localhost",
                                                        "research@pizzamail.localhost"]


def test_imap_mode_answers_at_plus_addresses_of_the_owner() -> None:
    config = parse_config({"mailbox": FASTMAIL, "agents": {"research": {}}})
    imap = config.mailbox.imap
    assert (imap.host, imap.port, imap.security) == ("imap.fastmail.com", 993, "ssl")
    assert imap.prefix == "pizzamail"
    assert config.account.address == "me@example.com"
    assert [a.address for a in config.all_agents()] == ["me+bot@example.com", "me+research@example.com"]


def test_written_addresses_stay_in_imap_mode() -> None:
    config = parse_config({"mailbox": {**FASTMAIL, "imap": {**FASTMAIL["imap"], "user": "login-name"}},
                           "account": {"address": "me@example.org"},
                           "agent": {"address": "bot@example.org"}, "agents": {"research": {}}})
    assert [a.address for a in config.all_agents()] == ["bot@example.org", "me+research@example.org"]


@pytest.mark.parametrize(("mailbox", "key", "allowed"), [
    ({"mode": "imap"}, "mailbox.imap.host", "your IMAP server's host name"),
    ({"mode": "imap", "imap": {"host": "imap.example.com"}}, "mailbox.imap.user", "your login"),
    ({"mode": "imap", "imap": {"host": "imap.example.com", "user": "me"}}, "account.address",
     "your own address"),
    ({**FASTMAIL, "imap": {**FASTMAIL["imap"], "security": "none"}}, "mailbox.imap.security",
     "ssl or starttls"),
    ({"mode": "pop3"}, "mailbox.mode", "local, imap"),
    ({"imap": {"prefix": " "}}, "mailbox.imap.prefix", "a folder name"),
])
def test_what_imap_mode_needs_is_named(mailbox: dict[str, object], key: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"mailbox": mailbox})
    assert info.value.key == key and allowed in info.value.message


def test_plain_text_is_allowed_on_loopback_only() -> None:
    loopback = {"mode": "imap", "imap": {"host": "127.0.0.1", "port": 143, "security": "none",
                                         "user": "me@example.com"}}
    assert parse_config({"mailbox": loopback}).mailbox.imap.security == "none"
