"""Secrets: fallback file when there is no keyring, lookup order, actionable 'missing' message."""

from __future__ import annotations

import stat

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
