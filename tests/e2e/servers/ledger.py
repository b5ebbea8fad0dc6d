"""A tiny stdio MCP server whose tools leave a line per call in ``$LEDGER_FILE``, so a test can count
how often an approved action really ran: ``pay`` is not idempotent, ``set_limit`` is (both ask for
approval). A payee named ``block`` never finishes: the test kills pizzamail in the middle of that
call."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

mcp = MCPServer("ledger", version="0.1")


@mcp.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False, open_world_hint=True))
async def pay(payee: str, amount: int) -> str:
    """Pay someone."""
    _record(f"{payee} {amount}\n")
    if payee == "block":
        await anyio.sleep_forever()
    return f"paid {amount} to {payee}"


@mcp.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=True))
async def set_limit(amount: int) -> str:
    """Set the spending limit (setting it twice to the same amount changes nothing)."""
    _record(f"limit {amount}\n")
    return f"limit set to {amount}"


def _record(line: str) -> None:
    with Path(os.environ["LEDGER_FILE"]).open("a") as ledger:
        ledger.write(line)


if __name__ == "__main__":
    mcp.run()
