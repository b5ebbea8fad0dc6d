"""Runner fixtures: the fake model server, a config pointing at it, and a runner to drive."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import SMTP, default
from email.utils import make_msgid
from typing import Any

import pytest

from pizzamail.config import AgentSettings, Config, ProviderSettings, RunnerSettings
from pizzamail.home import Home
from pizzamail.intake.tasks import store_task
from pizzamail.mail.parse import parse_mail
from pizzamail.mailbox import Mailbox
from pizzamail.providers import Provider, provider_for
from pizzamail.runner import Runner
from pizzamail.secrets import SecretStore, secret_store
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.location import workspaces_for
from tests.fakes.openai_server import FakeOpenAI  # its fixture is a plugin (tests/conftest.py)

TIMEOUT = 10.0


@pytest.fixture
def secrets(home: Home) -> SecretStore:
    store = secret_store(home)
    store.set("openai", "sk-test-123")
    return store


@pytest.fixture
def config(fake_openai: FakeOpenAI) -> Config:
    provider = ProviderSettings(base_url=fake_openai.base_url, key_env="OPENAI_API_KEY",
                                max_retries=2, timeout=30.0)  # only a hang may time out
    return Config(agent=AgentSettings(max_steps=4, name="Pizza Bot"),
                  runner=RunnerSettings(concurrency=2), providers={"openai": provider})


@dataclass(kw_only=True)
class Harness:
    """A runner over the test's store and mailbox, with the provider's sleeps recorded."""

    store: Store
    mailbox: Mailbox
    blobs: BlobStore
    config: Config
    secrets: SecretStore
    home: Home
    sleeps: list[float] = field(default_factory=list)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def provider(self) -> Provider:
        return provider_for(self.config, self.secrets, sleep=self.sleep)

    def runner(self, **options: Any) -> Runner:
        options.setdefault("provider_factory", self.provider)
        options.setdefault("workspaces", workspaces_for(self.home, self.store))
        return Runner(store=self.store, mailbox=self.mailbox, blobs=self.blobs, config=self.config,
                      **options)

    @asynccontextmanager
    async def running(self, **options: Any) -> AsyncIterator[Runner]:
        runner = self.runner(**options)
        await runner.start()
        try:
            yield runner
        finally:
            await runner.stop()

    def with_config(self, **sections: Any) -> Harness:
        return replace(self, config=replace(self.config, **sections))

    async def task(self, body: str, *, subject: str = "Summarise issues",
                   reply_to: str | None = None, refs: list[str] | None = None) -> int:
        """A task mail stored as intake stores it; returns its run id."""
        raw = task_mail(body, subject=subject, reply_to=reply_to, refs=refs or [])
        stored = await store_task(self.store, self.blobs, raw, parse_mail(raw),
                                  agent=self.config.agent.address, domain=self.config.domain)
        assert stored.run_id is not None
        return stored.run_id

    async def finish(self, runner: Runner, run_id: int) -> str:
        runner.wake()
        return await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT)


def task_mail(body: str, *, subject: str, reply_to: str | None, refs: list[str]) -> bytes:
    msg = EmailMessage(policy=SMTP)
    msg["From"] = "me@pizzamail.localhost"
    msg["To"] = "bot@pizzamail.localhost"
    msg["Subject"] = subject
    msg["Message-ID"] = make_msgid(domain="client.example")
    if reply_to:
        msg["In-Reply-To"] = f"<{reply_to}>"
        msg["References"] = " ".join(f"<{r}>" for r in [*refs, reply_to])
    msg.set_content(body)
    return msg.as_bytes()


@pytest.fixture
def harness(store: Store, mailbox: Mailbox, blobs: BlobStore, config: Config,
            secrets: SecretStore, home: Home) -> Harness:
    return Harness(store=store, mailbox=mailbox, blobs=blobs, config=config, secrets=secrets, home=home)




async def bot_mails(mailbox: Mailbox) -> list[tuple[frozenset[str], EmailMessage]]:
    """The bot's mails in INBOX as (flags, parsed message), oldest first."""
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    found = []
    for row in await mailbox.messages(inbox):
        msg = message_from_bytes(await mailbox.read(inbox, row) or b"", policy=default)
        assert isinstance(msg, EmailMessage)
        if msg["X-Pizzamail-Kind"]:
            found.append((row.flags, msg))
    return found


def plain(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


def html(msg: EmailMessage) -> str:
    part = msg.get_body(("html",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


@pytest.fixture(params=["sqlite", "postgresql"])
def store_backend(request: pytest.FixtureRequest) -> str:
    """This suite must hold on both engines."""
    return str(request.param)
