"""An MCP result's content blocks as text, pictures and files, whatever a server sends."""

from __future__ import annotations

import base64

import pytest
from mcp.types import CallToolResult, ImageContent, ResourceLink, TextContent

from pizzamail.tools import mcp_results
from pizzamail.tools.mcp_results import tool_result


async def test_a_damaged_image_is_still_attached_and_the_model_is_told_it_cannot_be_shown() -> None:
    broken = b"\x89PNG\r\n\x1a\n not really"
    result = await tool_result(CallToolResult(content=[
        ImageContent(type="image", data=base64.b64encode(broken).decode(), mime_type="image/png")]))
    assert [(f.name, f.data) for f in result.files] == [("image-1.png", broken)]
    assert result.pictures == ()
    assert "[image image-1.png (image/png) could not be read" in result.text


async def test_broken_base64_and_oversized_files_are_notes_not_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_results, "MAX_FILE_BYTES", 2048)
    big = base64.b64encode(bytes(2049)).decode()
    result = await tool_result(CallToolResult(content=[
        ImageContent(type="image", data="not base64!", mime_type="image/png"),
        ImageContent(type="image", data=big, mime_type="image/png")]))
    assert result.files == () and result.pictures == ()
    assert "could not be decoded: the tool sent broken base64" in result.text
    assert "image-2.png (image/png, 2 KB) is too large to attach; the limit is 2 KB" in result.text


async def test_links_are_named_and_structured_content_is_the_text_when_nothing_else_came() -> None:
    linked = await tool_result(CallToolResult(content=[
        TextContent(type="text", text="See:"),
        ResourceLink(type="resource_link", uri="https://example.com/a.pdf", name="a.pdf")]))
    assert linked.text.splitlines() == [
        "See:", "[a link to the resource https://example.com/a.pdf (a.pdf); it was not fetched]"]
    structured = await tool_result(CallToolResult(content=[], structured_content={"sum": 5}))
    assert structured.text == '{"sum": 5}' and not structured.is_error
    empty = await tool_result(CallToolResult(content=[], is_error=True))
    assert empty.text == "(the tool returned nothing)" and empty.is_error
