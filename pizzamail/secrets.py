"""Credentials: the OS keyring first, a private file only when the machine has no keyring.

Lookup order for a secret is explicit: the keyring (or its fallback file), then the environment
variable named by the caller. A missing secret raises :class:`SecretMissing` naming the command that
stores it. Secret values are never logged; each value read or stored here is also registered with
:func:`pizzamail.logs.known_secret`, so that a slip is masked in the log.
"""

from __future__ import annotations

import json
import os
import secrets as _random
from dataclasses import dataclass, field
from pathlib import Path

import keyring
import keyring.backend
import keyring.errors

from pizzamail.errors import SecretMissing
from pizzamail.home import Home, write_private
from pizzamail.logs import known_secret

SERVICE = "pizzamail"
ACCOUNT_PASSWORD = "account-password"

# Backends that do not protect anything: the null backend and plain-text files.
_UNUSABLE = ("keyring.backends.fail", "keyring.backends.null", "keyrings.alt")


def _usable(backend: keyring.backend.KeyringBackend) -> bool:
    backends = getattr(backend, "backends", [backend])  # the chainer wraps several
    return any(
        not type(b).__module__.startswith(_UNUSABLE) and b.priority > 0 for b in backends
    )


@dataclass(kw_only=True)
class SecretStore:
    """Secrets of one home folder; ``scope`` keeps two homes on one keyring apart."""

    fallback: Path
    scope: str
    use_keyring: bool = field(default_factory=lambda: _usable(keyring.get_keyring()))

    @property
    def location(self) -> str:
        """Where secrets are kept, as shown to the user."""
        if self.use_keyring:
            return f"the OS keyring ({keyring.get_keyring().name})"
        return f"the file {self.fallback}"

    def _key(self, name: str) -> str:
        return f"{self.scope}:{name}"

    def get(self, name: str) -> str | None:
        if self.use_keyring:
            value = keyring.get_password(SERVICE, self._key(name))
        else:
            value = self._read_file().get(name)
        if value:
            known_secret(value)
        return value

    def set(self, name: str, value: str) -> None:
        known_secret(value)
        if self.use_keyring:
            keyring.set_password(SERVICE, self._key(name), value)
            return
        data = self._read_file()
        data[name] = value
        write_private(self.fallback, json.dumps(data, indent=1).encode())

    def delete(self, name: str) -> bool:
        if self.use_keyring:
            try:
                keyring.delete_password(SERVICE, self._key(name))
            except keyring.errors.PasswordDeleteError:
                return False
            return True
        data = self._read_file()
        if data.pop(name, None) is None:
            return False
        write_private(self.fallback, json.dumps(data, indent=1).encode())
        return True

    def names(self) -> list[str]:
        """Names of stored secrets; the keyring cannot list, so we keep an index of names."""
        if self.use_keyring:
            raw = keyring.get_password(SERVICE, self._key("__names__")) or "[]"
            return sorted(json.loads(raw))
        return sorted(self._read_file())

    def remember_name(self, name: str, present: bool) -> None:
        if not self.use_keyring:
            return
        names = set(self.names())
        (names.add if present else names.discard)(name)
        keyring.set_password(SERVICE, self._key("__names__"), json.dumps(sorted(names)))

    def lookup(self, name: str, *, env: str | None = None, command: str | None = None) -> str:
        """Keyring (or fallback file) first, then ``$env``; else :class:`SecretMissing`."""
        value = self.get(name)
        if not value and env:
            value = self.from_env(env)
        if not value:
            raise SecretMissing(name, command or f"pizzamail keys set {name}", env=env)
        return value

    def from_env(self, variable: str) -> str | None:
        """A secret from ``$variable`` (masked in the log like a stored one)."""
        value = os.environ.get(variable)
        if value:
            known_secret(value)
        return value

    def _read_file(self) -> dict[str, str]:
        try:
            data = json.loads(self.fallback.read_bytes())
        except FileNotFoundError:
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def account_password(self) -> str:
        return self.lookup(ACCOUNT_PASSWORD, command="pizzamail init")

    def ensure_account_password(self) -> bool:
        """Generate the mail account password on first use. True if it was created now."""
        if self.get(ACCOUNT_PASSWORD):
            return False
        self.set(ACCOUNT_PASSWORD, _random.token_urlsafe(18))
        return True


def secret_store(home: Home) -> SecretStore:
    return SecretStore(fallback=home.secrets_file, scope=str(home.root))
