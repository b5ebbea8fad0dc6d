"""Fixtures of the watch tests: the remote IMAP server and the watch's password (helpers: watchtools)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pizzamail.secrets import SecretStore
from tests.triggers.watchtools import Remote, remote_server


@pytest.fixture
async def remote(tmp_path: Path) -> AsyncIterator[Remote]:
    async with remote_server(tmp_path / "remote") as server:
        yield server


@pytest.fixture
def secrets(tmp_path: Path) -> SecretStore:
    store = SecretStore(fallback=tmp_path / "secrets.json", scope="test", use_keyring=False)
    store.set("watch:remote", "pw")
    return store


@pytest.fixture(params=["sqlite", "postgresql"])
def store_backend(request: pytest.FixtureRequest) -> str:
    """This suite must hold on both engines."""
    return str(request.param)
