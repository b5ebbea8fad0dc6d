"""A private Dovecot as the owner's own mail server, with Sent, Drafts and Trash marked by SPECIAL-USE;
the owner me@example.com, the agent at me+bot@example.com."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pizzamail.config import AccountSettings, AgentSettings, Config, ProviderSettings, RunnerSettings
from tests.dovecot import Dovecot, running
from tests.fakes.openai_server import FakeOpenAI
from tests.inbox.owners import BOT, OWNER


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with running(special_use=True) as server:
        yield server


@pytest.fixture
def config(fake_openai: FakeOpenAI) -> Config:
    provider = ProviderSettings(base_url=fake_openai.base_url, key_env="OPENAI_API_KEY", max_retries=2,
                                timeout=30.0)
    return Config(account=AccountSettings(user="me", address=OWNER),
                  agent=AgentSettings(address=BOT, max_steps=4, name="Pizza Bot"),
                  runner=RunnerSettings(concurrency=2), providers={"openai": provider})
