"""The TLS certificate of the home folder: generated at init, used by IMAP and SMTP.

A self-signed certificate is what a single-user server on one's own machine can have; mail clients
ask once to trust it. A user with a real certificate points ``[server] tls_cert``/``tls_key`` at it.
The private key is written 0600 and never logged.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pizzamail.errors import ConfigError
from pizzamail.home import write_private

VALID_DAYS = 3650


def _names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(["localhost", "127.0.0.1", "::1", *hosts]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def generate_certificate(cert: Path, key: Path, *, hosts: list[str]) -> None:
    """A self-signed ECDSA P-256 certificate for ``hosts`` (and loopback)."""
    private = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "localhost"),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pizzamail (self-signed)")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(_names(hosts)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    write_private(key, private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ))
    write_private(cert, certificate.public_bytes(serialization.Encoding.PEM))


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server context with the library's secure defaults (TLS 1.2+)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            "server.tls_cert", str(cert), f"a readable PEM certificate with its key ({exc})",
            hint="run `pizzamail init` to generate one, or fix the paths in config.toml",
        ) from None
    return context


def certificate_days_left(cert: Path) -> int:
    certificate = x509.load_pem_x509_certificate(cert.read_bytes())
    left = certificate.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    return left.days


def fingerprint(cert: Path) -> str:
    """SHA-256 fingerprint as clients show it, so the user can check what they trust."""
    certificate = x509.load_pem_x509_certificate(cert.read_bytes())
    return certificate.fingerprint(hashes.SHA256()).hex(":").upper()
