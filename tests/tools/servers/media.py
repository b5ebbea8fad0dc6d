"""A tiny MCP server whose tools return files, not text: an image, an audio clip, an embedded binary
resource and a text resource. ``python media.py`` speaks stdio.

The bytes come from functions the tests import too, so a test can compare what arrives with what was
sent, byte for byte.
"""

from __future__ import annotations

import base64
import io

from mcp.server import MCPServer
from mcp.server.mcpserver import Audio, Image
from mcp.types import (
    BlobResourceContents,
    EmbeddedResource,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from PIL import Image as Pillow

mcp = MCPServer("media", version="0.1")
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def chart_png() -> bytes:
    """A small chart: two bars."""
    image = Pillow.new("RGB", (120, 80), "white")
    image.paste((200, 30, 30), (10, 20, 50, 80))
    image.paste((30, 30, 200), (70, 40, 110, 80))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def beep_wav() -> bytes:
    return b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(32))


def report_bytes() -> bytes:
    return b"%PDF-1.4\n% not really a PDF, but binary all the same\n\x00\x01\x02\xff"


@mcp.tool(annotations=READ_ONLY)
def chart() -> list[TextContent | Image]:
    """Draw the sales chart."""
    return [TextContent(type="text", text="Sales by quarter:"), Image(data=chart_png(), format="png")]


@mcp.tool(annotations=READ_ONLY)
def beep() -> Audio:
    """Record a beep."""
    return Audio(data=beep_wav(), format="wav")


@mcp.tool(annotations=READ_ONLY)
def report() -> list[EmbeddedResource]:
    """Export the report and its summary."""
    blob = BlobResourceContents(uri="file:///exports/q3-report.pdf", mime_type="application/pdf",
                                blob=base64.b64encode(report_bytes()).decode())
    summary = TextResourceContents(uri="file:///exports/summary.md", mime_type="text/markdown",
                                   text="# Q3\nSales went up.\n")
    return [EmbeddedResource(type="resource", resource=blob),
            EmbeddedResource(type="resource", resource=summary)]


if __name__ == "__main__":
    mcp.run()
