"""The service never exposes plain-text logins beyond loopback; TLS material from init."""

from __future__ import annotations

import errno
import os
import sqlite3
import ssl
import stat
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from pizzamail.config import parse_config
from pizzamail.errors import (
    ConfigError,
    HomeInUse,
    PizzamailError,
    PortUnavailable,
    Unavailable,
    transient,
)
from pizzamail.home import Home, serving
from pizzamail.secrets import secret_store
from pizzamail.service import Service, check_bind
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


def test_a_home_is_served_by_one_process_at_a_time(tmp_path: Path) -> None:
    home = Home(root=tmp_path / "home")
    with serving(home):
        assert home.serve_lock.read_text() == f"{os.getpid()}\n"
        with pytest.raises(HomeInUse) as info, serving(home):
            pass
        assert info.value.pid == os.getpid()
        assert info.value.cli_message().count("\n") == 0
    with serving(home):  # let go when the first one ends
        pass


def test_a_port_that_cannot_be_listened_on_names_its_key(tmp_path: Path) -> None:
    home = Home(root=tmp_path)
    service = Service(home=home, config=parse_config({"server": {"host": "192.0.2.1"}}),
                      secrets=secret_store(home))
    with pytest.raises(PortUnavailable) as info:
        service._listen(AsyncExitStack(), "imap_port")  # 192.0.2.1 is documentation's, no machine's
    assert info.value.cli_message() == (
        "error: cannot listen on 192.0.2.1 port 1143 for [server] imap_port (Cannot assign requested"
        " address); check [server] host and imap_port in config.toml")
    privileged = PortUnavailable("smtp_port", "127.0.0.1", 25, PermissionError(errno.EACCES, "denied"))
    assert privileged.message == ("port 25 for [server] smtp_port needs privileges pizzamail does not"
                                  " have; pick one above 1023 in config.toml")


def test_transient_tells_a_held_database_from_a_broken_query(tmp_path: Path) -> None:
    holder = sqlite3.connect(tmp_path / "db", isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(tmp_path / "db", timeout=0)
    with pytest.raises(sqlite3.OperationalError) as held:
        other.execute("INSERT INTO t VALUES (1)")
    holder.execute("ROLLBACK")
    with pytest.raises(sqlite3.OperationalError) as broken:
        other.execute("SELECT nothing FROM nowhere")
    holder.close()
    other.close()
    assert transient(held.value) and not transient(broken.value)
    assert transient(OSError(28, "No space left on device")) and not transient(ValueError("bug"))
    answer = Unavailable().http_response()
    assert (answer.status, answer.headers) == (503, {"Retry-After": "30"})
    assert PizzamailError("secret detail").http_response().body()["error"] == (
        "internal error (the details are in pizzamail's log)")
