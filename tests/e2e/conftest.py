"""Fixtures for end-to-end tests: a served pizzamail subprocess."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from pizzamail.home import Home
from pizzamail.secrets import secret_store
from tests.e2e.harness import SECRET, WHSEC, Served, serve_env, write_config
from tests.e2e.test_roundtrip import close_sessions
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
def served(tmp_path: Path, fake_openai: FakeOpenAI) -> Iterator[Served]:
    home = tmp_path / "home"
    write_config(home, base_url=fake_openai.base_url)
    server = Served(home=home, env=serve_env(home))
    yield server
    if server.proc is not None:
        server.stop()


@pytest.fixture(autouse=True)
async def _no_session_left_open() -> AsyncIterator[None]:
    yield
    await close_sessions()


LEDGER_SERVER = Path(__file__).parent / "servers" / "ledger.py"


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "ledger.txt"


@pytest.fixture
def served_ledger(tmp_path: Path, fake_openai: FakeOpenAI, ledger: Path) -> Iterator[Served]:
    home = tmp_path / "home"
    write_config(home, base_url=fake_openai.base_url)
    with (home / "config.toml").open("a") as config:
        config.write(f'\n[mcp.servers.ledger]\nenabled = true\ncommand = "{sys.executable}"\n'
                     f'args = ["{LEDGER_SERVER}"]\nenv = {{ LEDGER_FILE = "{ledger}" }}\n')
    server = Served(home=home, env=serve_env(home))
    yield server
    if server.proc is not None:
        server.stop()


@pytest.fixture
def served_hook(tmp_path: Path, fake_openai: FakeOpenAI) -> Iterator[Served]:
    home = tmp_path / "home"
    write_config(home, base_url=fake_openai.base_url)
    with (home / "config.toml").open("a") as config:
        config.write('\n[hooks.deploys]\nprompt = "Deploy {{ payload.version }} finished: check it"\n'
                     '[hooks.billing]\nauth = "standard"\n'
                     'prompt = "{{ payload.type }}: {{ payload.data.id }}"\n')
    secret_store(Home(root=home)).set("hook:deploys", SECRET)
    secret_store(Home(root=home)).set("hook:billing", WHSEC)
    server = Served(home=home, env=serve_env(home))
    yield server
    if server.proc is not None:
        server.stop()
