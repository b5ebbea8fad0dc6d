"""The log masks the secrets pizzamail loaded, wherever a slip puts one: message or exception."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pizzamail.home import Home
from pizzamail.logs import MASK, setup_logging
from pizzamail.secrets import SecretStore, secret_store

STORED = "sk-stored-7f3a9c1e5b"
FROM_ENV = "tok-env-2d4f6a8c0e"


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    """Where ``serve``'s logging writes once a test calls :func:`setup_logging`; undone after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield tmp_path / "pizzamail.log"
    for handler in root.handlers:
        handler.close()
    root.handlers[:], root.level = handlers, level


@pytest.fixture
def secrets(home: Home, monkeypatch: pytest.MonkeyPatch) -> SecretStore:
    home.secrets_file.write_text(json.dumps({"openai": STORED}))  # as an earlier `keys set` left it
    monkeypatch.setenv("WEBHOOK_TOKEN", FROM_ENV)
    return secret_store(home)


def entries(log_file: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in log_file.read_text().splitlines()]


def test_a_loaded_secret_is_masked_in_a_message_and_an_exception(
    log_file: Path, secrets: SecretStore, capsys: pytest.CaptureFixture[str]
) -> None:
    setup_logging(log_file.parent)  # here, not in a fixture: the terminal handler takes capsys's stderr
    key, token = secrets.lookup("openai"), secrets.lookup("webhook", env="WEBHOOK_TOKEN")
    log = logging.getLogger("pizzamail.test")
    log.info("calling with key %s and token %s", key, token)
    try:
        raise RuntimeError(f"the server refused {key}")
    except RuntimeError:
        log.exception("request failed for %s", token)

    said, failed = entries(log_file)
    assert said["message"] == f"calling with key {MASK} and token {MASK}"
    assert failed["message"] == f"request failed for {MASK}"
    assert f"RuntimeError: the server refused {MASK}" in failed["exception"]
    terminal = capsys.readouterr().err
    assert f"the server refused {MASK}" in terminal
    everything = log_file.read_text() + terminal
    assert STORED not in everything and FROM_ENV not in everything


def test_other_text_and_a_short_value_are_left_alone(log_file: Path, home: Home) -> None:
    setup_logging(log_file.parent)
    store = secret_store(home)
    store.set("tiny", "pw")  # too short to mask without blanking ordinary words
    logging.getLogger("pizzamail.test").info("password %s for %s", store.lookup("tiny"), "me")
    [entry] = entries(log_file)
    assert entry["message"] == "password pw for me"
