"""Specialist agents: their config, routing by address at intake, and their tools and policy."""

from __future__ import annotations

import asyncio
import email.policy
import smtplib
from collections.abc import AsyncIterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pizzamail.cli import cli
from pizzamail.composer import MailContext
from pizzamail.config import parse_config
from pizzamail.errors import ConfigError
from pizzamail.intake.smtp import IntakeHandler, addressed_agent, start_smtp_server
from pizzamail.mail.parse import parse_bytes
from pizzamail.providers.types import ToolSpec
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.tools import RunScope, ToolRegistry, ToolResult
from pizzamail.tools.policy import overlay
from tests.test_intake import ACCOUNTS, OWNER

BOT, RESEARCH = "bot@pizzamail.localhost", "research@pizzamail.localhost"
AGENTS = frozenset({BOT, RESEARCH})


# -- config ---------------------------------------------------------------------------------------


def test_a_specialist_gets_the_main_agents_defaults_and_its_own_address() -> None:
    config = parse_config({"agent": {"model": "openai:main-model", "max_steps": 7},
                           "agents": {"research": {"name": "Research", "tools": ["web__*"],
                                                   "max_tokens": 99}}})
    research = config.agent_at("Research@pizzamail.localhost")
    assert research is not None
    assert (research.address, research.name, research.model) == (RESEARCH, "Research", "openai:main-model")
    assert (research.max_steps, research.max_tokens, research.delegate) == (7, 99, False)
    assert research.offers_tool("web__fetch") and not research.offers_tool("remember")
    assert config.agent_at(None) == config.main_agent and config.main_agent.delegate
    assert config.agent_at("nobody@pizzamail.localhost") is None


@pytest.mark.parametrize(("research", "key", "allowed"), [
    ({"address": BOT}, "agents.research.address", "other than agent.address's"),
    ({"address": "me@pizzamail.localhost"}, "agents.research.address", "other than account.address's"),
    ({"address": "research@elsewhere.org"}, "agents.research.address", "an address at pizzamail.localhost"),
    ({"instructions_file": "agents/missing.md"}, "agents.research.instructions_file", "a readable"),
    ({"instructions": "x", "instructions_file": "a.md"}, "agents.research.instructions_file", "not both"),
    ({"model": "gpt"}, "agents.research.model", "provider:model"),
    ({"colour": "red"}, "agents.research.colour", "research"),
])
def test_a_wrong_specialist_section_names_the_key_and_the_fix(
    tmp_path: Path, research: dict[str, Any], key: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"agents": {"research": research}}, home=tmp_path)
    assert caught.value.key == key and allowed in str(caught.value), str(caught.value)


def test_two_specialists_may_not_share_an_address() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"agents": {"research": {}, "other": {"address": RESEARCH}}})
    assert caught.value.key == "agents.other.address"


def test_instructions_file_is_read_relative_to_the_home(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "research.md").write_text("Cite every source.\n")
    config = parse_config({"agents": {"research": {"instructions_file": "agents/research.md"}}},
                          home=tmp_path)
    research = config.agent_at(RESEARCH)
    assert research is not None and research.instructions == "Cite every source.\n"


def test_schedules_hooks_and_watches_take_a_model() -> None:
    config = parse_config({
        "schedules": {"news": {"when": "every day at 8", "prompt": "news", "model": "openai:small"}},
        "hooks": {"deploys": {"model": "anthropic:big"}},
        "watches": {"inbox": {"host": "imap.example.org", "user": "u", "model": "openai:w"}},
    })
    assert config.schedules["news"].model == "openai:small"
    assert config.hooks["deploys"].model == "anthropic:big"
    assert config.watches["inbox"].model == "openai:w"


# -- routing --------------------------------------------------------------------------------------


def _headers(**headers: str) -> EmailMessage:
    msg = EmailMessage()
    for name, value in headers.items():
        msg[name] = value
    return parse_bytes(msg.as_bytes())


@pytest.mark.parametrize(("rcpts", "headers", "runs"), [
    ([RESEARCH], {"To": RESEARCH}, RESEARCH),
    (["research+x@pizzamail.localhost"], {"To": "Research <research+x@pizzamail.localhost>"}, RESEARCH),
    ([BOT, RESEARCH], {"To": BOT, "Cc": RESEARCH}, BOT),
    ([RESEARCH, BOT], {"To": BOT, "Cc": RESEARCH}, BOT),
    ([RESEARCH], {"To": OWNER, "Cc": RESEARCH}, None),
    ([RESEARCH], {"Cc": RESEARCH}, None),
    ([RESEARCH], {"To": "someone@example.org"}, RESEARCH),  # a Bcc
])
def test_the_agent_in_to_runs_and_one_only_in_cc_does_not(
    rcpts: list[str], headers: dict[str, str], runs: str | None
) -> None:
    assert addressed_agent(rcpts, _headers(**headers), AGENTS) == runs


@pytest.fixture
async def smtp_port(store: Store, blobs: BlobStore) -> AsyncIterator[int]:
    handler = IntakeHandler(store=store, blobs=blobs, accounts=ACCOUNTS, agents=AGENTS,
                            domain="pizzamail.localhost")
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=100_000)
    yield int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()


def _send(port: int, rcpts: list[str], **headers: str) -> tuple[int, bytes]:
    msg = EmailMessage()
    msg["From"], msg["Subject"] = OWNER, "Sources on tides"
    for name, value in headers.items():
        msg[name] = value
    msg.set_content("Find three.")
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        client.login("me", "secret-pw")
        client.mail(OWNER)
        for rcpt in rcpts:
            client.rcpt(rcpt)
        return client.data(msg.as_bytes(policy=email.policy.SMTP))


async def test_mail_to_a_specialist_queues_a_run_of_that_agent(smtp_port: int, store: Store) -> None:
    code, _ = await asyncio.to_thread(_send, smtp_port, [RESEARCH], To=RESEARCH)
    assert code == 250
    [run] = await store.fetchall("SELECT agent, status FROM runs")
    assert (run["agent"], run["status"]) == (RESEARCH, "queued")


async def test_mail_with_the_agent_only_in_cc_is_recorded_and_runs_nothing(
    smtp_port: int, store: Store
) -> None:
    code, text = await asyncio.to_thread(_send, smtp_port, [RESEARCH], To=OWNER, Cc=RESEARCH)
    assert (code, b"no agent in To" in text) == (250, True)
    assert await store.fetchall("SELECT * FROM runs") == []
    [message] = await store.fetchall("SELECT body, direction FROM messages")
    assert (message["body"].strip(), message["direction"]) == ("Find three.", "in")


async def test_an_unknown_address_is_refused_naming_every_agent(smtp_port: int) -> None:
    def rcpt() -> tuple[int, bytes]:
        with smtplib.SMTP("127.0.0.1", smtp_port, timeout=10) as client:
            client.login("me", "secret-pw")
            client.mail(OWNER)
            return client.rcpt("writer@pizzamail.localhost")

    code, text = await asyncio.to_thread(rcpt)
    assert code == 550 and b"5.1.1" in text
    assert f"write to {BOT}, {RESEARCH}".encode() in text


# -- tools and policy -----------------------------------------------------------------------------


def test_the_stricter_of_the_agents_rule_and_a_users_rule_wins() -> None:
    assert overlay("auto", "ask", decided=True) == "ask"
    assert overlay("ask", "auto", decided=True) == "ask"
    assert overlay("deny", "auto", decided=True) == "deny"
    assert overlay("ask", "auto", decided=False) == "auto"  # over a tool's own default it decides
    assert overlay("ask", "auto", decided=False, never_auto=True) == "ask"
    assert overlay("auto", None, decided=True) == "auto"


class _Named:
    def __init__(self, name: str) -> None:
        self.spec = ToolSpec(name=name, description=name, parameters={"type": "object"})

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(text="ok")


def test_a_specialist_is_offered_only_its_tools_under_its_policy(tmp_path: Path) -> None:
    config = parse_config({"tools": {"policy": {"web__fetch": "ask", "web__search": "auto"}},
                           "agents": {"research": {"tools": ["web__*"], "policy": {
                               "web__fetch": "auto", "web__search": "ask", "web__open": "auto"}}}})
    registry = ToolRegistry(rules=config.tools.policy)
    for name in ("web__fetch", "web__search", "web__open", "remember"):
        registry.add(_Named(name), policy="ask")
    research = config.agent_at(RESEARCH)
    mail = MailContext(thread_id=1, run_id=1, subject="s", in_reply_to=None)
    box = registry.bind(RunScope(run_id=1, thread_id=1, mail=mail, workspace=tmp_path, agent=research))
    policies = {name: offered.policy for name, offered in box.tools.items()}
    assert policies == {"web__fetch": "ask", "web__search": "ask", "web__open": "auto"}
    main = registry.bind(RunScope(run_id=1, thread_id=1, mail=mail, workspace=tmp_path,
                                  agent=config.main_agent))
    assert {n: o.policy for n, o in main.tools.items()} == {
        "web__fetch": "ask", "web__search": "auto", "web__open": "ask", "remember": "ask"}


def test_the_agents_command_lists_each_agent_with_its_address(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[agents.research]\nname = "Research"\ntools = ["web__*"]\n'
                                          'description = "Finds sources"\n')
    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "agents"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("pizzamail <bot@pizzamail.localhost>  [agent]")
    assert lines[1] == ("Research <research@pizzamail.localhost>  [agents.research]  openai:gpt-4.1-mini"
                        " · tools web__*")
    assert lines[2].strip() == "Finds sources"
