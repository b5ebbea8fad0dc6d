"""Model providers behind one interface: ``complete(messages, tools) -> Response``."""

from __future__ import annotations

from pizzamail.providers.registry import KINDS, ProviderArgs, check_kinds, provider_for, register_kind
from pizzamail.providers.types import Message, Provider, Response, ToolCall, ToolSpec, Usage

__all__ = [
    "KINDS",
    "Message",
    "Provider",
    "ProviderArgs",
    "Response",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "check_kinds",
    "provider_for",
    "register_kind",
]
