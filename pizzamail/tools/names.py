"""Tool names as providers accept them, and the way back.

MCP tool names may be up to 128 characters of ``[A-Za-z0-9._-]``; OpenAI, Anthropic and Bedrock
accept ``[A-Za-z0-9_-]{1,64}``. A tool is exposed as ``server__tool``; a name that has to change
(a character replaced, or too long) gets a short hash of the original, so two different tools never
meet under one name and the mapping stays stable across restarts (checkpoints store these names).
"""

from __future__ import annotations

import hashlib
import re

MAX_LEN = 64
SEPARATOR = "__"
_BAD = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LEN = 8


def exposed_name(server: str, tool: str) -> str:
    base = f"{server}{SEPARATOR}{tool}"
    clean = _BAD.sub("_", base)
    if clean == base and len(base) <= MAX_LEN:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()[:_HASH_LEN]
    return f"{clean[:MAX_LEN - _HASH_LEN - 1]}_{digest}"


def belongs_to(name: str, server: str) -> bool:
    """Whether ``name`` looks like one of ``server``'s tools (server names are already clean)."""
    return name.startswith(f"{server}{SEPARATOR}")


class NameMap:
    """Exposed name <-> (server, tool) for the tools currently listed."""

    def __init__(self) -> None:
        self._back: dict[str, tuple[str, str]] = {}

    def add(self, server: str, tool: str) -> str:
        name = exposed_name(server, tool)
        self._back[name] = (server, tool)
        return name

    def lookup(self, name: str) -> tuple[str, str] | None:
        return self._back.get(name)
