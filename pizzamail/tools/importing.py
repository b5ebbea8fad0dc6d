"""``.mcp.json`` (the Claude Code format) to ``[mcp.servers.NAME]`` sections of config.toml.

Pure: JSON in, the sections' values out (``pizzamail mcp add`` writes them into config.toml).
Imported servers are disabled unless asked otherwise, because nothing should run that the user did
not enable here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pizzamail.errors import ToolError

_CLEAN = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, kw_only=True)
class Imported:
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """server name -> why it was not imported"""


def server_name(name: str) -> str:
    return _CLEAN.sub("-", name).strip("-")[:40] or "server"


def from_mcp_json(text: str, *, enable: bool) -> Imported:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ToolError(f"not an .mcp.json file: the text is not JSON ({exc})") from None
    servers = data.get("mcpServers", data) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ToolError("not an .mcp.json file: it has no mcpServers object")
    result = Imported()
    for raw_name, spec in servers.items():
        name = server_name(str(raw_name))
        try:
            result.sections[name] = _section(spec, enable=enable)
        except ValueError as exc:
            result.skipped[str(raw_name)] = str(exc)
    return result


def _section(spec: object, *, enable: bool) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise ValueError("not an object")
    kind = spec.get("type", "http" if "url" in spec else "stdio")
    section: dict[str, Any] = {"enabled": enable}
    if kind == "stdio":
        section["command"] = _str(spec.get("command"), "command")
        section["args"] = [str(a) for a in spec.get("args") or []]
        section["env"] = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    elif kind in ("http", "streamable-http", "streamable_http"):
        section["url"] = _str(spec.get("url"), "url")
        section["headers"] = {str(k): str(v) for k, v in (spec.get("headers") or {}).items()}
    else:
        raise ValueError(f"transport {kind!r} is not supported (only stdio and streamable HTTP)")
    return {k: v for k, v in section.items() if v not in ({}, [])}


def _str(value: object, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} is missing")
    return value
