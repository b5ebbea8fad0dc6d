"""What each provider's request carries for a tool result with an image, and for a model without
vision; and a kept tool result whose checkpoint gets its picture back from the run's workspace."""

from __future__ import annotations

import base64
import io
from pathlib import Path

from PIL import Image

from pizzamail.providers import Message, ToolCall
from pizzamail.providers.anthropic import AnthropicProvider
from pizzamail.providers.bedrock import BedrockProvider
from pizzamail.providers.local import LocalProvider
from pizzamail.providers.openai import OpenAIProvider
from pizzamail.providers.pictures import picture
from pizzamail.providers.types import Picture
from pizzamail.runner.workspace import attachments
from pizzamail.store.runs import Step
from pizzamail.tools.outputs import keep, load_steps
from pizzamail.transcript import ToolFile, ToolResult, ToolStep
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.anthropic_server import text as claude_text
from tests.fakes.bedrock_server import FakeBedrock
from tests.fakes.bedrock_server import text as bedrock_text
from tests.fakes.openai_server import FakeOpenAI, text


def chart() -> Picture:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), "green").save(out, "PNG")
    made = picture(out.getvalue(), name="chart.png", media_type="image/png")
    assert isinstance(made, Picture)
    return made


def conversation(shot: Picture) -> list[Message]:
    call = ToolCall(id="call_1", name="draw", arguments={})
    return [Message(role="system", content="Be brief."), Message(role="user", content="Draw it."),
            Message(role="assistant", tool_calls=[call]),
            Message(role="tool", tool_call_id="call_1", content="[chart.png attached]", pictures=(shot,))]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_openai_gets_a_tool_results_image_in_a_user_message_after_the_results(
    fake_openai: FakeOpenAI
) -> None:
    shot = chart()
    fake_openai.script([text("Green.")])
    async with OpenAIProvider(name="openai", base_url=fake_openai.base_url, model="m", api_key="k") as p:
        await p.complete(conversation(shot), [])
    *_, result, shown = fake_openai.requests[0].messages
    assert result == {"role": "tool", "tool_call_id": "call_1", "content": "[chart.png attached]"}
    assert shown == {"role": "user", "content": [
        {"type": "text", "text": "[pizzamail] The images the tool calls above returned:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(shot.data)}"}}]}


async def test_anthropic_gets_a_tool_results_image_inside_the_tool_result(
    fake_anthropic: FakeAnthropic
) -> None:
    shot = chart()
    fake_anthropic.script([claude_text("Green.")])
    async with AnthropicProvider(name="anthropic", base_url=fake_anthropic.base_url, model="m",
                                 api_key="k") as p:
        await p.complete(conversation(shot), [])
    [block] = fake_anthropic.requests[0].messages[-1]["content"]
    assert block == {"type": "tool_result", "tool_use_id": "call_1", "content": [
        {"type": "text", "text": "[chart.png attached]"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(shot.data)}}]}


async def test_bedrock_gets_a_tool_results_image_inside_the_tool_result(fake_bedrock: FakeBedrock) -> None:
    shot = chart()
    fake_bedrock.script([bedrock_text("Green.")])
    async with BedrockProvider(name="bedrock", base_url=fake_bedrock.base_url, model="m") as p:
        await p.complete(conversation(shot), [])
    [block] = fake_bedrock.requests[0].messages[-1]["content"]
    assert block["toolResult"]["content"] == [
        {"text": "[chart.png attached]"}, {"image": {"format": "png", "source": {"bytes": b64(shot.data)}}}]


async def test_a_provider_configured_without_vision_sends_a_description_instead(
    fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script([claude_text("I cannot see it.")])
    async with AnthropicProvider(name="anthropic", base_url=fake_anthropic.base_url, model="m",
                                 api_key="k", vision=False) as p:
        await p.complete(conversation(chart()), [])
    [block] = fake_anthropic.requests[0].messages[-1]["content"]
    assert block["content"] == ("[chart.png attached]\n[image chart.png: image/png, 64x48, "
                                f"{len(chart().data)} bytes; the model in use cannot see images, so only"
                                " this description reaches it]")


def test_the_embedded_model_has_no_vision_and_reads_a_description() -> None:
    local = LocalProvider()
    assert local.vision is False
    body = local._body([Message(role="user", content="Look.", pictures=(chart(),))])
    [message] = body["messages"]
    assert isinstance(message["content"], str) and "cannot see images" in message["content"]


async def test_a_kept_tool_result_gets_its_picture_back_and_its_file_is_in_the_workspace(
    tmp_path: Path
) -> None:
    workspace, shot = tmp_path / "ws", chart()
    workspace.mkdir()
    (workspace / "chart.png").write_bytes(b"written by write_file earlier")
    result = ToolResult(text="drawn", pictures=(shot,),
                        files=(ToolFile(name="../chart.png", media_type="image/png", data=shot.data),))
    await keep(result, workspace)
    step = ToolStep(call_id="c1", name="draw", result=result)
    kept = {p.name for p in (workspace / ".pictures").iterdir()}
    assert step.to_data()["pictures"][0]["digest"] in kept
    [again] = await load_steps([Step(seq=0, kind="tool", data=step.to_data())], workspace)
    assert isinstance(again, ToolStep) and again.result.pictures == (shot,)
    assert (workspace / "chart.png").read_bytes() == b"written by write_file earlier"
    assert (workspace / "chart-2.png").read_bytes() == shot.data
    await keep(result, workspace)  # the same call again after a crash: no third copy
    assert [p.name for p in attachments(workspace)] == ["chart-2.png", "chart.png"]


async def test_a_picture_no_longer_kept_is_named_instead_of_failing_the_resume(tmp_path: Path) -> None:
    step = ToolStep(call_id="c1", name="draw", result=ToolResult(text="drawn", pictures=(chart(),)))
    [again] = await load_steps([Step(seq=0, kind="tool", data=step.to_data())], tmp_path / "cleaned")
    assert isinstance(again, ToolStep) and again.result.pictures == ()
    assert again.result.text == ("drawn\n[image chart.png: image/png, 64x48, "
                                 f"{len(chart().data)} bytes; no longer kept, so it cannot be shown again]")
