"""``pizzamail onboard``: the Apple profile, the Thunderbird XML and the snippets carry the right
host, ports, security, user and certificate (each file parsed as its client would)."""

from __future__ import annotations

import json
import plistlib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from pizzamail.cli import cli
from pizzamail.errors import PizzamailError
from pizzamail.home import Home
from pizzamail.onboard import Account, Listeners, autoconfig_xml, client_host
from pizzamail.secrets import secret_store
from pizzamail.tls import fingerprint

LISTENERS = Listeners(host="127.0.0.1", smtp=1587, imap=1143, imaps=1993, tls=True)


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)


def profile_of(home: Path, *args: str) -> tuple[dict[str, Any], Result]:
    out = home / "out.mobileconfig"
    result = run(home, "onboard", "--out", str(out), *args)
    assert result.exit_code == 0, result.output
    return plistlib.loads(out.read_bytes()), result


def payload(profile: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [p for p in profile["PayloadContent"] if p["PayloadType"] == kind]
    assert len(found) == 1
    return found[0]


def test_the_profile_holds_the_account_and_the_certificate_but_no_password(tmp_path: Path) -> None:
    run(tmp_path, "init")
    profile, result = profile_of(tmp_path)
    assert (profile["PayloadType"], profile["PayloadVersion"]) == ("Configuration", 1)
    mail = payload(profile, "com.apple.mail.managed")
    assert {key: value for key, value in mail.items() if not key.startswith("Payload")} == {
        "EmailAccountType": "EmailTypeIMAP", "EmailAccountDescription": "pizzamail",
        "EmailAddress": "me@pizzamail.localhost",
        "IncomingMailServerHostName": "127.0.0.1", "IncomingMailServerPortNumber": 1993,
        "IncomingMailServerUseSSL": True, "IncomingMailServerUsername": "me",
        "IncomingMailServerAuthentication": "EmailAuthPassword",
        "OutgoingMailServerHostName": "127.0.0.1", "OutgoingMailServerPortNumber": 1587,
        "OutgoingMailServerUseSSL": True, "OutgoingMailServerUsername": "me",
        "OutgoingMailServerAuthentication": "EmailAuthPassword",
        "OutgoingPasswordSameAsIncomingPassword": True,
    }
    pem = Home(root=tmp_path).tls_cert.read_bytes()
    root = payload(profile, "com.apple.security.root")
    der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    assert root["PayloadContent"] == der
    identifiers = [profile["PayloadIdentifier"], *(p["PayloadIdentifier"] for p in profile["PayloadContent"])]
    uuids = [profile["PayloadUUID"], *(p["PayloadUUID"] for p in profile["PayloadContent"])]
    assert len(set(identifiers)) == len(set(uuids)) == 3
    password = secret_store(Home(root=tmp_path)).account_password()
    assert password.encode() not in (tmp_path / "out.mobileconfig").read_bytes()
    assert "no password in it" in result.output
    assert result.stderr == ""  # 127.0.0.1 is one of the certificate's names


def test_asked_for_the_password_is_in_the_profile_and_the_file_private(tmp_path: Path) -> None:
    run(tmp_path, "init")
    profile, _ = profile_of(tmp_path, "--with-password")
    mail = payload(profile, "com.apple.mail.managed")
    password = secret_store(Home(root=tmp_path)).account_password()
    assert mail["IncomingPassword"] == mail["OutgoingPassword"] == password
    assert (tmp_path / "out.mobileconfig").stat().st_mode & 0o077 == 0


def test_a_second_profile_replaces_the_first(tmp_path: Path) -> None:
    """Same identifiers and UUIDs each time: installing it again updates the installed profile."""
    run(tmp_path, "init")
    first, _ = profile_of(tmp_path)
    again, _ = profile_of(tmp_path)
    assert first == again


def test_host_and_the_running_servers_ports_go_into_every_file(tmp_path: Path) -> None:
    run(tmp_path, "init")
    home = Home(root=tmp_path)
    home.state_file.write_text(json.dumps({"pid": 1, "host": "127.0.0.1", "smtp_port": 2587,
                                           "imap_port": 2143, "imaps_port": 2993, "http_port": 9025}))
    profile, result = profile_of(tmp_path, "--host", "mail.example.org")
    mail = payload(profile, "com.apple.mail.managed")
    incoming = mail["IncomingMailServerHostName"], mail["IncomingMailServerPortNumber"]
    outgoing = mail["OutgoingMailServerHostName"], mail["OutgoingMailServerPortNumber"]
    assert (incoming, outgoing) == (("mail.example.org", 2993), ("mail.example.org", 2587))
    out = result.output
    assert "http://mail.example.org:9025/autoconfig/v1.1/pizzamail.localhost" in out
    assert 'set folder = "imaps://me@mail.example.org:2993/"' in out
    assert 'set smtp_url = "smtp://me@mail.example.org:2587/"' in out
    assert f'set ssl_ca_certificates_file = "{home.tls_cert.resolve()}"' in out
    assert "source = imaps://me@mail.example.org:2993" in out
    assert "outgoing = smtp+plain://me@mail.example.org:2587" in out
    assert "warning: the certificate" in result.stderr and "not valid for mail.example.org" in result.stderr


def test_the_fingerprint_printed_is_the_certificates(tmp_path: Path) -> None:
    run(tmp_path, "init")
    _, result = profile_of(tmp_path)
    expected = fingerprint(Home(root=tmp_path).tls_cert)
    assert len(expected) == 95  # 32 bytes as hex pairs with colons
    assert f"certificate SHA-256 {expected}" in result.output


def test_without_a_certificate_onboard_names_init(tmp_path: Path) -> None:
    run(tmp_path, "init")
    Home(root=tmp_path).tls_cert.unlink()
    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "onboard"])
    assert isinstance(result.exception, PizzamailError)
    assert "fix: run `pizzamail init`" in result.exception.cli_message()


def servers(xml: bytes) -> list[dict[str, str]]:
    provider = ET.fromstring(xml).find("emailProvider")
    assert provider is not None
    return [{"kind": server.tag, "type": server.get("type", ""),
             **{child.tag: child.text or "" for child in server}}
            for server in provider if server.tag in ("incomingServer", "outgoingServer")]


def imap_smtp(*, host: str, imaps: int, imap: int, smtp: int) -> list[dict[str, str]]:
    """What Thunderbird should read: IMAP over TLS first, STARTTLS as the alternative, then SMTP."""
    common = {"hostname": host, "authentication": "password-cleartext", "username": "me"}
    return [
        {"kind": "incomingServer", "type": "imap", "port": str(imaps), "socketType": "SSL", **common},
        {"kind": "incomingServer", "type": "imap", "port": str(imap), "socketType": "STARTTLS", **common},
        {"kind": "outgoingServer", "type": "smtp", "port": str(smtp), "socketType": "STARTTLS", **common},
    ]


def test_the_autoconfig_xml_names_the_domain_and_each_server() -> None:
    xml = autoconfig_xml(Account(user="me", address="me@pizzamail.localhost", listeners=LISTENERS))
    root = ET.fromstring(xml)
    assert (root.tag, root.get("version")) == ("clientConfig", "1.1")
    assert [d.text for d in root.iter("domain")] == ["pizzamail.localhost"]
    assert servers(xml) == imap_smtp(host="127.0.0.1", imaps=1993, imap=1143, smtp=1587)


def test_without_tls_every_server_is_plain() -> None:
    plain = Listeners(host="127.0.0.1", smtp=1587, imap=1143, imaps=0, tls=False)
    xml = autoconfig_xml(Account(user="me", address="me@pizzamail.localhost", listeners=plain))
    assert [(s["port"], s["socketType"]) for s in servers(xml)] == [("1143", "plain"), ("1587", "plain")]


def test_a_bind_to_every_address_is_named_by_the_machines_name() -> None:
    assert client_host("0.0.0.0", "box") == "box"
    assert client_host("::", "box") == "box"
    assert client_host("192.168.1.5", "box") == "192.168.1.5"
