"""How a config field is declared and checked: ``setting()``, the value checks, and section parsing.

A check takes a value and returns None when it is fine, or what would be allowed (which
:class:`ConfigError` shows next to the key and the wrong value).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import field, fields
from typing import Any, TypeVar

from pizzamail.errors import ConfigError

ADDRESS_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+$")
MODEL_RE = re.compile(r"^[a-z0-9_-]+:\S+$")


def port_problem(value: int) -> str | None:
    # 0 asks the OS for a free port (used by tests); `serve` prints the port it got
    return None if 0 <= value <= 65535 else "an integer port from 0 to 65535"


def positive(value: int | float) -> str | None:
    return None if value > 0 else "a number greater than 0"


def address_problem(value: str) -> str | None:
    return None if ADDRESS_RE.match(value) else "an email address such as me@pizzamail.localhost"


def host_problem(value: str) -> str | None:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return "an IP address such as 127.0.0.1"
    return None


def model_problem(value: str) -> str | None:
    return None if MODEL_RE.match(value) else "provider:model, such as openai:gpt-4.1-mini"


def user_problem(value: str) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9._-]{1,64}", value) else "letters, digits, . _ -"


_DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(value: str) -> int | None:
    """``30m``, ``2h``, ``1d`` -> seconds; '' (off) -> None. Checked first by duration_problem."""
    found = _DURATION.match(value)
    return int(found.group(1)) * _UNIT_SECONDS[found.group(2)] if found else None


def duration_problem(value: str) -> str | None:
    if value == "" or (duration_seconds(value) or 0) > 0:
        return None
    return 'a duration such as "30m", "2h" or "1d" (or "" for off)'


def setting(default: Any, doc: str, check: Any = None) -> Any:
    """A config field: its default, a one-line description, and an optional validator."""
    if isinstance(default, list | dict):  # a fresh copy per instance, never a shared mutable
        return field(default_factory=lambda: type(default)(default), metadata={"doc": doc, "check": check})
    return field(default=default, metadata={"doc": doc, "check": check})


POLICIES = ("auto", "ask", "deny")
SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")


def policies_problem(value: dict[str, str]) -> str | None:
    bad = [v for v in value.values() if v not in POLICIES]
    return f"tool patterns mapped to {', '.join(POLICIES)}" if bad else None


def url_problem(value: str) -> str | None:
    if not value or value.startswith(("http://", "https://")):
        return None
    return "an http:// or https:// URL such as http://127.0.0.1:8000/mcp"



def addresses_problem(value: list[str]) -> str | None:
    bad = [v for v in value if not isinstance(v, str) or address_problem(v) is not None]
    return f"e-mail addresses (not {bad[0]!r})" if bad else None



S = TypeVar("S")


def section(cls: type[S], data: object, prefix: str) -> S:
    if not isinstance(data, dict):
        raise ConfigError(prefix, data, "a table")
    known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
    for key in data:
        if key not in known:
            raise ConfigError(f"{prefix}.{key}", data[key], "one of " + ", ".join(known))
    values: dict[str, Any] = {}
    for name, value in data.items():
        values[name] = _check(known[name], value, f"{prefix}.{name}")
    return cls(**values)


_TYPES: dict[str, tuple[type, str]] = {
    "int": (int, "a whole number"), "str": (str, "a quoted string"),
    "float": (float, "a number"), "bool": (bool, "true or false"),
    "list[str]": (list, "a list of quoted strings"),
    "dict[str, str]": (dict, "a table of quoted strings"),
}


def _check(f: Any, value: object, key: str) -> object:
    expected, described = _TYPES[f.type]
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigError(key, value, described)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    if any(not isinstance(item, str) for item in items):
        raise ConfigError(key, value, described)
    check = f.metadata.get("check")
    problem = check(value) if check else None
    if problem:
        raise ConfigError(key, value, problem)
    return value



TRIGGER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")


def named(data: object, prefix: str, build: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(prefix, data, f"a table of [{prefix}.NAME] sections")
    return {name: build(name, table) for name, table in data.items()}


def named_section(cls: type[S], kind: str, name: str, table: object, *,
                  required: dict[str, str] | None = None) -> S:
    """One ``[KIND.NAME]`` section (a schedule, hook, sender, watch): its name, its keys, and each
    ``required`` key (mapped to what to write there) present and not empty."""
    prefix = f"{kind}.{name}"
    if not TRIGGER_NAME_RE.match(name):
        raise ConfigError(prefix, name, "a name of letters, digits, _ and - (at most 40)")
    settings = section(cls, table, prefix)
    for key, wanted in (required or {}).items():
        if not getattr(settings, key):
            raise ConfigError(f"{prefix}.{key}", "", wanted)
    return settings



def one_of(choices: tuple[str, ...]) -> Callable[[str], str | None]:
    return lambda value: None if value in choices else ", ".join(choices)
