"""Every enabled server of ``[mcp.servers]``: started together, offered to runs as tools.

The MCP SDK comes in with the first enabled server (:mod:`pizzamail.tools.mcp`): without one, as
after ``pizzamail init``, ``serve`` never loads it, and is 18 MB smaller.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pizzamail.config import McpSettings
from pizzamail.secrets import SecretStore
from pizzamail.tools import Offer, RunScope, Unavailable

if TYPE_CHECKING:
    from pizzamail.tools.mcp import McpConnection


@dataclass(kw_only=True)
class McpHub:
    """The connections, one for each enabled server, and what they offer runs."""

    settings: McpSettings
    secrets: SecretStore | None = None
    log_dir: Path | None = None
    cwd: Path | None = None
    rules: dict[str, str] = field(default_factory=dict)
    """``[tools.policy]``, applied after each server's own ``policy`` table"""
    connections: dict[str, McpConnection] = field(default_factory=dict)

    def __post_init__(self) -> None:
        enabled = {name: server for name, server in self.settings.servers.items() if server.enabled}
        if not enabled:
            return
        from pizzamail.tools.mcp import McpConnection

        for name, server in enabled.items():
            self.connections[name] = McpConnection(
                name=name, settings=server, startup_timeout=self.settings.startup_timeout,
                retry_initial=self.settings.retry_initial, retry_max=self.settings.retry_max,
                secrets=self.secrets, log_dir=self.log_dir, cwd=self.cwd,
            )

    async def start(self) -> None:
        """Start every server at once; wait until each is ready or has failed its first start."""
        for connection in self.connections.values():
            connection.start()
        waits = [asyncio.create_task(c.first_outcome.wait()) for c in self.connections.values()]
        if waits:
            # a margin over the startup timeout: a failed start also has to shut its process down
            _, pending = await asyncio.wait(waits, timeout=self.settings.startup_timeout + 5)
            for wait in pending:
                wait.cancel()

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()))

    async def __aenter__(self) -> McpHub:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def offer(self, scope: RunScope) -> Offer:
        offer = Offer()
        for name, connection in self.connections.items():
            if connection.status != "ready":
                why = connection.error or connection.status
                offer.unavailable.append(Unavailable(server=name, reason=why))
                continue
            offer.tools.extend(connection.offered(self.rules))
        return offer
