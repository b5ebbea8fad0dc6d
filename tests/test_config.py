"""Config: defaults, validation messages that name key, value and what is allowed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from pizzamail.config import Config, default_config_text, load_config, parse_config
from pizzamail.errors import ConfigError, ConfigProblems


def test_missing_file_means_documented_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "nope.toml")
    assert config == Config()
    assert (config.server.host, config.server.smtp_port, config.server.imap_port,
            config.server.http_port) == ("127.0.0.1", 1587, 1143, 8025)
    assert (config.account.user, config.account.address) == ("me", "me@pizzamail.localhost")
    assert config.agent.address == "bot@pizzamail.localhost"
    assert config.domain == "pizzamail.localhost"


def test_default_text_round_trips_to_defaults() -> None:
    text = default_config_text()
    assert "# SMTP submission port" in text
    config = parse_config(tomllib.loads(text))
    assert config.server == Config().server
    assert config.providers["openai"].base_url == "https://api.openai.com/v1"
    assert config.providers["openai"].key_env == "OPENAI_API_KEY"


@pytest.mark.parametrize(
    ("data", "key", "allowed"),
    [
        ({"server": {"smtp_port": 70000}}, "server.smtp_port", "port from 0 to 65535"),
        ({"server": {"smtp_port": "1587"}}, "server.smtp_port", "a whole number"),
        ({"server": {"host": "mail.example.com"}}, "server.host", "127.0.0.1, or localhost"),
        ({"server": {"smpt_port": 1}}, "server.smpt_port", "one of host, smtp_port"),
        ({"account": {"address": "not-an-address"}}, "account.address", "an email address"),
        ({"agent": {"model": "gpt-4"}}, "agent.model", "provider:model"),
        ({"agent": {"max_steps": 0}}, "agent.max_steps", "greater than 0"),
        ({"colour": {}}, "colour", "sections server"),
        ({"agent": {"address": "me@pizzamail.localhost"}}, "agent.address", "other than yours"),
    ],
)
def test_bad_values_name_key_value_and_allowed(data: dict[str, object], key: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.key == key
    assert allowed in info.value.message
    assert "config.toml" in info.value.cli_message()


def test_unreadable_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[server\nhost=")
    with pytest.raises(ConfigError, match="valid TOML"):
        load_config(path)


def test_openai_provider_works_without_a_section() -> None:
    settings = Config().provider("openai")
    assert settings is not None and settings.key_env == "OPENAI_API_KEY"
    assert Config().provider("other") is None


def test_the_commented_examples_in_the_written_config_are_valid_when_uncommented() -> None:
    example = re.compile(r'^# (\[[\w.]+\]|[\w"*-]+ *=)')
    lines = [line[2:] if example.match(line) else line for line in default_config_text().splitlines()]
    config = parse_config(tomllib.loads("\n".join(lines)))
    assert config.schedules["morning"].cron == "0 8 * * 1-5"
    assert config.hooks["github"].policy == {"*": "ask"}
    assert config.watches["support"].folder == "INBOX" and config.senders["cron"].address == "cron@localhost"
    assert config.mcp.servers["files"].enabled and config.relay.host == "smtp.example.com"
    research = config.agent_at("research@pizzamail.localhost")
    assert research is not None and research.tools == ("web__*", "read_attachment")
    assert config.schedules["morning"].model == "openai:gpt-4.1"


@pytest.mark.parametrize(
    ("data", "key", "allowed"),
    [
        ({"server": {"smpt_port": 1}}, "server.smpt_port", "did you mean smtp_port? [server] takes one of"),
        ({"agnet": {}}, "agnet", "did you mean agent? config.toml has the sections"),
        ({"schedules": {"daily": {"promt": "x", "cron": "0 8 * * *"}}}, "schedules.daily.promt",
         "did you mean prompt? [schedules.daily] takes one of cron, when"),
        ({"mcp": {"servers": {"files": {"comand": "npx"}}}}, "mcp.servers.files.comand",
         "did you mean command? [mcp.servers.files] takes one of enabled, command"),
        ({"mcp": {"servers": {"files": {"command": "npx", "args": ["-y", 3]}}}}, "mcp.servers.files.args",
         "a list of quoted strings"),
        ({"tools": {"policy": {"*": "maybe"}}}, "tools.policy", "tool patterns mapped to auto, ask, deny"),
        ({"schedules": 5}, "schedules", "a table of [schedules.NAME] sections"),
        ({"server": 5}, "server", "a table"),
    ],
)
def test_unknown_keys_say_did_you_mean_and_which_section(data: dict[str, object], key: str,
                                                          allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.key == key
    assert info.value.allowed.startswith(allowed)


def test_a_toml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[server]\nhost = "127.0.0.1"\nsmtp_port = = 1587\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.message == f"{path} is not valid TOML: line 3, column 13: Invalid value"
    assert f"fix: fix line 3 of {path}" in info.value.cli_message()


def test_localhost_is_the_loopback_address() -> None:
    assert parse_config({"server": {"host": "localhost"}}).server.host == "127.0.0.1"
    assert parse_config({"server": {"host": "::1"}}).server.host == "::1"


@pytest.mark.parametrize(
    ("data", "key"),
    [({"agent": {"model": "opneai:gpt-4.1-mini"}}, "agent.model"),
     ({"agents": {"research": {"model": "opneai:gpt-4.1-mini"}}}, "agents.research.model"),
     ({"schedules": {"daily": {"prompt": "x", "cron": "0 8 * * *", "model": "opneai:gpt-4.1-mini"}}},
      "schedules.daily.model")],
)
def test_an_unknown_provider_prefix_names_the_known_ones(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.key == key and info.value.value == "opneai:gpt-4.1-mini"
    assert "(openai, anthropic, local, bedrock, ollama); did you mean openai:?" in info.value.allowed
    assert "or add a [providers.opneai] section" in info.value.allowed


def test_a_provider_of_ones_own_is_known() -> None:
    config = parse_config({"agent": {"model": "mine:tiny"}, "providers": {"mine": {"base_url": "http://x"}}})
    assert config.agent.model == "mine:tiny"


def test_every_wrong_value_is_named_once_on_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[server]\nsmpt_port = 1\nimap_port = "x"\n[agent]\nmax_steps = 0\n')
    with pytest.raises(ConfigProblems) as info:
        load_config(path)
    keys = [p.key for p in info.value.problems]
    assert sorted(keys) == ["agent.max_steps", "server.imap_port", "server.smpt_port"]
    lines = info.value.cli_message().splitlines()
    assert lines[0] == "error: config.toml has 3 problems:"
    assert [line.split("'")[1] for line in lines[1:4]] == keys
    assert lines[4] == f"  fix: edit {path}"  # where to fix it, not "see `pizzamail doctor`"


@pytest.mark.parametrize(("store", "problem"), [
    ({"url": "postgresql://pm:secret@db/pizzamail"}, "without its password"),
    ({"url": "postgresql://pm@db/pizzamail?password=secret"}, "without its password"),
    ({"url": "mysql://pm@db/pizzamail"}, "a PostgreSQL url"),
    ({"url": "postgresql://pm@db/pizzamail", "pool": 2}, "at least 3"),
])
def test_store_settings_refuse_a_password_in_the_url_and_a_pool_too_small(
    store: dict[str, object], problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"store": store})
    assert problem in str(caught.value) and "secret" not in str(caught.value)


def test_a_store_never_shows_its_password() -> None:
    from pizzamail.store import Store

    assert "secret" not in repr(Store(url="postgresql://pm@db/pizzamail", password="secret"))
