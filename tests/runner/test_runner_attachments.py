"""A task mail's files reach the model with it: a PNG as each provider's image part, a PDF as its
text (bounded, with how to read the rest), a file that is no document as a line naming it."""

from __future__ import annotations

import base64
import io
import json
import zipfile

from pizzamail.store.threads import thread_messages
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.anthropic_server import text as claude_text
from tests.fakes.openai_server import FakeOpenAI, text
from tests.runner.conftest import Harness
from tests.runner.test_runner_anthropic import claude  # noqa: F401  (a fixture)
from tests.runner.test_runner_pictures import image_task, image_urls, png
from tests.tools.documents import make_pdf, make_xlsx

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
INVOICE = make_pdf(["Invoice 2026-114", "Total due: 1,250.00 EUR by 15 December"])


async def test_a_png_and_a_pdf_reach_an_openai_model_as_an_image_part_and_as_text(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    image = png()
    fake_openai.script([text("Pay 1,250 EUR.")])
    run_id = await image_task(harness, "What do I owe?", [("shot.png", "image/png", image),
                                                           ("invoice.pdf", "application/pdf", INVOICE),
                                                           ("blob.bin", "application/octet-stream", b"\0\1")])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    task = fake_openai.requests[0].messages[-1]
    [said] = [p["text"] for p in task["content"] if p.get("type") == "text"]
    assert said.startswith("What do I owe?")
    assert "[attached: invoice.pdf]" in said and "Total due: 1,250.00 EUR by 15 December" in said
    assert "[attached: blob.bin (application/octet-stream, 2 bytes)]" in said
    assert image_urls(task) == ["data:image/png;base64," + base64.b64encode(image).decode()]


async def test_a_png_and_a_pdf_reach_an_anthropic_model_as_an_image_block_and_as_text(
    claude: Harness, fake_anthropic: FakeAnthropic  # noqa: F811
) -> None:
    image = png()
    fake_anthropic.script([claude_text("Pay 1,250 EUR.")])
    run_id = await image_task(claude, "What do I owe?", [("invoice.pdf", "application/pdf", INVOICE),
                                                          ("shot.png", "image/png", image)])
    async with claude.running() as runner:
        assert await claude.finish(runner, run_id) == "done"
    task = fake_anthropic.requests[0].messages[-1]
    blocks = task["content"]
    assert blocks[0]["type"] == "text" and "Invoice 2026-114" in blocks[0]["text"]
    assert {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                       "data": base64.b64encode(image).decode()}} in blocks


async def test_a_long_document_is_cut_in_the_turn_saying_how_to_read_the_rest(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    long_text = "\n".join(f"line {n}: " + "x" * 60 for n in range(400))  # about 28,000 characters
    fake_openai.script([text("Long.")])
    run_id = await image_task(harness, "Summarise", [("notes.txt", "text/plain", long_text.encode())])
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    said = str(fake_openai.requests[0].messages[-1]["content"])
    assert "[attached: notes.txt]" in said and "line 0: " in said and "line 399" not in said
    assert "call read_attachment with offset=8000 for the rest" in said


def _broken_sheet() -> bytes:
    """An XLSX whose first sheet's XML is cut off: openpyxl raises an XML ParseError on it."""
    source = zipfile.ZipFile(io.BytesIO(make_xlsx({"Sheet": [["a", "b"], ["1", "2"]]})))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as broken:
        for item in source.infolist():
            data = source.read(item)
            broken.writestr(item, data[: len(data) // 2] if item.filename.endswith("sheet1.xml") else data)
    return out.getvalue()


async def test_damaged_documents_are_a_line_each_and_every_later_run_in_the_thread_still_runs(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    huge_field = b'name,notes\nann,"' + b"x" * 200_000 + b'"\n'  # past the csv module's field limit
    fake_openai.script([text("Seen."), text("And again.")])
    first = await image_task(harness, "Look", [("notes.csv", "text/csv", huge_field),
                                              ("book.xlsx", XLSX, _broken_sheet())])
    async with harness.running() as runner:
        assert await harness.finish(runner, first) == "done"
        follow_up = await harness.task("And now?", subject="Re: Look", reply_to=await _task_id(harness))
        assert await harness.finish(runner, follow_up) == "done"
    for request in fake_openai.requests:
        said = json.dumps(request.messages)
        assert "notes.csv could not be read: the CSV file looks damaged" in said
        assert "book.xlsx could not be read: the XLSX file looks damaged" in said


async def _task_id(harness: Harness) -> str:
    task, _reply = await thread_messages(harness.store, 1)
    return task.message_id
