"""Which tool calls run by themselves: ``auto`` (run), ``ask`` (hold for approval), ``deny``.

A tool's default comes from what it says about itself (MCP annotations); the user's rules in
config.toml override it. Rules are ``fnmatch`` globs over tool names: an exact name beats any glob,
and among globs the longest (the most specific) wins, so ``"*" = "ask"`` and ``"read_*" = "auto"``
mean what they say in either order.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Literal, cast

if TYPE_CHECKING:  # the MCP SDK takes most of a second to import; a type needs none of it
    from mcp.types import ToolAnnotations

Policy = Literal["auto", "ask", "deny"]


def from_annotations(annotations: ToolAnnotations | None) -> Policy:
    """The default for an MCP tool.

    A tool that declares itself read-only runs. Everything else asks: destructive and open-world
    tools by the spec's own reading, and a tool that says nothing because the spec's defaults for
    a silent tool are "destructive" and "open world" too.
    """
    if annotations is not None and annotations.read_only_hint:
        return "auto"
    return "ask"


def match_rule(rules: dict[str, str], name: str) -> Policy | None:
    """The rule for ``name``: an exact entry, else the longest matching glob, else None."""
    if name in rules:
        return cast(Policy, rules[name])
    matching = [pattern for pattern in rules if fnmatchcase(name, pattern)]
    if not matching:
        return None
    return cast(Policy, rules[max(matching, key=len)])


STRICTNESS: dict[str, int] = {"auto": 0, "ask": 1, "deny": 2}


def strictest_rule(tables: tuple[dict[str, str], ...], name: str) -> Policy | None:
    """The strictest answer (deny > ask > auto) among the tables that have a rule for ``name``."""
    strictest: Policy | None = None
    for table in tables:
        rule = match_rule(table, name)
        if rule is not None and (strictest is None or STRICTNESS[rule] > STRICTNESS[strictest]):
            strictest = rule
    return strictest


def effective(
    default: Policy, *, rules: list[tuple[dict[str, str], str]], never_auto: bool = False
) -> Policy:
    """The first rule set (most specific first) with a rule for its name decides; else ``default``.

    ``never_auto`` tools (sending mail) may be denied by a rule but never made automatic.
    """
    policy = default
    for table, name in rules:
        found = match_rule(table, name)
        if found is not None:
            policy = found
            break
    if never_auto and policy == "auto":
        return "ask"
    return policy


def overlay(policy: Policy, rule: Policy | None, *, decided: bool, never_auto: bool = False) -> Policy:
    """An agent's own ``rule`` (``[agents.NAME.policy]``) on top of ``policy``, what the other rules
    gave. Where a user's rule ``decided`` that too, the stricter answer wins (deny > ask > auto);
    where only the tool's own default did, the agent's rule decides. ``never_auto`` tools still ask."""
    if rule is None:
        return policy
    chosen = max(policy, rule, key=STRICTNESS.__getitem__) if decided else rule
    return "ask" if never_auto and chosen == "auto" else chosen
