"""Mail client setup from one source: the account, the listeners as ``serve`` runs them, the certificate.

Each client gets its own form of the same facts: an Apple configuration profile (``.mobileconfig``,
macOS and iOS), Thunderbird's autoconfig XML (served by :mod:`pizzamail.web`), and config snippets
for neomutt/mutt and aerc. IMAP goes to the implicit-TLS port when there is one; SMTP submission
is STARTTLS on its one port; without a certificate (loopback only) both are plain.

The profile carries no password unless asked: Apple says a password belongs only in an encrypted
profile, and the file is easily mailed or AirDropped. Mail asks for it once instead.
"""

from __future__ import annotations

import ipaddress
import plistlib
import re
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization

#: the MIME type Apple devices open as a profile to install
MOBILECONFIG_TYPE = "application/x-apple-aspen-config"
#: where Thunderbird looks on the mail domain (ports 80/443 only) and where ``mailnews.auto_config_url``
#: points it at any host and port (it appends the domain)
AUTOCONFIG_PATHS = ("/.well-known/autoconfig/mail/config-v1.1.xml", "/mail/config-v1.1.xml")
AUTOCONFIG_BY_DOMAIN = "/autoconfig/v1.1/"
PASSWORD_COMMAND = "pizzamail account password"


@dataclass(frozen=True, kw_only=True)
class Listeners:
    """What clients connect to. ``imaps`` 0: no implicit-TLS port; ``tls``: STARTTLS is offered."""

    host: str
    smtp: int
    imap: int
    imaps: int
    tls: bool


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """One server as a client should use it. ``security``: ``SSL``, ``STARTTLS`` or ``plain``
    (Thunderbird's spelling)."""

    port: int
    security: str


@dataclass(frozen=True, kw_only=True)
class Account:
    """The owner's account as a mail client sees it."""

    user: str
    address: str
    listeners: Listeners

    @property
    def domain(self) -> str:
        return self.address.rpartition("@")[2]

    @property
    def host(self) -> str:
        """The name clients reach the servers by (see :func:`client_host`)."""
        return self.listeners.host

    @property
    def imap(self) -> list[Endpoint]:
        """IMAP endpoints, preferred first."""
        ports = self.listeners
        if not ports.tls:
            return [Endpoint(port=ports.imap, security="plain")]
        found = [Endpoint(port=ports.imaps, security="SSL")] if ports.imaps else []
        return [*found, Endpoint(port=ports.imap, security="STARTTLS")]

    @property
    def smtp(self) -> Endpoint:
        return Endpoint(port=self.listeners.smtp, security="STARTTLS" if self.listeners.tls else "plain")


def client_host(bound: str, hostname: str) -> str:
    """The host a client names: the bound address, unless that is every address (then ``hostname``)."""
    try:
        unspecified = ipaddress.ip_address(bound).is_unspecified
    except ValueError:
        return bound
    return hostname if unspecified else bound


# -- Thunderbird ---------------------------------------------------------------------------------

def autoconfig_xml(account: Account) -> bytes:
    """Thunderbird's ``config-v1.1.xml``: IMAP (each endpoint, preferred first) and SMTP."""
    root = ET.Element("clientConfig", version="1.1")
    provider = ET.SubElement(root, "emailProvider", id=account.domain)
    _text(provider, "domain", account.domain)
    _text(provider, "displayName", f"pizzamail ({account.address})")
    _text(provider, "displayShortName", "pizzamail")
    for endpoint in account.imap:
        _server(ET.SubElement(provider, "incomingServer", type="imap"), account, endpoint)
    _server(ET.SubElement(provider, "outgoingServer", type="smtp"), account, account.smtp)
    ET.indent(root)
    xml: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return xml + b"\n"


def _server(element: ET.Element, account: Account, endpoint: Endpoint) -> None:
    _text(element, "hostname", account.host)
    _text(element, "port", str(endpoint.port))
    _text(element, "socketType", endpoint.security)
    _text(element, "authentication", "password-cleartext")
    _text(element, "username", account.user)


def _text(parent: ET.Element, tag: str, text: str) -> None:
    ET.SubElement(parent, tag).text = text


# -- Apple ---------------------------------------------------------------------------------------

def mobileconfig(account: Account, certificate_pem: bytes, *, password: str | None = None) -> bytes:
    """An unsigned configuration profile: the mail account and the certificate as a trusted root.
    Its identifiers are stable, so installing a newer profile replaces the older one."""
    base = "localhost.pizzamail." + _label(f"{account.user}.{account.host}")
    der = certificate_der(certificate_pem)
    profile = {
        "PayloadType": "Configuration", "PayloadVersion": 1, "PayloadIdentifier": base,
        "PayloadUUID": _uuid(base), "PayloadDisplayName": f"pizzamail ({account.address})",
        "PayloadDescription": f"Your pizzamail account {account.address} at {account.host}, and the "
                              "certificate its servers present.",
        "PayloadOrganization": "pizzamail",
        "PayloadContent": [_mail_payload(account, f"{base}.mail", password),
                           _certificate_payload(der, f"{base}.certificate")],
    }
    return plistlib.dumps(profile, fmt=plistlib.FMT_XML)


def _mail_payload(account: Account, identifier: str, password: str | None) -> dict[str, object]:
    imap, smtp = account.imap[0], account.smtp
    payload: dict[str, object] = {
        "PayloadType": "com.apple.mail.managed", "PayloadVersion": 1, "PayloadIdentifier": identifier,
        "PayloadUUID": _uuid(identifier), "PayloadDisplayName": "pizzamail mail account",
        "EmailAccountType": "EmailTypeIMAP", "EmailAccountDescription": "pizzamail",
        "EmailAddress": account.address,
        "IncomingMailServerHostName": account.host, "IncomingMailServerPortNumber": imap.port,
        "IncomingMailServerUseSSL": imap.security != "plain", "IncomingMailServerUsername": account.user,
        "IncomingMailServerAuthentication": "EmailAuthPassword",
        "OutgoingMailServerHostName": account.host, "OutgoingMailServerPortNumber": smtp.port,
        "OutgoingMailServerUseSSL": smtp.security != "plain", "OutgoingMailServerUsername": account.user,
        "OutgoingMailServerAuthentication": "EmailAuthPassword",
        "OutgoingPasswordSameAsIncomingPassword": True,
    }
    if password is not None:
        payload["IncomingPassword"] = payload["OutgoingPassword"] = password
    return payload


def _certificate_payload(der: bytes, identifier: str) -> dict[str, object]:
    return {
        "PayloadType": "com.apple.security.root", "PayloadVersion": 1, "PayloadIdentifier": identifier,
        "PayloadUUID": _uuid(identifier), "PayloadDisplayName": "pizzamail certificate",
        "PayloadCertificateFileName": "pizzamail.cer", "PayloadContent": der,
    }


def _uuid(identifier: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, identifier)).upper()


def _label(text: str) -> str:
    """``text`` as reverse-DNS labels: letters, digits and hyphens between dots."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip(".-") or "account"


def certificate_der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


def certificate_names(pem: bytes) -> list[str]:
    """The host names and addresses the certificate is valid for (a client checks the host it
    connects to against these)."""
    try:
        names = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    addresses = [str(address) for address in names.get_values_for_type(x509.IPAddress)]
    return [*names.get_values_for_type(x509.DNSName), *addresses]


# -- terminal clients ----------------------------------------------------------------------------

def neomutt_snippet(account: Account, certificate: str) -> str:
    """Lines for ``neomuttrc`` (or ``.muttrc``); the password comes from pizzamail at start-up."""
    imap, smtp = account.imap[0], account.smtp
    scheme = "imaps" if imap.security == "SSL" else "imap"
    tls = smtp.security != "plain"
    return "\n".join([
        f'set folder = "{scheme}://{account.user}@{account.host}:{imap.port}/"',
        f'set imap_user = "{account.user}"',
        f'set imap_pass = "`{PASSWORD_COMMAND}`"',
        'set spoolfile = "+INBOX"', 'set record = "+Sent"', 'set postponed = "+Drafts"',
        'set trash = "+Trash"',
        f'set from = "{account.address}"',
        f'set smtp_url = "smtp://{account.user}@{account.host}:{smtp.port}/"',
        f'set smtp_pass = "`{PASSWORD_COMMAND}`"',
        f"set ssl_starttls = {'yes' if tls else 'no'}",
        f"set ssl_force_tls = {'yes' if tls else 'no'}",
        *([f'set ssl_ca_certificates_file = "{certificate}"'] if tls else []),
    ]) + "\n"


def aerc_snippet(account: Account) -> str:
    """An ``accounts.conf`` section. aerc up to 0.14 reads ``smtp://`` as plain text unless
    ``smtp-starttls`` is set; from 0.15 ``smtp://`` is STARTTLS and that key is not needed."""
    imap, smtp = account.imap[0], account.smtp
    user = account.user.replace("%", "%25").replace("@", "%40")
    source = {"SSL": "imaps", "STARTTLS": "imap", "plain": "imap+insecure"}[imap.security]
    outgoing = "smtp" if smtp.security != "plain" else "smtp+insecure"
    return "\n".join([
        "[pizzamail]",
        f"source = {source}://{user}@{account.host}:{imap.port}",
        f"source-cred-cmd = {PASSWORD_COMMAND}",
        f"outgoing = {outgoing}+plain://{user}@{account.host}:{smtp.port}",
        f"outgoing-cred-cmd = {PASSWORD_COMMAND}",
        *(["smtp-starttls = true"] if smtp.security == "STARTTLS" else []),
        f"from = {account.address}",
        "copy-to = Sent",
    ]) + "\n"
