"""``onboard``: set up a mail client in one step: an Apple profile, Thunderbird, neomutt, aerc."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import click

from pizzamail.cli.app import App
from pizzamail.errors import PizzamailError
from pizzamail.home import write_private
from pizzamail.onboard import (
    AUTOCONFIG_BY_DOMAIN,
    AUTOCONFIG_PATHS,
    PASSWORD_COMMAND,
    Account,
    Listeners,
    aerc_snippet,
    certificate_names,
    client_host,
    mobileconfig,
    neomutt_snippet,
)
from pizzamail.tls import fingerprint


@click.command()
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default="pizzamail.mobileconfig",
              show_default=True, help="Where to write the Apple profile.")
@click.option("--host", help="The name clients reach this machine by (default: [server] host, or this "
                             "machine's name when that is every address).")
@click.option("--with-password", is_flag=True,
              help="Put the mail password in the profile (Mail then does not ask; keep the file private).")
@click.pass_obj
def onboard(app: App, out: Path, host: str | None, with_password: bool) -> None:
    """Set up a mail client: an Apple profile for Mail, Thunderbird, neomutt and aerc."""
    cert, _ = app.tls_paths()
    if not cert.exists():
        raise PizzamailError(f"no TLS certificate at {cert}", hint="run `pizzamail init` to make one")
    ports = _ports(app)
    named = host or client_host(app.config.server.host, socket.gethostname())
    account = Account(user=app.config.account.user, address=app.config.account.address,
                      listeners=Listeners(host=named, smtp=ports["smtp_port"], imap=ports["imap_port"],
                                          imaps=ports["imaps_port"], tls=True))
    password = app.secrets.account_password() if with_password else None
    pem = cert.read_bytes()
    write_private(out, mobileconfig(account, pem, password=password))
    click.echo(_guide(account, out.resolve(), cert.resolve(), with_password, http=ports["http_port"]))
    names = certificate_names(pem)
    if named.lower() not in (name.lower() for name in names):
        click.echo(f"warning: the certificate {cert} is not valid for {named} (only for {', '.join(names)}):"
                   f" clients will refuse it. Pass --host with one of those, or point [server] tls_cert"
                   f" and tls_key at a certificate for {named}.", err=True)


def _ports(app: App) -> dict[str, int]:
    """The ports of the running server (they are what answers), else those of config.toml."""
    server = app.config.server
    ports = {key: int(getattr(server, key)) for key in ("smtp_port", "imap_port", "imaps_port", "http_port")}
    try:
        state = json.loads(app.home.state_file.read_text())
    except (OSError, ValueError):
        return ports
    return {key: int(state.get(key) or port) for key, port in ports.items()}


def _guide(account: Account, profile: Path, cert: Path, with_password: bool, *, http: int) -> str:
    imap, smtp = account.imap[0], account.smtp
    asks = ("the password is in it: keep it private" if with_password
            else f"no password in it: Mail asks once; `{PASSWORD_COMMAND}` shows it")
    base = f"http://{account.host}:{http}"
    return f"""\
Account {account.address}, user {account.user}, on {account.host}:
  IMAP port {imap.port} ({imap.security}), SMTP port {smtp.port} ({smtp.security})
  certificate SHA-256 {fingerprint(cert)}
  (check it where a client asks you to trust the certificate)

Apple Mail (macOS, iOS): wrote {profile} ({asks})
  macOS: open it, then approve it in System Settings > Privacy & Security > Profiles.
  iOS: AirDrop or mail it to the device, install it in Settings > Profile Downloaded, then turn on
  Settings > General > About > Certificate Trust Settings > pizzamail.

Thunderbird: it asks for autoconfig only on ports 80/443 of {account.domain}, so point it here once:
  Settings > General > Config Editor: set mailnews.auto_config_url to {base}{AUTOCONFIG_BY_DOMAIN}
  then add the account {account.address}; it reads {base}{AUTOCONFIG_BY_DOMAIN}{account.domain}
  (also served: {base}{AUTOCONFIG_PATHS[0]}). Accept the certificate when asked.

neomutt or mutt (add to ~/.config/neomutt/neomuttrc or ~/.muttrc):
{neomutt_snippet(account, str(cert))}
aerc (add to ~/.config/aerc/accounts.conf; start it as SSL_CERT_FILE={cert} aerc to trust the certificate):
{aerc_snippet(account)}"""
