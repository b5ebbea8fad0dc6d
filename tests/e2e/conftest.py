"""Fixtures for end-to-end tests: a served pizzamail subprocess."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import Served, serve_env, write_config
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
