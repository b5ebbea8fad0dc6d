"""Tool fixtures: the notes MCP server over stdio and HTTP, and a registry like the service's."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from pizzamail.composer import Composer
from pizzamail.config import McpServerSettings, McpSettings
from pizzamail.mailbox.filing import Filer
from pizzamail.skills.tools import SkillSource
from pizzamail.tools import ToolRegistry
from pizzamail.tools.builtins import Builtins
from pizzamail.tools.hub import McpHub
from tests.runner.conftest import Harness, config, harness, secrets  # noqa: F401 - the runner's fixtures, shared

NOTES_SERVER = Path(__file__).parent / "servers" / "notes.py"


@pytest.fixture
def notes_dir(tmp_path: Path) -> Path:
    path = tmp_path / "notes"
    path.mkdir()
    return path


def stdio_server(notes_dir: Path, **options: object) -> McpServerSettings:
    return McpServerSettings(enabled=True, command=sys.executable, args=[str(NOTES_SERVER)],
                             env={"NOTES_DIR": str(notes_dir)}, **options)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], tries: int = 200) -> None:
    """Poll until the port takes connections (bounded: ``tries`` attempts of up to 0.05 s each)."""
    for _ in range(tries):
        if proc.poll() is not None:
            raise RuntimeError(f"the HTTP MCP server exited with {proc.returncode}")
        with socket.socket() as s:
            s.settimeout(0.05)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)  # a bounded pause that also notices the process dying
    raise RuntimeError(f"the HTTP MCP server did not listen on port {port}")


@pytest.fixture
def http_notes(notes_dir: Path) -> Iterator[str]:
    """The notes server as a real streamable HTTP server in a subprocess on a free port."""
    port = free_port()
    env = {**os.environ, "NOTES_DIR": str(notes_dir)}
    proc = subprocess.Popen([sys.executable, str(NOTES_SERVER), "http", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Ask a server subprocess to end; kill it when it does not within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def with_tools(h: Harness, *, hub: McpHub | None = None, skills: Path | None = None,
               rules: dict[str, str] | None = None, **builtins: Any) -> dict[str, Any]:
    """Runner options with built-ins (+ skills, + MCP servers) wired as the service wires them;
    ``builtins`` are more options of :class:`Builtins` (limits)."""
    filer = Filer(mailbox=h.mailbox, blobs=h.blobs)
    tools = ToolRegistry(rules=rules or {})
    tools.add_source(Builtins(
        store=h.store, blobs=h.blobs, composer=Composer(config=h.config), sender=h.config.agent.address,
        memory_file=h.home.root / "memory.md", **builtins))
    if skills is not None:
        tools.add_source(SkillSource(home_skills=skills, paths=[]))
    if hub is not None:
        tools.add_source(hub)
    return {"tools": tools, "filer": filer}


@asynccontextmanager
async def running_hub(servers: dict[str, McpServerSettings], *, log_dir: Path,
                      startup_timeout: float = 15.0) -> AsyncIterator[McpHub]:
    settings = McpSettings(servers=servers, startup_timeout=startup_timeout, retry_initial=30.0)
    async with McpHub(settings=settings, log_dir=log_dir) as hub:
        yield hub
