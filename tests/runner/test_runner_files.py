"""A run's files outlive the machine it ran on: with PostgreSQL a run resumed by a worker elsewhere,
whose workspaces folder is empty, still has what it wrote and what its tools gave back."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pizzamail.home import Home
from pizzamail.providers.pictures import picture
from pizzamail.providers.types import Picture, ToolSpec
from pizzamail.store.location import workspaces_for
from pizzamail.tools import ToolResult
from tests.fakes.openai_server import FakeOpenAI, gated, text, tool_call
from tests.fakes.scripted import Recorded, Scripted
from tests.runner.conftest import TIMEOUT, Harness, bot_mails
from tests.runner.test_runner_delegation import _team
from tests.runner.test_runner_pictures import image_urls, png
from tests.tools.conftest import with_tools


@pytest.fixture
def store_backend() -> str:
    """Another machine exists only with a database every machine reaches."""
    return "postgresql"


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    held = threading.Event()
    yield held
    held.set()


@dataclass(frozen=True)
class Snapshot:
    """A tool that gives back a picture (kept under the workspace's ``.pictures/``)."""

    shot: Picture
    spec = ToolSpec(name="snapshot", description="Take a picture.",
                    parameters={"type": "object", "properties": {}, "additionalProperties": False})

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(text="here it is", pictures=(self.shot,))


async def test_a_run_resumed_on_another_machine_has_its_files_and_attaches_them(
    harness: Harness, fake_openai: FakeOpenAI, gate: threading.Event, tmp_path: Any
) -> None:
    shot = picture(png(colour="blue"), name="shot.png", media_type="image/png")
    assert isinstance(shot, Picture)
    fake_openai.script([tool_call("write_file", {"name": "report.md", "content": "# Report\n"}),
                        tool_call("snapshot", {}), gated(text("never sent"), gate),
                        text("The report is attached.")])
    run_id = await harness.task("Write a report")
    options = with_tools(harness)
    options["tools"].add(Snapshot(shot))
    async with harness.running(**options):
        await asyncio.to_thread(fake_openai.wait_requests, 3)  # both tools ran; the model is asked
    other = Home(root=tmp_path / "machine-b")  # its workspaces folder does not even exist
    elsewhere = workspaces_for(other, harness.store)
    async with harness.running(**{**options, "workspaces": elsewhere}) as runner:
        assert await asyncio.wait_for(harness.finish(runner, run_id), TIMEOUT) == "done"
    *_, (_, mail) = await bot_mails(harness.mailbox)
    [attachment] = mail.iter_attachments()
    assert attachment.get_filename() == "report.md"
    assert attachment.get_content().replace("\r\n", "\n") == "# Report\n"
    shown = [url for m in fake_openai.requests[-1].messages if isinstance(m["content"], list)
             for url in image_urls(m)]
    assert shown == ["data:image/png;base64," + base64.b64encode(shot.data).decode()]
    assert (other.root / "workspaces" / str(run_id) / "report.md").read_text() == "# Report\n"



async def test_a_delegates_files_reach_the_parents_reply_when_the_parent_ends_on_another_machine(
    harness: Harness, fake_openai: FakeOpenAI, gate: threading.Event, tmp_path: Any
) -> None:
    harness, moved = _team(harness), threading.Event()

    def answer(request: Recorded) -> Scripted:
        if "You are Writer." in str(request.messages[0]["content"]):
            if any(m["role"] == "tool" for m in request.messages):
                return text("The draft is in draft.md.")
            return tool_call("write_file", {"name": "draft.md", "content": "# Tides\n"})
        if not any(m["role"] == "tool" for m in request.messages):
            return tool_call("delegate", {"agent": "writer", "task": "Write a short draft about tides."})
        if not moved.is_set():  # the parent has the draft: this machine goes down before it answers
            return Scripted(payload=text("never sent").payload, gate=gate)
        return text("Here is the draft.")

    fake_openai.script([], then=answer)
    run_id = await harness.task("Write me something about tides")
    options = with_tools(harness)
    async with harness.running(**options):
        await asyncio.to_thread(fake_openai.wait_requests, 4)
    moved.set()
    elsewhere = workspaces_for(Home(root=tmp_path / "machine-b"), harness.store)
    async with harness.running(**{**options, "workspaces": elsewhere}) as runner:
        assert await asyncio.wait_for(harness.finish(runner, run_id), TIMEOUT) == "done"
    [reply] = [m for _, m in await bot_mails(harness.mailbox) if m["X-Pizzamail-Kind"] == "reply"]
    [attachment] = reply.iter_attachments()
    assert attachment.get_filename() == "draft.md"
    assert attachment.get_content().replace("\r\n", "\n") == "# Tides\n"
