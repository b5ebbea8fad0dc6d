"""Automation senders ([senders.NAME]): their own SMTP login and address, tasks only, their own policy.

Real SMTP over loopback (smtplib against our intake), our IMAP server (imaplib), the runner with the
scripted model, and the CLI.
"""

from __future__ import annotations

import asyncio
import imaplib
import smtplib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from pizzamail.auth import accounts_for, sender_key
from pizzamail.cli import cli
from pizzamail.composer import MailContext
from pizzamail.config import Config, parse_config
from pizzamail.home import Home
from pizzamail.imap import ImapServer, Limits
from pizzamail.intake.smtp import IntakeHandler, start_smtp_server
from pizzamail.mailbox import Mailbox
from pizzamail.providers import ToolSpec
from pizzamail.secrets import ACCOUNT_PASSWORD, SecretStore, secret_store
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.tools import Offer, Offered, RunScope, ToolRegistry, ToolResult
from pizzamail.triggers.policy import run_rules
from tests.runner.test_runner_tools import Adder
from tests.test_intake import BOT, OWNER, count, mail, refused

CRON, NIGHTLY, CI = "cron@localhost", "nightly@localhost", "ci@localhost"
OWNER_PW, CRON_PW, NIGHTLY_PW = "secret-pw", "cron-pw-123", "nightly-pw-456"


def sender_config(**cron: Any) -> Config:
    """cron (enabled, password stored), nightly (password stored, disabled), ci (no password)."""
    return parse_config({"senders": {
        "cron": {"address": CRON, **cron},
        "nightly": {"address": NIGHTLY, "enabled": False},
        "ci": {"address": CI},
    }})


@pytest.fixture
def keys(home: Home) -> SecretStore:
    """The home's secrets with the owner's and two senders' passwords."""
    store = secret_store(home)
    store.set(ACCOUNT_PASSWORD, OWNER_PW)
    store.set(sender_key("cron"), CRON_PW)
    store.set(sender_key("nightly"), NIGHTLY_PW)
    return store


@asynccontextmanager
async def intake(store: Store, blobs: BlobStore, secrets: SecretStore, config: Config) -> AsyncIterator[int]:
    """Our SMTP intake with the logins the service would build from ``config``; yields its port."""
    handler = IntakeHandler(store=store, blobs=blobs, accounts=accounts_for(config, secrets),
                            agents=frozenset({BOT}), domain="pizzamail.localhost")
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=100_000)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def port(store: Store, blobs: BlobStore, keys: SecretStore) -> AsyncIterator[int]:
    async with intake(store, blobs, keys, sender_config()) as opened:
        yield opened


def as_cron(**kwargs: Any) -> dict[str, Any]:
    return {"login": ("cron", CRON_PW), "sender": CRON, **kwargs}


def submit(port: int, data: bytes, *, login: tuple[str, str], sender: str) -> tuple[int, str]:
    """One mail to the bot; the reply to its DATA."""
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        client.login(*login)
        client.mail(sender)
        client.rcpt(BOT)
        code, text = client.data(data)
        return code, text.decode()


# -- logins and addresses ---------------------------------------------------------------------


async def test_sender_mail_is_stored_with_a_queued_run_and_its_reply_continues_the_thread(
    port: int, store: Store
) -> None:
    first = await asyncio.to_thread(submit, port, mail(From=CRON, Message_ID="<n1@cron>"), **as_cron())
    assert first == (250, "2.0.0 stored as thread 1")
    follow = mail("Re: Summarise the report", "And today's?", From=CRON, Message_ID="<n2@cron>",
                  In_Reply_To="<n1@cron>", References="<n1@cron>")
    assert (await asyncio.to_thread(submit, port, follow, **as_cron()))[0] == 250
    rows = await store.fetchall("SELECT sender, thread_id FROM messages ORDER BY id")
    assert [(r["sender"], r["thread_id"]) for r in rows] == [(CRON, 1), (CRON, 1)]
    runs = await store.fetchall("SELECT status FROM runs")
    assert [r["status"] for r in runs] == ["queued", "queued"]


async def test_without_a_from_header_the_task_is_recorded_as_the_logins(port: int, store: Store) -> None:
    data = b"To: bot@pizzamail.localhost\r\nSubject: nightly digest\r\n\r\nsummarise\r\n"
    assert (await asyncio.to_thread(submit, port, data, **as_cron()))[0] == 250
    [row] = await store.fetchall("SELECT sender FROM messages")
    assert row["sender"] == CRON  # so its run gets cron's policy, not the owner's


@pytest.mark.parametrize("login", [("cron", "wrong"), ("nightly", NIGHTLY_PW), ("ci", "anything"),
                                   ("cron", OWNER_PW), ("me", CRON_PW)],
                         ids=["wrong-password", "disabled", "no-password-stored", "owner-password",
                              "owner-with-sender-password"])
async def test_sender_logins_that_fail_with_535(port: int, store: Store, login: tuple[str, str]) -> None:
    code, text = await asyncio.to_thread(refused, port, mail(From=CRON), login=login, sender=CRON)
    assert (code, "Authentication credentials invalid" in text) == (535, True)
    assert await count(store, "messages") == 0


async def test_a_password_made_while_serving_works_without_a_restart(
    port: int, store: Store, keys: SecretStore
) -> None:
    ci = {"login": ("ci", "made-later-789"), "sender": CI}
    assert (await asyncio.to_thread(refused, port, mail(From=CI), **ci))[0] == 535
    keys.set(sender_key("ci"), "made-later-789")  # `pizzamail account password --sender ci`
    assert (await asyncio.to_thread(submit, port, mail(From=CI), **ci))[0] == 250


@pytest.mark.parametrize(("kwargs", "text"), [
    (as_cron(sender=OWNER), f"<{OWNER}> may not send tasks here; send from your own address ({CRON})"),
    (as_cron(data=mail(From=OWNER)), f"From: <{OWNER}> is not your address ({CRON})"),
    ({"login": ("me", OWNER_PW), "sender": CRON}, f"<{CRON}> may not send tasks here"),
    ({"login": ("me", OWNER_PW), "data": mail(From=CRON)}, f"From: <{CRON}> is not your address ({OWNER})"),
], ids=["sender-envelope-as-owner", "sender-from-as-owner", "owner-envelope-as-sender",
        "owner-from-as-sender"])
async def test_nobody_submits_as_another_login(port: int, store: Store, kwargs: dict[str, Any],
                                               text: str) -> None:
    options = dict(kwargs)
    data = options.pop("data", mail(From=CRON))
    code, answer = await asyncio.to_thread(refused, port, data, **options)
    assert code == 550 and text in answer
    assert await count(store, "messages") == 0


@pytest.mark.parametrize("approve", [False, True])
async def test_sender_may_not_write_to_anyone_but_the_agent(
    store: Store, blobs: BlobStore, keys: SecretStore, approve: bool
) -> None:
    async with intake(store, blobs, keys, sender_config(approve=approve)) as opened:
        code, text = await asyncio.to_thread(refused, opened, mail(From=CRON), rcpt="friend@example.org",
                                             **as_cron())
    assert code == 550 and f"<{CRON}> may write only to the agent, not to <friend@example.org>" in text
    assert await count(store, "messages") == 0


async def test_imap_accepts_the_owner_but_not_a_sender(mailbox: Mailbox, keys: SecretStore) -> None:
    server = await ImapServer.start(host="127.0.0.1", port=0, mailbox=mailbox,
                                    accounts=accounts_for(sender_config(), keys),
                                    limits=Limits(login_delay=0.01))

    def login(user: str, password: str) -> str:
        with imaplib.IMAP4("127.0.0.1", server.port) as client:
            try:
                return str(client.login(user, password)[0])
            except imaplib.IMAP4.error as exc:
                return str(exc)

    try:
        assert await asyncio.to_thread(login, "me", OWNER_PW) == "OK"
        refusal = await asyncio.to_thread(login, "cron", CRON_PW)
        assert "[AUTHENTICATIONFAILED] Authentication failed." in refusal
        assert refusal == await asyncio.to_thread(login, "me", "wrong")  # exactly like a wrong password
    finally:
        await server.close()


# -- the sender's tool policy -----------------------------------------------------------------


def scope(rules: tuple[dict[str, str], ...], tmp_path: Path) -> RunScope:
    mail = MailContext(thread_id=1, run_id=1, subject="s", in_reply_to=None)
    return RunScope(run_id=1, thread_id=1, mail=mail, workspace=tmp_path, rules=rules)


class Lookup:
    spec = ToolSpec(name="lookup", description="Look something up.")

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(text="found")


class ServerRuled:
    """A source whose own rule (like ``[mcp.servers.NAME.policy]``) already made ``lookup`` auto."""

    def offer(self, scope: RunScope) -> Offer:
        return Offer(tools=[Offered(tool=Lookup(), policy="auto", source="srv", ruled=True)])


def test_a_senders_rules_beat_tools_policy_where_they_match(tmp_path: Path) -> None:
    # [tools.policy] does not override the source's own rule for lookup; the sender's rule does
    config = parse_config({"tools": {"policy": {"add": "auto", "lookup": "ask"}},
                           "senders": {"cron": {"address": CRON, "policy": {"*": "ask", "lookup": "deny"}}}})
    registry = ToolRegistry(rules=config.tools.policy)
    registry.add(Adder(), policy="deny")
    registry.add_source(ServerRuled())

    def policies(sender: str) -> dict[str, str]:
        box = registry.bind(scope(run_rules(config, sender=sender, sources=[None]), tmp_path))
        return {name: offered.policy for name, offered in box.tools.items()}

    assert policies(OWNER) == {"add": "auto", "lookup": "auto"}
    assert policies(CRON) == {"add": "ask", "lookup": "deny"}
    assert run_rules(config, sender="CRON@localhost", sources=[None]) == ({"*": "ask", "lookup": "deny"},)


# -- CLI --------------------------------------------------------------------------------------


def run(home: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], input=input, catch_exceptions=False)


def with_cron(tmp_path: Path) -> Path:
    run(tmp_path, "init")
    config = tmp_path / "config.toml"
    config.write_text(config.read_text() + f'\n[senders.cron]\naddress = "{CRON}"\n')
    return tmp_path


def test_account_password_for_a_sender_is_created_once_and_stored(tmp_path: Path) -> None:
    home = with_cron(tmp_path)
    first = run(home, "account", "password", "--sender", "cron")
    assert first.exit_code == 0
    password = first.stdout.strip()
    assert len(password) >= 20 and password != run(home, "account", "password").stdout.strip()
    assert "SMTP 127.0.0.1 port 1587, login cron, send from cron@localhost" in first.stderr
    assert run(home, "account", "password", "--sender", "cron").stdout.strip() == password
    assert secret_store(Home(root=home)).get("sender:cron") == password
    assert password not in (home / "config.toml").read_text()


def test_a_sender_password_can_be_set_with_keys_set(tmp_path: Path) -> None:
    home = with_cron(tmp_path)
    assert run(home, "keys", "set", "sender:cron", input="chosen-by-me\n").exit_code == 0
    assert run(home, "account", "password", "--sender", "cron").stdout.strip() == "chosen-by-me"


def test_account_password_for_an_unknown_sender_lists_the_configured_ones(tmp_path: Path) -> None:
    home = with_cron(tmp_path)
    result = run(home, "account", "password", "--sender", "nope")
    assert result.exit_code == 1
    assert "no sender 'nope' in config.toml; configured senders: cron" in result.output
    assert secret_store(Home(root=home)).get("sender:nope") is None


def test_doctor_reports_each_sender(tmp_path: Path) -> None:
    home = with_cron(tmp_path)
    before = run(home, "doctor").output
    assert "senders   cron (login cron, cron@localhost) no password: run" in before
    assert "`pizzamail account password --sender cron`" in before
    run(home, "account", "password", "--sender", "cron")
    assert "senders   cron (login cron, cron@localhost) password stored" in run(home, "doctor").output


async def test_a_sender_beyond_its_rate_is_told_to_retry_later(
    store: Store, blobs: BlobStore, keys: SecretStore
) -> None:
    async with intake(store, blobs, keys, sender_config(rate=2)) as opened:
        for n in range(2):
            data = mail(From=CRON, Message_ID=f"<r{n}@cron>")
            assert (await asyncio.to_thread(submit, opened, data, **as_cron()))[0] == 250
        code, text = await asyncio.to_thread(refused, opened, mail(From=CRON), **as_cron())
        assert (code, text) == (450, "4.7.1 sender cron may send 2 mails a minute; try again in a minute")
        owner = {"login": ("me", OWNER_PW), "sender": OWNER}
        assert (await asyncio.to_thread(submit, opened, mail(From=OWNER), **owner))[0] == 250  # not limited
    assert await count(store, "messages") == 3
    assert parse_config({"senders": {"cron": {"address": CRON}}}).senders["cron"].rate == 30
