"""Who may log in: the owner's mail account, and the programs configured as ``[senders.NAME]``.

SMTP accepts the owner and every enabled sender that has a password (keyring entry ``sender:NAME``);
IMAP accepts only the owner, since the mailbox is the owner's alone. Every check compares against
every login in constant time, so neither timing nor answer tells a guesser which login names exist.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pizzamail.config import Config
from pizzamail.secrets import SecretStore


def sender_key(name: str) -> str:
    """The keyring entry holding the password of ``[senders.NAME]``."""
    return f"sender:{name}"


def password_command(name: str) -> str:
    """The command that shows (and on first use creates) a sender's password."""
    return f"pizzamail account password --sender {name}"


def login_name(user: str | bytes) -> str:
    """A login name as the log shows it: quoted, short, one line (a client sends any bytes)."""
    text = user.decode("utf-8", "replace") if isinstance(user, bytes) else user
    return repr(text if len(text) <= 64 else text[:64] + "…")


def peer_text(peername: object) -> str:
    """A socket peer (``getpeername()``) as the log shows it: ``host:port``, ``[v6]:port``."""
    if isinstance(peername, tuple) and len(peername) >= 2:
        host = str(peername[0])
        return f"[{host}]:{peername[1]}" if ":" in host else f"{host}:{peername[1]}"
    return str(peername or "an unknown peer")


def _text(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "replace")


@dataclass(frozen=True, kw_only=True)
class Login:
    """One account that may submit mail by SMTP."""

    user: str
    password: str
    addresses: frozenset[str]
    """the From addresses it may submit as (lower case)"""
    sender: str = ""
    """the NAME of its ``[senders.NAME]`` section; empty for the owner"""
    approve: bool = True
    """its mail may decide approvals (the owner: still only from an address on the approver list)"""
    rate: int = 0
    """mails a minute it may send (a sender's ``rate``); the owner's are not limited"""

    @property
    def address(self) -> str:
        """The address named in refusals."""
        return min(self.addresses)

    def matches(self, user: str | bytes, password: str | bytes) -> bool:
        # both compared every time: no early exit that would time which of the two was wrong
        user_ok = hmac.compare_digest(_text(user), _text(self.user))
        password_ok = hmac.compare_digest(_text(password), _text(self.password))
        return bool(self.password) and user_ok and password_ok

    def may_send_as(self, address: str) -> bool:
        return address.lower() in self.addresses


@dataclass(frozen=True, kw_only=True)
class Accounts:
    """The logins of our SMTP and IMAP servers: the owner (both) and the senders (SMTP only)."""

    user: str
    password: str
    addresses: frozenset[str]
    """the From addresses the owner may submit as"""
    senders: Callable[[], tuple[Login, ...]] = tuple
    """enabled ``[senders.NAME]`` with a password, read at each login so that a password made
    while ``serve`` runs works at once"""

    @property
    def owner(self) -> Login:
        return Login(user=self.user, password=self.password, addresses=self.addresses)

    def check(self, user: str | bytes, password: str | bytes) -> bool:
        """The IMAP login: the owner only (a sender's login fails like a wrong password)."""
        return self.owner.matches(user, password)

    def smtp_login(self, user: str | bytes, password: str | bytes) -> Login | None:
        """The SMTP login these credentials are, or None."""
        found = None
        for login in (self.owner, *self.senders()):
            if login.matches(user, password) and found is None:  # no early exit: same time for all
                found = login
        return found


def accounts_for(config: Config, secrets: SecretStore) -> Accounts:
    account = config.account
    return Accounts(user=account.user, password=secrets.account_password(),
                    addresses=frozenset({account.address.lower()}),
                    senders=partial(sender_logins, config, secrets))


def sender_logins(config: Config, secrets: SecretStore) -> tuple[Login, ...]:
    """The senders that can log in: enabled, with a password in the keyring."""
    logins = []
    for name, sender in config.senders.items():
        password = secrets.get(sender_key(name)) if sender.enabled else None
        if password:
            logins.append(Login(user=sender.login(name), password=password, sender=name,
                                addresses=frozenset({sender.address.lower()}), approve=sender.approve,
                                rate=sender.rate))
    return tuple(logins)


def without_password(config: Config, secrets: SecretStore) -> list[str]:
    """Enabled senders that cannot log in because the keyring has no password for them."""
    return [name for name, s in config.senders.items() if s.enabled and not secrets.get(sender_key(name))]


def approvers(config: Config) -> frozenset[str]:
    """Who may decide approvals: ``[approvals] approvers``, and the senders with ``approve = true``."""
    return config.approvers | {s.address.lower() for s in config.senders.values() if s.approve}

