"""A tiny MCP server for the tests, reached for real over stdio or streamable HTTP.

``python notes.py`` speaks stdio; ``python notes.py http PORT`` serves http://127.0.0.1:PORT/mcp and
``python notes.py sse PORT`` the legacy HTTP+SSE transport at http://127.0.0.1:PORT/sse.
Tools that change something leave a file in ``$NOTES_DIR``, so a test can prove that a held call
was never run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

mcp = MCPServer("notes", version="0.1")


def _notes() -> Path:
    return Path(os.environ.get("NOTES_DIR", "."))


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False))
def delete_note(name: str) -> str:
    """Delete a note."""
    (_notes() / f"deleted-{name}").write_text("gone")
    return f"deleted {name}"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(title: str) -> str:
    """Look up a note by title."""
    raise ToolError(f"no note titled {title!r}")


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Wait, then answer."""
    await anyio.sleep(seconds)
    return "done"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    """Die in the middle of the call."""
    os._exit(3)


if __name__ == "__main__":
    if os.environ.get("NOTES_PID_FILE"):  # lets a test check that the process is gone afterwards
        Path(os.environ["NOTES_PID_FILE"]).write_text(str(os.getpid()))
    if sys.argv[1:2] == ["http"]:
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif sys.argv[1:2] == ["sse"]:
        mcp.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
