"""An MCP tool's images, audio and resources come back as attachments of the reply, byte for byte,
and its image also reaches a model with vision as an image part."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

from pizzamail.config import McpServerSettings
from pizzamail.store.runs import steps_of
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, tool_calls
from tests.runner.conftest import Harness, bot_mails, plain
from tests.tools.conftest import running_hub, with_tools
from tests.tools.servers.media import beep_wav, chart_png, report_bytes

MEDIA_SERVER = Path(__file__).parent / "servers" / "media.py"


def media_server() -> dict[str, McpServerSettings]:
    return {"media": McpServerSettings(enabled=True, command=sys.executable, args=[str(MEDIA_SERVER)])}


def attached(mail: object) -> dict[str, tuple[str, bytes]]:
    """The reply's attachments: file name to (MIME type, bytes)."""
    found = {}
    for part in mail.iter_attachments():  # type: ignore[attr-defined]
        found[part.get_filename()] = (part.get_content_type(), part.get_payload(decode=True))
    return found


async def test_a_tools_image_is_attached_to_the_reply_and_shown_to_the_model(
    harness: Harness, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script([tool_call("media__chart", {}), text("Here is the chart.")])
    run_id = await harness.task("Draw me the sales chart")
    async with running_hub(media_server(), log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "Here is the chart." in plain(mail)
    assert attached(mail) == {"image-2.png": ("image/png", chart_png())}
    result, shown = fake_openai.requests[1].messages[-2:]
    assert result["role"] == "tool" and "Sales by quarter:" in result["content"]
    assert "[image-2.png (image/png, " in result["content"] and "attached to your reply" in result["content"]
    assert shown["role"] == "user"
    assert shown["content"][1] == {"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + base64.b64encode(chart_png()).decode()}}
    [_, tool, _] = await steps_of(harness.store, run_id)
    assert base64.b64encode(chart_png()).decode() not in json.dumps(tool.data)  # a blob reference
    [picture] = tool.data["pictures"]
    kept = harness.home.root / "workspaces" / str(run_id) / ".pictures" / picture["digest"]
    assert kept.read_bytes() == chart_png()


async def test_audio_and_embedded_resources_are_attached_with_their_types(
    harness: Harness, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script([tool_calls([("call_1", "media__beep", {}), ("call_2", "media__report", {})]),
                        text("Done.")])
    run_id = await harness.task("Export the report and beep")
    async with running_hub(media_server(), log_dir=tmp_path) as hub, \
            harness.running(**with_tools(harness, hub=hub)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    [(_, mail)] = await bot_mails(harness.mailbox)
    files = attached(mail)
    assert files["audio-1.wav"][1] == beep_wav() and files["audio-1.wav"][0].startswith("audio/")
    assert files["q3-report.pdf"] == ("application/pdf", report_bytes())
    assert files["summary.md"][1].replace(b"\r\n", b"\n") == b"# Q3\nSales went up.\n"  # mail text is CRLF
    report = fake_openai.requests[1].messages[-1]
    assert report["role"] == "tool" and "Sales went up." in report["content"]  # the model reads it
