"""The user's own IMAP account (``[mailbox] mode = "imap"``) as an :class:`Account`, and its password."""

from __future__ import annotations

from pizzamail.account.session import Account, AccountError
from pizzamail.config import ImapAccountSettings
from pizzamail.secrets import SecretStore

#: the password's keyring entry: ``pizzamail keys set mailbox``
SECRET = "mailbox"


def mailbox_account(settings: ImapAccountSettings, *, name: str = "mailbox") -> Account:
    """The account of ``[mailbox.imap]``; ``name`` tells its connections' worker threads apart."""
    return Account(name=name, host=settings.host, port=settings.port, security=settings.security,
                   user=settings.user, section="mailbox.imap", secret=SECRET, test="pizzamail mailbox test")


def mailbox_password(secrets: SecretStore) -> str:
    password = secrets.get(SECRET)
    if not password:
        raise AccountError("password", "your mailbox account has no password",
                           hint=f"set it with `pizzamail keys set {SECRET}`")
    return password
