"""Documents read as text by read_attachment, and binary files written by write_file, in real runs
with the scripted model: what the model receives is what is checked."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from pizzamail.tools.documents import Part, read_document
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import Harness, bot_mails
from tests.tools.conftest import with_tools
from tests.tools.documents import encrypted_pdf, make_docx, make_pdf, make_xlsx
from tests.tools.test_builtins import task_with_attachment

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


async def model_reads(harness: Harness, fake_openai: FakeOpenAI, name: str, data: bytes, kind: str,
                      *calls: dict[str, Any]) -> list[str]:
    """The tool results the model receives for ``read_attachment`` calls with ``calls``' arguments."""
    run_id = await task_with_attachment(harness, "Read the attachment", name, data, kind)
    fake_openai.script([*(tool_call("read_attachment", {"name": name, **c}, call_id=f"call_{n}")
                          for n, c in enumerate(calls)), text("Read.")])
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    return [fake_openai.requests[n + 1].messages[-1]["content"] for n in range(len(calls))]


async def test_a_pdf_is_read_as_text_page_by_page(harness: Harness, fake_openai: FakeOpenAI) -> None:
    pdf = make_pdf(["Invoice 42 total 99 EUR", "Terms net 30 days", "Bank IBAN DE00"])
    whole, middle, past = await model_reads(harness, fake_openai, "invoice.pdf", pdf, PDF,
                                            {}, {"pages": "2-3"}, {"pages": "7"})
    assert "[page 1 of 3]\nInvoice 42 total 99 EUR" in whole and "Bank IBAN DE00" in whole
    assert "Invoice 42" not in middle
    assert "[page 2 of 3]\nTerms net 30 days" in middle and "Bank IBAN DE00" in middle
    assert past == "ERROR: invoice.pdf: there are only 3 pages"


async def test_a_pdf_sent_as_octet_stream_is_still_read(harness: Harness, fake_openai: FakeOpenAI) -> None:
    [shown] = await model_reads(harness, fake_openai, "scan-0001.pdf", make_pdf(["Hello from a PDF"]),
                                "application/octet-stream", {})
    assert "Hello from a PDF" in shown


async def test_a_long_pdf_is_cut_with_the_pages_to_ask_for_next(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    pdf = make_pdf([f"Page {n} " + "lorem ipsum " * 400 for n in range(1, 9)])
    first, rest = await model_reads(harness, fake_openai, "long.pdf", pdf, PDF, {}, {"pages": "4-8"})
    assert len(first) <= 16_000 + 200
    assert "Page 3 lorem" in first and "Page 4 lorem" not in first
    assert first.endswith('pages 4-8 not shown; call read_attachment with pages="4-8" for them]')
    assert "Page 4 lorem" in rest


async def test_a_scanned_pdf_says_it_has_no_text_layer(harness: Harness, fake_openai: FakeOpenAI) -> None:
    [shown] = await model_reads(harness, fake_openai, "scan.pdf", make_pdf(["", ""]), PDF, {})
    assert shown.startswith("scan.pdf: this PDF has no text layer (scanned?)")


@pytest.mark.parametrize(("data", "says"), [
    (encrypted_pdf("Payroll", "s3cret"), "protected with a password"),
    (b"%PDF-1.4\n1 0 obj << /Type /Catalog", "looks damaged"),
])
async def test_an_encrypted_or_broken_pdf_is_an_error_result_not_a_crash(
    harness: Harness, fake_openai: FakeOpenAI, data: bytes, says: str
) -> None:
    [shown] = await model_reads(harness, fake_openai, "x.pdf", data, PDF, {})
    # and the run went on to its answer: model_reads checks that it is done
    assert shown.startswith("ERROR: x.pdf") and says in shown


async def test_a_docx_is_read_with_its_table(harness: Harness, fake_openai: FakeOpenAI) -> None:
    docx = make_docx(["Contract between Acme and Bob", "Term: two years"],
                     [["Item", "Price"], ["Hosting", "120 EUR"]])
    [shown] = await model_reads(harness, fake_openai, "contract.docx", docx, DOCX, {})
    assert shown == "Contract between Acme and Bob\nTerm: two years\nItem | Price\nHosting | 120 EUR"


async def test_a_broken_docx_is_an_error_result(harness: Harness, fake_openai: FakeOpenAI) -> None:
    [shown] = await model_reads(harness, fake_openai, "contract.docx", b"PK\x03\x04 not a zip", DOCX, {})
    assert shown.startswith("ERROR: contract.docx could not be read: the DOCX file looks damaged")


async def test_a_spreadsheet_is_read_by_sheet_and_rows(harness: Harness, fake_openai: FakeOpenAI) -> None:
    xlsx = make_xlsx({"Invoice": [["Item", "Qty", "Price", "Total"], ["Pizza", 2, 6, "=B2*C2"],
                                  ["Cola", 3, 2, "=B3*C3"]],
                      "Notes": [["Paid by card"], ["By 1 May"]]})
    first, notes, missing = await model_reads(  # the harness allows four model calls
        harness, fake_openai, "invoice.xlsx", xlsx, XLSX,
        {}, {"sheet": "Notes", "rows": "2"}, {"sheet": "Taxes"})
    assert first == ('[invoice.xlsx, sheet "Invoice" (other sheets: Notes): rows 1-3]\n'
                     "Item,Qty,Price,Total\nPizza,2,6,=B2*C2\nCola,3,2,=B3*C3\n")
    assert notes == '[invoice.xlsx, sheet "Notes" (other sheets: Invoice): rows 2-2]\nBy 1 May\n'
    assert missing == "ERROR: invoice.xlsx: there is no sheet 'Taxes'; the sheets are: Invoice, Notes"


async def test_a_long_csv_is_cut_with_the_rows_to_ask_for_next(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    data = b"n,square\n" + b"".join(b"%d,%d\n" % (n, n * n) for n in range(1, 5000))
    first, tail = await model_reads(harness, fake_openai, "squares.csv", data, "text/csv",
                                    {}, {"rows": "4999-"})
    cut = first.rsplit("\n", 1)[-1]
    assert cut.startswith("[… cut at row ") and 'for the rest]' in cut
    row = int(cut.split("row ")[1].split(";")[0])
    assert f"{row - 2},{(row - 2) ** 2}\n" in first and f"\n{row - 1},{(row - 1) ** 2}\n" not in first
    assert tail == "[squares.csv: rows 4999-5000]\n4998,24980004\n4999,24990001\n"


async def test_html_is_read_as_text(harness: Harness, fake_openai: FakeOpenAI) -> None:
    page = b"<html><head><style>p{}</style></head><body><h1>Menu</h1><p>Margherita &amp; Diavola</p></body>"
    [shown] = await model_reads(harness, fake_openai, "menu.html", page, "text/html", {})
    assert shown == "Menu\n\nMargherita & Diavola"


async def test_a_binary_file_is_attached_to_the_reply_byte_identical(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    data = bytes(range(256)) * 4 + b"\r\n\x00\xff"  # not text: every byte value, a CRLF, NULs
    fake_openai.script([
        tool_call("write_file", {"name": "chart.png", "content_base64": base64.b64encode(data).decode()}),
        tool_call("write_file", {"name": "raw.txt", "content_base64": base64.b64encode(data).decode()},
                  call_id="call_2"),
        text("The chart is attached.")])
    run_id = await harness.task("Draw a chart")
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    [(_, mail)] = await bot_mails(harness.mailbox)
    files = {a.get_filename(): a for a in mail.iter_attachments()}
    assert files["chart.png"].get_content_type() == "image/png"
    assert files["chart.png"].get_payload(decode=True) == data
    assert files["raw.txt"].get_payload(decode=True) == data


@pytest.mark.parametrize(("arguments", "says"), [
    ({"name": "a.bin", "content_base64": "not base64!"}, "not valid base64"),
    ({"name": "a.bin"}, "give exactly one of content"),
    ({"name": "a.bin", "content": "x", "content_base64": "eA=="}, "give exactly one of content"),
    ({"name": "a.bin", "content_base64": base64.b64encode(b"x" * 2048).decode()}, "over the limit"),
])
async def test_write_file_refuses_bad_or_too_large_binary_content(
    harness: Harness, fake_openai: FakeOpenAI, arguments: dict[str, Any], says: str
) -> None:
    fake_openai.script([tool_call("write_file", arguments), text("Could not.")])
    run_id = await harness.task("Write it")
    async with harness.running(**with_tools(harness, max_file_bytes=1024)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert says in fake_openai.requests[1].messages[-1]["content"]
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert not list(mail.iter_attachments())


def test_a_page_longer_than_a_reading_says_it_was_cut() -> None:
    reading = read_document("pdf", "x.pdf", make_pdf(["word " * 100, "second page"]), Part(), limit=100)
    assert "[… page 1 cut after 100 of its 499 characters]" in reading.text
    assert reading.text.endswith('pages 2-2 not shown; call read_attachment with pages="2-2" for them]')
