"""kill -9 right after an APPEND into the user's own account, before pizzamail wrote it down: the
next start finds the mail by its Message-ID and never APPENDs a second copy."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pizzamail.config import load_config
from pizzamail.home import Home
from pizzamail.secrets import secret_store
from pizzamail.service import Service
from tests.dovecot import PASSWORD, Dovecot, running, unavailable
from tests.e2e.crash import CRASHED
from tests.e2e.harness import Served, serve_env
from tests.fakes.openai_server import FakeOpenAI, text
from tests.programs import needs
from tests.remote.test_service_imap import headers_in, serving, task_in_inbox

pytestmark = needs(unavailable())


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with running(special_use=True) as server:
        yield server


def config_text(dovecot: Dovecot, fake_openai: FakeOpenAI) -> str:
    return (f'[server]\nsmtp_port = 0\nimap_port = 0\nimaps_port = 0\nhttp_port = 0\n'
            f'[mailbox]\nmode = "imap"\n[mailbox.imap]\nhost = "127.0.0.1"\nport = {dovecot.port}\n'
            f'security = "none"\nuser = "me@example.com"\n'
            f'[agent]\nmodel = "openai:fake-model"\n'
            f'[providers.openai]\nbase_url = "{fake_openai.base_url}"\nmax_retries = 0\n')


def unfiled(home: Home) -> list[str]:
    with sqlite3.connect(home.database) as db:
        return [r[0] for r in db.execute("SELECT kind FROM messages WHERE filed = 0")]


async def test_kill_after_the_append_leaves_one_reply_in_the_inbox(
    dovecot: Dovecot, fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    home = Home(root=tmp_path / "home")
    home.create_dirs()
    (home.root / "config.toml").write_text(config_text(dovecot, fake_openai))
    secret_store(home).set("mailbox", PASSWORD)
    fake_openai.script([text("The offsite is on the 14th.")])
    await task_in_inbox(dovecot, home, "When is the offsite?")

    served = Served(home=home.root, env=serve_env(home.root))
    crashed = served.crash(crash_after="pizzamail.account.session:ImapSession.append~'INBOX'", timeout=120)
    assert crashed == CRASHED, "\n".join(served.output)
    assert unfiled(home) == ["reply"]  # APPENDed, not written down
    assert len(headers_in(dovecot, "INBOX")) == 2

    config = load_config(home.root / "config.toml")
    async with serving(Service(home=home, config=config, secrets=secret_store(home))):
        assert unfiled(home) == []  # the start files what is left, finding the reply by Message-ID
    inbox = headers_in(dovecot, "INBOX")
    assert [m["Subject"] for m in inbox] == ["Plan the offsite", "Re: Plan the offsite"]
