"""Images in task mails reach the model as each provider's image parts, fitted and bounded; a model
without vision is told what each image is instead."""

from __future__ import annotations

import base64
import io
import random
from dataclasses import replace
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import make_msgid
from typing import Any

from PIL import Image

from pizzamail.intake.tasks import store_task
from pizzamail.mail.parse import parse_mail
from pizzamail.providers import Message
from pizzamail.providers.pictures import MAX_PICTURES, for_model, picture
from pizzamail.providers.types import Picture
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.anthropic_server import text as claude_text
from tests.fakes.bedrock_server import FakeBedrock
from tests.fakes.bedrock_server import text as bedrock_text
from tests.fakes.openai_server import FakeOpenAI, text
from tests.runner.conftest import Harness, bot_mails, plain
from tests.runner.test_runner_anthropic import claude  # noqa: F401  (a fixture)
from tests.runner.test_runner_bedrock import aws  # noqa: F401  (a fixture)


def png(width: int = 40, height: int = 30, colour: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def noisy(width: int, height: int, fmt: str = "PNG") -> bytes:
    """An image that compresses badly (random pixels)."""
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), random.Random(7).randbytes(width * height * 3)).save(out, fmt)
    return out.getvalue()


async def image_task(h: Harness, body: str, files: list[tuple[str, str, bytes]]) -> int:
    msg = EmailMessage(policy=SMTP)
    msg["From"], msg["To"] = "me@pizzamail.localhost", "bot@pizzamail.localhost"
    msg["Subject"], msg["Message-ID"] = "Look at this", make_msgid(domain="client.example")
    msg.set_content(body)
    for name, media_type, data in files:
        maintype, _, subtype = media_type.partition("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    raw = msg.as_bytes()
    stored = await store_task(h.store, h.blobs, raw, parse_mail(raw), agent=h.config.agent.address,
                              domain=h.config.domain)
    assert stored.run_id is not None
    return stored.run_id


def image_urls(message: dict[str, Any]) -> list[str]:
    return [p["image_url"]["url"] for p in message["content"] if p.get("type") == "image_url"]


async def test_a_png_in_a_task_mail_reaches_an_openai_model_as_an_image_part(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    image = png()
    fake_openai.script([text("A red rectangle.")])
    run_id = await image_task(harness, "What is in the picture?", [("shot.png", "image/png", image)])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    task = fake_openai.requests[0].messages[-1]
    assert task["role"] == "user"
    assert task["content"][0]["type"] == "text" and "What is in the picture?" in task["content"][0]["text"]
    assert image_urls(task) == ["data:image/png;base64," + base64.b64encode(image).decode()]


async def test_a_png_in_a_task_mail_reaches_an_anthropic_model_as_an_image_block(
    claude: Harness, fake_anthropic: FakeAnthropic  # noqa: F811
) -> None:
    image = png()
    fake_anthropic.script([claude_text("A red rectangle.")])
    run_id = await image_task(claude, "What is in the picture?", [("shot.png", "image/png", image)])
    async with claude.running() as runner:
        assert await claude.finish(runner, run_id) == "done"
    task = fake_anthropic.requests[0].messages[-1]
    assert task["content"][1:] == [{"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": base64.b64encode(image).decode()}}]


async def test_a_png_in_a_task_mail_reaches_a_bedrock_model_as_an_image_block(
    aws: Harness, fake_bedrock: FakeBedrock  # noqa: F811
) -> None:
    image = png()
    fake_bedrock.script([bedrock_text("A red rectangle.")])
    run_id = await image_task(aws, "What is in the picture?", [("shot.png", "image/png", image)])
    async with aws.running() as runner:
        assert await aws.finish(runner, run_id) == "done"
    task = fake_bedrock.requests[0].messages[-1]
    assert task["content"][1:] == [{"image": {"format": "png",
                                              "source": {"bytes": base64.b64encode(image).decode()}}}]


async def test_a_big_odd_image_is_sent_as_a_bounded_png_or_jpeg(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    big = noisy(2400, 1800, "BMP")  # 13 MB of noise in a format no provider takes
    fake_openai.script([text("Noise.")])
    run_id = await image_task(harness, "And this?", [("scan.bmp", "image/bmp", big)])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    [url] = image_urls(fake_openai.requests[0].messages[-1])
    kind, _, data = url.removeprefix("data:").partition(";base64,")
    sent = Image.open(io.BytesIO(base64.b64decode(data)))
    assert kind in ("image/png", "image/jpeg") and sent.format in ("PNG", "JPEG")
    assert max(sent.size) == 1568 and len(base64.b64decode(data)) <= 3_000_000


async def test_a_damaged_image_is_a_note_for_the_model_not_a_failed_run(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("The image was damaged.")])
    broken = png()[:60]
    run_id = await image_task(harness, "See attached.", [("broken.png", "image/png", broken)])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    task = fake_openai.requests[0].messages[-1]
    assert isinstance(task["content"], str)
    assert "[image broken.png (image/png) could not be read: the image data is damaged" in task["content"]


async def test_a_model_without_vision_is_told_what_the_image_is(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    settings = replace(harness.config.providers["openai"], vision=False)
    blind = harness.with_config(providers={"openai": settings})
    fake_openai.script([text("I cannot see it.")])
    run_id = await image_task(blind, "What colour?", [("shot.png", "image/png", png(800, 600))])
    async with blind.running() as runner:
        assert await blind.finish(runner, run_id) == "done"
    task = fake_openai.requests[0].messages[-1]
    assert isinstance(task["content"], str)
    assert "[image shot.png: image/png, 800x600" in task["content"]
    assert "cannot see images" in task["content"]
    [(_, mail)] = await bot_mails(blind.mailbox)
    assert "I cannot see it." in plain(mail)


async def test_a_follow_up_with_an_image_shows_both_mails_images_in_order(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    first, second = png(colour="red"), png(colour="blue")
    fake_openai.script([text("Red."), text("Blue.")])
    run_id = await image_task(harness, "One.", [("a.png", "image/png", first)])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
        [(_, reply)] = await bot_mails(harness.mailbox)
        follow = await _follow_up(harness, str(reply["Message-ID"]).strip("<>"), second)
        assert await harness.finish(runner, follow) == "done"
    sent = [url for m in fake_openai.requests[1].messages if m["role"] == "user" for url in image_urls(m)]
    assert sent == ["data:image/png;base64," + base64.b64encode(d).decode() for d in (first, second)]


async def _follow_up(h: Harness, reply_to: str, image: bytes) -> int:
    msg = EmailMessage(policy=SMTP)
    msg["From"], msg["To"] = "me@pizzamail.localhost", "bot@pizzamail.localhost"
    msg["Subject"], msg["Message-ID"] = "Re: Look at this", make_msgid(domain="client.example")
    msg["In-Reply-To"], msg["References"] = f"<{reply_to}>", f"<{reply_to}>"
    msg.set_content("And this one?")
    msg.add_attachment(image, maintype="image", subtype="png", filename="b.png")
    raw = msg.as_bytes()
    stored = await store_task(h.store, h.blobs, raw, parse_mail(raw), agent=h.config.agent.address,
                              domain=h.config.domain)
    assert stored.run_id is not None
    return stored.run_id


def _picture(n: int) -> Picture:
    made = picture(png(10 + n, 10), name=f"p{n}.png", media_type="image/png")
    assert isinstance(made, Picture)
    return made


def test_only_the_newest_pictures_are_sent_and_the_older_ones_are_named() -> None:
    pictures = tuple(_picture(n) for n in range(MAX_PICTURES + 2))
    messages = [Message(role="user", content="old", pictures=pictures[:3]),
                Message(role="user", content="new", pictures=pictures[3:])]
    shown = for_model(messages, vision=True)
    assert shown[0].pictures == pictures[2:3] and shown[1].pictures == pictures[3:]
    assert shown[0].content.splitlines()[1:] == [
        f"[image p{n}.png: image/png, {10 + n}x10, {len(pictures[n].data)} bytes; not shown again: only"
        " the most recent images are sent to the model]" for n in (0, 1)]


async def test_an_image_sent_as_octet_stream_is_known_by_its_name(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    image = png()
    fake_openai.script([text("Red.")])
    run_id = await image_task(harness, "Colour?", [("shot.png", "application/octet-stream", image)])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert image_urls(fake_openai.requests[0].messages[-1]) == [
        "data:image/png;base64," + base64.b64encode(image).decode()]
