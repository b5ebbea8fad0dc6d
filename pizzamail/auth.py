"""Who may log in: the one mail account of the owner, password from the secrets module.

SMTP and IMAP share this check so both refuse the same way. Comparison is constant-time.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Accounts:
    """The login names and passwords that may use our SMTP and IMAP servers."""

    user: str
    password: str
    #: the From addresses this account may submit as
    addresses: frozenset[str]

    def check(self, user: str | bytes, password: str | bytes) -> bool:
        if isinstance(user, bytes):
            user = user.decode("utf-8", "replace")
        if isinstance(password, bytes):
            password = password.decode("utf-8", "replace")
        user_ok = hmac.compare_digest(user.encode(), self.user.encode())
        password_ok = hmac.compare_digest(password.encode(), self.password.encode())
        return user_ok and password_ok

    def may_send_as(self, address: str) -> bool:
        return address.lower() in self.addresses
