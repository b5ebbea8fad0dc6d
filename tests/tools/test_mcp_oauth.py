"""MCP servers behind OAuth 2.1 (a local authorization server and MCP server written for the tests),
and the legacy SSE transport: `pizzamail mcp login` through a browser's redirect, tokens in the
keyring only, refresh without the user, a clear "log in" when no token works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from pizzamail.config import McpServerSettings, McpSettings
from pizzamail.home import Home
from pizzamail.secrets import SecretStore, secret_store
from pizzamail.tools.hub import McpHub
from pizzamail.tools.mcp import McpConnection
from tests.tools.conftest import NOTES_SERVER, free_port, stop_process, wait_listening

OAUTH_SERVER = Path(__file__).parent / "servers" / "oauth_notes.py"


@dataclass(frozen=True)
class Protected:
    url: str
    authorization: str
    grants: Path

    def granted(self) -> list[str]:
        return self.grants.read_text().split() if self.grants.exists() else []


@pytest.fixture
def protected(tmp_path: Path) -> Iterator[Protected]:
    as_port, rs_port = free_port(), free_port()
    grants = tmp_path / "grants.txt"
    proc = subprocess.Popen([sys.executable, str(OAUTH_SERVER), str(as_port), str(rs_port), str(grants)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(as_port, proc)
        wait_listening(rs_port, proc)
        yield Protected(url=f"http://127.0.0.1:{rs_port}/mcp", authorization=f"http://127.0.0.1:{as_port}",
                        grants=grants)
    finally:
        stop_process(proc)


@pytest.fixture
def home(tmp_path: Path, protected: Protected) -> Path:
    root = tmp_path / "home"
    root.mkdir()
    (root / "config.toml").write_text(
        f'[mcp.servers.notes]\nenabled = true\nurl = "{protected.url}"\nauth = "oauth"\n')
    return root


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "PIZZAMAIL_HOME": str(home),
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


def _secrets(home: Path) -> SecretStore:
    store = secret_store(Home(root=home))
    store.use_keyring = False  # as the CLI found it: the fail backend leaves the file
    return store


def _login(home: Path) -> str:
    """`pizzamail mcp login notes --no-browser`, with the test as the browser: it opens the printed
    address, the authorization server consents and redirects to pizzamail's loopback listener."""
    proc = subprocess.Popen([sys.executable, "-m", "pizzamail", "mcp", "login", "notes", "--no-browser"],
                            env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    printed = []
    try:
        for line in proc.stdout:
            printed.append(line)
            if line.startswith("  http"):
                break
        url = printed[-1].strip()
        assert url.startswith("http://127.0.0.1:"), "".join(printed)
        landed = httpx.get(url, follow_redirects=True, timeout=30)
        assert landed.text == "pizzamail: logged in. You can close this tab."
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, "".join(printed) + out
    return "".join(printed) + out


async def _connected(settings: McpServerSettings, secrets: SecretStore) -> McpConnection:
    hub = McpHub(settings=McpSettings(servers={"notes": settings}, startup_timeout=20, retry_initial=60),
                 secrets=secrets)
    await hub.start()
    return hub.connections["notes"]


async def test_login_then_serving_uses_and_refreshes_the_tokens_and_a_revoked_login_says_log_in(
    home: Path, protected: Protected
) -> None:
    said = _login(home)
    assert "logged in to notes: 1 tool(s)" in said
    assert protected.granted() == ["authorization_code"]
    stored = json.loads(_secrets(home).get("mcp-oauth:notes") or "{}")
    access = stored["tokens"]["access_token"]
    assert stored["client"]["redirect_uris"][0].startswith("http://127.0.0.1:")
    assert access not in (home / "config.toml").read_text()

    settings = McpServerSettings(enabled=True, url=protected.url, auth="oauth")
    connection = await _connected(settings, _secrets(home))
    try:
        assert connection.status == "ready", connection.error
        result = await connection.call("whoami", {})
        assert result.text == "a client logged in with scopes ['notes']"
    finally:
        await connection.stop()
    assert protected.granted() == ["authorization_code"]  # a valid token is simply used

    stored["expires_at"] = time.time() - 60  # an hour later: the access token has expired
    _secrets(home).set("mcp-oauth:notes", json.dumps(stored))
    connection = await _connected(settings, _secrets(home))
    try:
        assert connection.status == "ready", connection.error
        assert (await connection.call("whoami", {})).is_error is False
    finally:
        await connection.stop()
    assert protected.granted() == ["authorization_code", "refresh_token"]
    assert json.loads(_secrets(home).get("mcp-oauth:notes") or "{}")["tokens"]["access_token"] != access

    async with httpx.AsyncClient() as http:  # the authorization server forgets every token: revoked
        (await http.post(protected.authorization + "/forget", timeout=10)).raise_for_status()
    connection = await _connected(settings, _secrets(home))
    try:
        assert connection.status == "failed"
        assert "needs an OAuth login: its login has expired or was revoked" in str(connection.error)
        assert "`pizzamail mcp login notes`" in str(connection.error)
    finally:
        await connection.stop()


async def test_a_server_with_no_login_is_reported_with_the_command_that_logs_in(
    home: Path, protected: Protected
) -> None:
    settings = McpServerSettings(enabled=True, url=protected.url, auth="oauth")
    connection = await _connected(settings, _secrets(home))
    try:
        assert connection.status == "failed"
        assert connection.error == ("failed to start: the MCP server 'notes' needs an OAuth login: it has no"
                                    " login yet (run `pizzamail mcp login notes`)")
    finally:
        await connection.stop()
    assert protected.granted() == []


def test_login_refuses_a_server_that_does_not_use_oauth(home: Path, tmp_path: Path) -> None:
    (home / "config.toml").write_text('[mcp.servers.plain]\nenabled = true\nurl = "http://127.0.0.1:9/mcp"\n')
    done = subprocess.run([sys.executable, "-m", "pizzamail", "mcp", "login", "plain"], env=_env(home),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert 'plain does not use OAuth: set url and auth = "oauth"' in done.stderr


@pytest.fixture
def sse_notes(notes_dir: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(NOTES_SERVER), "sse", str(port)],
                            env={**os.environ, "NOTES_DIR": str(notes_dir)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        stop_process(proc)


async def test_the_legacy_sse_transport(sse_notes: str) -> None:
    connection = await _connected(McpServerSettings(enabled=True, url=sse_notes, sse=True), SecretStore(
        fallback=Path("/nonexistent/secrets.json"), scope="test", use_keyring=False))
    try:
        assert connection.status == "ready", connection.error
        assert (await connection.call("add", {"a": 2, "b": 3})).text == "5"
    finally:
        await connection.stop()


async def test_a_login_entry_typed_in_by_hand_means_a_login_is_needed(
    home: Path, protected: Protected
) -> None:
    _secrets(home).set("mcp-oauth:notes", "typed-by-hand")  # `keys set mcp-oauth:notes` by mistake
    settings = McpServerSettings(enabled=True, url=protected.url, auth="oauth")
    connection = await _connected(settings, _secrets(home))
    try:
        assert connection.status == "failed"
        assert "needs an OAuth login" in str(connection.error)
        assert "`pizzamail mcp login notes`" in str(connection.error)
    finally:
        await connection.stop()
