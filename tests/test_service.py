"""The service refuses to expose plain-text logins beyond loopback."""

from __future__ import annotations

import pytest

from pizzamail.config import parse_config
from pizzamail.errors import ConfigError
from pizzamail.service import check_bind


def test_loopback_binds_are_allowed() -> None:
    check_bind(parse_config({"server": {"host": "127.0.0.1"}}))
    check_bind(parse_config({"server": {"host": "::1"}}))


def test_other_binds_are_refused_until_tls_exists() -> None:
    with pytest.raises(ConfigError) as info:
        check_bind(parse_config({"server": {"host": "0.0.0.0"}}))
    assert info.value.key == "server.host"
    assert "TLS" in info.value.cli_message()
