"""The tools an agent may call, behind one registry.

Empty by default; MCP servers and built-ins add themselves through :meth:`ToolRegistry.add`.
A failure the model can fix (unknown tool, bad arguments, a tool reporting an error) is a
:class:`ToolResult` with ``is_error`` set that goes back into the conversation; an exception raised by
a tool is our failure and stops the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pizzamail.providers.types import ToolSpec


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    text: str
    is_error: bool = False


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    async def call(self, arguments: dict[str, Any]) -> ToolResult: ...


@dataclass(kw_only=True)
class ToolRegistry:
    _tools: dict[str, Tool] = field(default_factory=dict)

    def add(self, tool: Tool) -> None:
        name = tool.spec.name
        if name in self._tools:
            raise ValueError(f"a tool named {name!r} is already registered")
        self._tools[name] = tool

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return ToolResult(text=f"there is no tool named {name!r}; available tools: {known}",
                              is_error=True)
        return await tool.call(arguments)
