"""An approved call whose tool returns a file and an image: the reply carries the file, and the model
sees the image in the request that follows the release."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from pizzamail.providers.pictures import picture
from pizzamail.providers.types import Picture
from pizzamail.tools import ToolResult
from pizzamail.transcript import ToolFile
from tests.approvals.conftest import Approvals, reply
from tests.fakes.openai_server import FakeOpenAI, text
from tests.runner.conftest import bot_mails


def receipt_png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (30, 20), "yellow").save(out, "PNG")
    return out.getvalue()


async def test_an_approved_calls_file_is_attached_and_its_image_shown(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    shot = picture(receipt_png(), name="receipt.png", media_type="image/png")
    assert isinstance(shot, Picture)

    async def deleted_with_a_receipt(arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(text="deleted; receipt attached", pictures=(shot,),
                          files=(ToolFile(name="receipt.png", media_type="image/png", data=receipt_png()),))

    approvals.tool.call = deleted_with_a_receipt  # type: ignore[method-assign]
    run_id = await approvals.held(fake_openai, text("Deleted; the receipt is attached."))
    request = [m for _, m in await bot_mails(approvals.harness.mailbox) if m["X-Pizzamail-Approval"]][-1]
    await approvals.submit(reply(request, "approve"))
    assert await approvals.finish(run_id) == "done"
    final = (await bot_mails(approvals.harness.mailbox))[-1][1]
    [attachment] = final.iter_attachments()
    assert attachment.get_filename() == "receipt.png"
    assert attachment.get_payload(decode=True) == receipt_png()
    *_, result, shown = fake_openai.requests[-1].messages
    assert result["content"] == "deleted; receipt attached"
    assert shown["content"][1]["type"] == "image_url"
