"""``pizzamail mcp`` and ``pizzamail skills``, and what doctor says about them."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pizzamail.cli import cli
from pizzamail.errors import ToolError
from tests.tools.conftest import NOTES_SERVER


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)


def test_mcp_add_lands_disabled_and_list_shows_tools_with_policies(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert run(home, "init").exit_code == 0
    added = run(home, "mcp", "add", "notes", "--command", sys.executable, "--arg", str(NOTES_SERVER),
                "--env", f"NOTES_DIR={tmp_path}")
    assert "added MCP server notes (disabled" in added.output
    config = tomllib.loads((home / "config.toml").read_text())
    assert config["mcp"]["servers"]["notes"] == {
        "enabled": False, "command": sys.executable, "args": [str(NOTES_SERVER)],
        "env": {"NOTES_DIR": str(tmp_path)}}
    [report] = json.loads(run(home, "mcp", "list", "--json").output)
    assert (report["name"], report["status"], report["tools"]) == ("notes", "disabled", [])

    text = (home / "config.toml").read_text().replace("enabled = false", "enabled = true")
    (home / "config.toml").write_text(text)
    [report] = json.loads(run(home, "mcp", "list", "--json").output)
    assert report["status"] == "ready"
    policies = {t["exposed"]: t["policy"] for t in report["tools"]}
    assert policies["notes__add"] == "auto" and policies["notes__delete_note"] == "ask"
    assert "notes__crash" in policies


def test_mcp_add_refuses_a_name_taken_and_bad_values_name_the_key(tmp_path: Path) -> None:
    run(tmp_path, "init")
    assert run(tmp_path, "mcp", "add", "web", "--url", "http://127.0.0.1:9/mcp").exit_code == 0
    again = CliRunner().invoke(cli, ["--home", str(tmp_path), "mcp", "add", "web", "--url", "http://x/mcp"])
    assert again.exit_code != 0 and "mcp.servers.web" in str(again.exception)
    bad = CliRunner().invoke(cli, ["--home", str(tmp_path), "mcp", "add", "ftp", "--url", "ftp://x"])
    assert "mcp.servers.ftp.url" in str(bad.exception)
    assert "ftp" not in tomllib.loads((tmp_path / "config.toml").read_text())["mcp"]["servers"]


def test_mcp_json_import_lands_disabled_and_skips_what_it_cannot_run(tmp_path: Path) -> None:
    run(tmp_path, "init")
    source = tmp_path / ".mcp.json"
    source.write_text(json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"], "env": {"X": "${HOME}"}},
        "github.com": {"type": "http", "url": "https://example.test/mcp",
                       "headers": {"Authorization": "Bearer ${secret:github}"}},
        "old": {"type": "sse", "url": "https://example.test/sse"},
    }}))
    result = run(tmp_path, "mcp", "add", "--from-json", str(source))
    assert "skipped old" in result.output
    servers = tomllib.loads((tmp_path / "config.toml").read_text())["mcp"]["servers"]
    assert servers["files"] == {"enabled": False, "command": "npx",
                                "args": ["-y", "server-filesystem", "/tmp"], "env": {"X": "${HOME}"}}
    assert servers["github-com"]["headers"] == {"Authorization": "Bearer ${secret:github}"}
    assert servers["github-com"]["enabled"] is False


@pytest.mark.parametrize(("text", "why"), [("{not json", "the text is not JSON"),
                                           ("[1, 2]", "it has no mcpServers object")])
def test_mcp_json_import_of_a_file_it_cannot_read_is_an_error_that_says_why(
    tmp_path: Path, text: str, why: str
) -> None:
    run(tmp_path, "init")
    source = tmp_path / ".mcp.json"
    source.write_text(text)
    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "mcp", "add", "--from-json", str(source)])
    assert isinstance(result.exception, ToolError), result.exception
    assert result.exception.cli_message().startswith(f"error: not an .mcp.json file: {why}")


def test_skills_list_and_doctor_report_invalid_skills(tmp_path: Path) -> None:
    run(tmp_path, "init")
    good, bad = tmp_path / "skills" / "triage", tmp_path / "skills" / "broken"
    good.mkdir(parents=True)
    bad.mkdir()
    (good / "SKILL.md").write_text("---\nname: triage\ndescription: Sort issues. Use for triage.\n---\nB\n")
    (bad / "SKILL.md").write_text("---\nname: broken\n---\nBody\n")
    listed = json.loads(run(tmp_path, "skills", "list", "--json").output)
    assert [s["name"] for s in listed["skills"]] == ["triage"]
    assert listed["invalid"][0]["reason"].startswith("description is missing")
    assert "INVALID" in run(tmp_path, "skills", "list").output
    checks = {c["name"]: c for c in json.loads(
        CliRunner().invoke(cli, ["--home", str(tmp_path), "doctor", "--json"]).output)}
    assert checks["skills"]["status"] == "warn"
    assert "broken: description is missing" in checks["skills"]["detail"]
    assert checks["mcp"] == {"status": "ok", "name": "mcp", "detail": "no MCP servers configured"}


def test_doctor_reports_a_server_that_does_not_start(tmp_path: Path) -> None:
    run(tmp_path, "init")
    run(tmp_path, "mcp", "add", "gone", "--command", str(tmp_path / "missing-program"), "--enable")
    checks = {c["name"]: c for c in json.loads(
        CliRunner().invoke(cli, ["--home", str(tmp_path), "doctor", "--json"]).output)}
    assert checks["mcp"]["status"] == "warn"
    assert "gone failed: failed to start" in checks["mcp"]["detail"]


def test_mcp_add_keeps_the_users_comments_and_layout(tmp_path: Path) -> None:
    mine = ('# my pizzamail\n[server]\nsmtp_port = 2587   # 1587 is taken here\n\n'
            '[mcp.servers.files]  # notes folder\nenabled = true\ncommand = "npx"\n\n'
            '[agent]\nmodel = "openai:gpt-4.1"  # the cheap one\n')
    (tmp_path / "config.toml").write_text(mine)
    assert run(tmp_path, "mcp", "add", "web", "--url", "http://127.0.0.1:9/mcp",
               "--header", "X-Key=${secret:web}").exit_code == 0
    text = (tmp_path / "config.toml").read_text()
    assert text.replace('[mcp.servers.web]\nenabled = false\nurl = "http://127.0.0.1:9/mcp"\n'
                        'headers = {X-Key = "${secret:web}"}\n\n', "") == mine
    config = tomllib.loads(text)
    assert config["mcp"]["servers"]["web"] == {"enabled": False, "url": "http://127.0.0.1:9/mcp",
                                               "headers": {"X-Key": "${secret:web}"}}
