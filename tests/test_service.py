"""The service never exposes plain-text logins beyond loopback; TLS material from init."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest

from pizzamail.config import parse_config
from pizzamail.errors import ConfigError
from pizzamail.service import check_bind
from pizzamail.tls import fingerprint, generate_certificate, server_context


def test_loopback_binds_are_allowed_without_tls() -> None:
    check_bind(parse_config({"server": {"host": "127.0.0.1"}}), None)
    check_bind(parse_config({"server": {"host": "::1"}}), None)


def test_other_binds_need_tls(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        check_bind(parse_config({"server": {"host": "0.0.0.0"}}), None)
    assert info.value.key == "server.host"
    assert "certificate" in info.value.cli_message()
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    generate_certificate(cert, key, hosts=["mail.example"])
    check_bind(parse_config({"server": {"host": "0.0.0.0"}}), server_context(cert, key))


def test_generated_certificate_is_private_and_covers_loopback(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    generate_certificate(cert, key, hosts=["box"])
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    info = ssl._ssl._test_decode_cert(str(cert))  # type: ignore[attr-defined]
    names = {value for _, value in info["subjectAltName"]}
    assert {"localhost", "127.0.0.1", "box"} <= names
    assert len(fingerprint(cert).split(":")) == 32


def test_unreadable_certificate_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match="tls_cert"):
        server_context(tmp_path / "cert.pem", tmp_path / "key.pem")
