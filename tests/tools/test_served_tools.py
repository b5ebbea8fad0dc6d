"""``pizzamail serve`` as a subprocess with an MCP server enabled: the tool is used for a mailed
task, and stopping serve stops the server too."""

from __future__ import annotations

import asyncio
import imaplib
import sys
from collections.abc import Iterator
from email import message_from_bytes
from email.policy import default
from pathlib import Path

import pytest

from tests.e2e.conftest import _no_session_left_open  # noqa: F401  (autouse here too)
from tests.e2e.harness import Served, serve_env, task_mail, write_config
from tests.e2e.test_roundtrip import connect, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.tools.conftest import NOTES_SERVER


@pytest.fixture
def served_with_notes(tmp_path: Path, fake_openai: FakeOpenAI) -> Iterator[Served]:
    home = tmp_path / "home"
    write_config(home, base_url=fake_openai.base_url)
    with (home / "config.toml").open("a") as config:
        config.write(f'\n[mcp.servers.notes]\nenabled = true\ncommand = "{sys.executable}"\n'
                     f'args = ["{NOTES_SERVER}"]\nenv = {{ NOTES_DIR = "{tmp_path}",'
                     f' NOTES_PID_FILE = "{tmp_path / "notes.pid"}" }}\n')
    server = Served(home=home, env=serve_env(home))
    yield server
    if server.proc is not None:
        server.stop()


def inbox_bodies(served: Served) -> list[str]:
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        imap.login("me", served.password)
        imap.select("INBOX", readonly=True)
        _, data = imap.fetch("1:*", "(BODY.PEEK[])")
    mails = [message_from_bytes(item[1], policy=default) for item in data if isinstance(item, tuple)]
    return [str(m.get_body(("plain",)).get_content()) for m in mails]  # type: ignore[union-attr]


async def test_a_mailed_task_uses_an_mcp_tool_of_the_served_instance(
    served_with_notes: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([tool_call("notes__add", {"a": 40, "b": 2}), text("The answer is 42.")])
    served = served_with_notes
    served.start()
    client = await connect(served)
    await asyncio.to_thread(served.send, task_mail("What is 40+2?"))
    await idle_until_exists(client, 2)  # the task and the reply
    await client.logout()
    assert "The answer is 42." in inbox_bodies(served)[-1]
    assert fake_openai.requests[1].messages[-1]["content"] == "42"
    log = (served.home / "logs" / "pizzamail.log").read_text()
    assert "MCP server notes ready with 5 tool(s)" in log
    pid = int((served.home.parent / "notes.pid").read_text())
    assert served.stop() == 0
    assert not running(pid)


def running(pid: int) -> bool:
    """Whether ``pid`` is alive (a zombie waiting to be reaped counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status
