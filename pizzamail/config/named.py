"""Validating one table against its section class, and the ``[KIND.NAME]`` sections' own rules: a
name of letters, digits, ``_`` and ``-``, and the keys each kind requires."""

from __future__ import annotations

from typing import TypeVar

from pizzamail.config.checks import TRIGGER_NAME_RE
from pizzamail.config.explain import validate
from pizzamail.errors import ConfigError

S = TypeVar("S")


def named_section(cls: type[S], kind: str, name: str, table: object, *,
                  required: dict[str, str] | None = None) -> S:
    """One ``[KIND.NAME]`` section (a schedule, hook, sender, watch): its name, its keys, and each
    ``required`` key (mapped to what to write there) present and not empty."""
    check_name(kind, name)
    return check_required(kind, name, validate(cls, table, f"{kind}.{name}"), required)


def check_name(kind: str, name: str) -> None:
    if not TRIGGER_NAME_RE.match(name):
        raise ConfigError(f"{kind}.{name}", name, "a name of letters, digits, _ and - (at most 40)")


def check_required(kind: str, name: str, settings: S, required: dict[str, str] | None) -> S:
    for key, wanted in (required or {}).items():
        if not getattr(settings, key):
            raise ConfigError(f"{kind}.{name}.{key}", "", wanted)
    return settings
