"""Secrets: fallback file when there is no keyring, lookup order, actionable 'missing' message."""

from __future__ import annotations

import stat
from collections.abc import Iterator

import keyring
import keyring.backend
import keyring.errors
import pytest

from pizzamail.errors import SecretMissing
from pizzamail.home import Home
from pizzamail.secrets import ACCOUNT_PASSWORD, secret_store


def test_without_a_keyring_secrets_go_to_a_private_file(home: Home) -> None:
    store = secret_store(home)
    assert not store.use_keyring
    assert store.location == f"the file {home.secrets_file}"
    store.set("openai", "sk-test")
    assert stat.S_IMODE(home.secrets_file.stat().st_mode) == 0o600
    assert store.get("openai") == "sk-test"
    assert store.names() == ["openai"]
    assert store.delete("openai") and not store.delete("openai")


def test_lookup_prefers_stored_then_environment(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    store = secret_store(home)
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert store.lookup("openai", env="OPENAI_API_KEY") == "from-env"
    store.set("openai", "from-keyring")
    assert store.lookup("openai", env="OPENAI_API_KEY") == "from-keyring"


def test_missing_secret_names_the_fixing_command(home: Home) -> None:
    with pytest.raises(SecretMissing) as info:
        secret_store(home).lookup("anthropic", env="ANTHROPIC_API_KEY")
    assert "pizzamail keys set anthropic" in info.value.cli_message()
    assert "$ANTHROPIC_API_KEY" in info.value.message


def test_account_password_is_generated_once(home: Home) -> None:
    store = secret_store(home)
    assert store.ensure_account_password()
    first = store.get(ACCOUNT_PASSWORD)
    assert first and len(first) >= 20
    assert not store.ensure_account_password()
    assert store.account_password() == first


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A stand-in OS keyring: what a desktop's Secret Service or Keychain would hold."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.items.pop((service, username), None) is None:
            raise keyring.errors.PasswordDeleteError(username)


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def test_with_a_keyring_nothing_is_written_to_disk(home: Home, memory_keyring: MemoryKeyring) -> None:
    store = secret_store(home)
    assert store.use_keyring and "OS keyring" in store.location
    store.set("openai", "sk-kr")
    store.remember_name("openai", present=True)
    assert store.get("openai") == "sk-kr"
    assert store.names() == ["openai"]
    assert not home.secrets_file.exists()
    assert ("pizzamail", f"{home.root}:openai") in memory_keyring.items
    assert store.delete("openai") and not store.delete("openai")
