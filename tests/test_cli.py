"""The command line: init, account, keys, task, threads, doctor, and how errors read."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from pizzamail.cli import cli


def run(home: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], input=input, catch_exceptions=False)


def test_init_creates_a_private_home_and_prints_settings(tmp_path: Path) -> None:
    home = tmp_path / "h"
    result = run(home, "init")
    assert result.exit_code == 0
    assert "IMAP server  127.0.0.1 port 1143" in result.output
    assert "SMTP server  127.0.0.1 port 1587" in result.output
    assert "user name    me" in result.output
    assert "pizzamail account password" in result.output
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
    assert "already set up" in run(home, "init").output


def test_account_password_is_printed_and_never_in_config(tmp_path: Path) -> None:
    run(tmp_path, "init")
    password = run(tmp_path, "account", "password").output.strip()
    assert len(password) >= 20
    assert password not in (tmp_path / "config.toml").read_text()


def test_keys_set_list_delete_read_stdin(tmp_path: Path) -> None:
    assert "stored key 'openai'" in run(tmp_path, "keys", "set", "openai", input="sk-123\n").output
    listed = run(tmp_path, "keys", "list")
    assert listed.stdout.split() == ["openai"]
    assert "sk-123" not in listed.output
    assert run(tmp_path, "keys", "delete", "openai").exit_code == 0
    assert run(tmp_path, "keys", "delete", "openai").exit_code == 1
    assert run(tmp_path, "keys", "set", "account-password", input="x").exit_code == 2


def test_task_creates_a_thread_listed_by_threads(tmp_path: Path) -> None:
    result = run(tmp_path, "task", "Summarise the release notes")
    assert "thread 1: queued" in result.output
    assert "not running" in result.output
    rows = json.loads(run(tmp_path, "threads", "--json").output)
    summary = [(r["id"], r["status"], r["subject"]) for r in rows]
    assert summary == [(1, "queued", "Summarise the release notes")]
    assert "Summarise the release notes" in run(tmp_path, "threads").output


def test_task_for_a_specialist_is_a_run_of_it_and_an_unknown_agent_is_refused(tmp_path: Path) -> None:
    run(tmp_path, "init")
    with (tmp_path / "config.toml").open("a") as config:
        config.write('\n[agents.research]\ndescription = "Finds sources"\n')
    result = run(tmp_path, "task", "--agent", "research", "Find sources on tides")
    assert "thread 1: queued for research (research@pizzamail.localhost)" in result.output
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("SELECT agent FROM runs").fetchall() == [("research@pizzamail.localhost",)]
    refused = run(tmp_path, "task", "--agent", "nobody", "Anything")
    assert refused.exit_code == 2
    assert "no agent 'nobody'; the agents are: bot@pizzamail.localhost (main), research" in refused.output


def test_doctor_reports_fallback_secrets_and_missing_key(tmp_path: Path) -> None:
    run(tmp_path, "init")
    result = run(tmp_path, "doctor")
    assert result.exit_code == 0
    assert "no OS keyring" in result.output
    assert "pizzamail keys set openai" in result.output
    assert "not running" in result.output
    checks = {c["name"]: c["status"] for c in json.loads(run(tmp_path, "doctor", "--json").output)}
    assert checks["config"] == "ok" and checks["secrets"] == "warn" and checks["model"] == "warn"
    assert checks["tls"] == "ok"


def test_bad_config_gives_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    run(tmp_path, "init")
    config = tmp_path / "config.toml"
    config.write_text(config.read_text().replace("imap_port = 1143", "imap_port = 99999"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-m", "pizzamail", "--home", str(tmp_path), "serve"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert "server.imap_port" in proc.stderr and "99999" in proc.stderr
    assert "Traceback" not in proc.stderr
