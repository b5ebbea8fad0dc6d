"""``pizzamail models``: providers, the selected one, where keys are (never the keys), reachability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pizzamail.cli import cli
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)


@pytest.fixture
def home(tmp_path: Path, fake_openai: FakeOpenAI, fake_anthropic: FakeAnthropic) -> Path:
    assert run(tmp_path, "init").exit_code == 0
    config = tmp_path / "config.toml"
    config.write_text(f"""
[providers.openai]
base_url = "{fake_openai.base_url}"
key_env = "OPENAI_API_KEY"

[providers.anthropic]
kind = "anthropic"
base_url = "{fake_anthropic.base_url}"

[providers.ollama]
base_url = "http://127.0.0.1:9/v1"
key_required = false
""")
    return tmp_path


def by_name(output: str) -> dict[str, dict[str, object]]:
    return {p["name"]: p for p in json.loads(output)["providers"]}


def test_lists_providers_and_where_each_key_is(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    CliRunner().invoke(cli, ["--home", str(home), "keys", "set", "openai"], input="sk-stored\n")
    result = run(home, "models", "--json")
    assert result.exit_code == 0 and "sk-ant-secret" not in result.output and "sk-stored" not in result.output
    data = json.loads(result.output)
    assert data["selected"] == "openai"
    found = by_name(result.output)
    assert list(found) == ["openai", "anthropic", "local", "bedrock", "ollama"]
    assert found["bedrock"]["key"] == "aws credential chain"  # botocore is in the test extra
    assert found["bedrock"]["base_url"] == "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert found["openai"]["key"] == "file"  # the tests' keyring is the fallback file
    assert found["anthropic"]["key"] == "env $ANTHROPIC_API_KEY"
    assert found["local"]["key"] == "not needed" and found["ollama"]["key"] == "not needed"
    assert found["openai"]["selected"] is True and found["anthropic"]["selected"] is False
    assert found["openai"]["reachable"] is None


def test_check_reaches_the_fake_servers(home: Path, monkeypatch: pytest.MonkeyPatch,
                                        fake_anthropic: FakeAnthropic) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    result = run(home, "models", "--json", "--check")
    found = by_name(result.output)
    assert found["openai"]["reachable"] is True and found["openai"]["key"] == "env $OPENAI_API_KEY"
    assert found["anthropic"]["reachable"] is True
    assert found["ollama"]["reachable"] is False and "could not reach" in str(found["ollama"]["detail"])
    assert result.exit_code == 1  # one provider failed
    [get] = [r for r in fake_anthropic.requests if r.method == "GET"]
    assert get.path == "/v1/models" and get.headers["x-api-key"] == "sk-ant-secret"
    assert get.headers["anthropic-version"] == "2023-06-01"
    assert "sk-" not in result.output


def test_plain_output_marks_the_selected_provider(home: Path) -> None:
    result = run(home, "models")
    assert result.exit_code == 0
    assert "* openai (openai " in result.output and "key: missing" in result.output
    assert "  anthropic (anthropic " in result.output


def test_ollama_is_listed_without_a_section(tmp_path: Path) -> None:
    assert run(tmp_path, "init").exit_code == 0
    found = by_name(run(tmp_path, "models", "--json").output)
    assert found["ollama"]["kind"] == "openai" and found["ollama"]["key"] == "not needed"
    assert found["ollama"]["base_url"] == "http://127.0.0.1:11434/v1"


def test_check_fails_only_for_providers_in_use(tmp_path: Path, fake_openai: FakeOpenAI,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(tmp_path, "init").exit_code == 0
    (tmp_path / "config.toml").write_text(f'[providers.openai]\nbase_url = "{fake_openai.base_url}"\n')
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    result = run(tmp_path, "models", "--json", "--check")
    found = by_name(result.output)
    assert found["openai"]["reachable"] is True
    assert found["bedrock"]["reachable"] is False  # built in, unused: reported, not failing
    assert result.exit_code == 0
