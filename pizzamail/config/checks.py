"""The value types of config fields: a strict base type (no "1587" for a port) plus the check that
says what would be allowed, which :class:`ConfigError` shows next to the key and the wrong value.

A check takes a value and returns None when it is fine, or what would be allowed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

#: every section refuses keys it does not know (explained with "did you mean")
SECTION = ConfigDict(extra="forbid")

ADDRESS_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+$")
MODEL_RE = re.compile(r"^[a-z0-9_-]+:\S+$")
POLICIES = ("auto", "ask", "deny")
SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
TRIGGER_NAME_RE = SERVER_NAME_RE
_DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def setting(default: Any, doc: str) -> Any:
    """A config field: its default and a one-line description (``init`` writes it as a comment)."""
    if isinstance(default, list | dict):  # a fresh copy per instance, never a shared mutable
        return Field(default_factory=lambda: type(default)(default), description=doc)
    return Field(default=default, description=doc)


def checked(problem: Callable[[Any], str | None]) -> AfterValidator:
    def validate(value: Any) -> Any:
        found = problem(value)
        if found:
            raise ValueError(found)
        return value

    return AfterValidator(validate)


def unless_empty(problem: Callable[[str], str | None]) -> Callable[[str], str | None]:
    return lambda value: problem(value) if value else None


def one_of(choices: tuple[str, ...]) -> AfterValidator:
    return checked(lambda value: None if value in choices else ", ".join(choices))


def port_problem(value: int) -> str | None:
    # 0 asks the OS for a free port (used by tests); `serve` prints the port it got
    return None if 0 <= value <= 65535 else "an integer port from 0 to 65535"


def positive(value: int | float) -> str | None:
    return None if value > 0 else "a number greater than 0"


def not_negative(value: int) -> str | None:
    return None if value >= 0 else "0 or a greater number"


def address_problem(value: str) -> str | None:
    return None if ADDRESS_RE.match(value) else "an email address such as me@pizzamail.localhost"


def _bind_address(value: str) -> str:
    """An IP address; ``localhost`` is taken as 127.0.0.1 (servers, certificates and the loopback
    checks all work on addresses)."""
    value = "127.0.0.1" if value.lower() == "localhost" else value
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError("an IP address such as 127.0.0.1, or localhost") from None
    return value


def model_problem(value: str) -> str | None:
    return None if MODEL_RE.match(value) else "provider:model, such as openai:gpt-4.1-mini"


def user_problem(value: str) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9._-]{1,64}", value) else "letters, digits, . _ -"


def duration_seconds(value: str) -> int | None:
    """``30m``, ``2h``, ``1d`` -> seconds; '' (off) -> None. Checked first by duration_problem."""
    found = _DURATION.match(value)
    return int(found.group(1)) * _UNIT_SECONDS[found.group(2)] if found else None


def duration_problem(value: str) -> str | None:
    if value == "" or (duration_seconds(value) or 0) > 0:
        return None
    return 'a duration such as "30m", "2h" or "1d" (or "" for off)'


def policies_problem(value: dict[str, str]) -> str | None:
    bad = [v for v in value.values() if v not in POLICIES]
    return f"tool patterns mapped to {', '.join(POLICIES)}" if bad else None


def url_problem(value: str) -> str | None:
    if not value or value.startswith(("http://", "https://")):
        return None
    return "an http:// or https:// URL such as http://127.0.0.1:8000/mcp"


def pool_problem(value: int) -> str | None:
    # a write that saves a blob holds one connection and needs a second; a read may come meanwhile
    return None if value >= 3 else "at least 3 (a write may hold one connection and need another)"


def store_url_problem(value: str) -> str | None:
    from urllib.parse import parse_qs, urlsplit

    if not value:
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("postgresql", "postgres") or not parts.path.strip("/"):
        return "a PostgreSQL url such as postgresql://pizzamail@db.internal/pizzamail (empty: SQLite)"
    if parts.password or "password" in parse_qs(parts.query):
        return ("a url without its password: keep the password in the keyring with"
                " `pizzamail keys set store` (or $PGPASSWORD)")
    return None


def addresses_problem(value: list[str]) -> str | None:
    bad = [v for v in value if address_problem(v) is not None]
    return f"e-mail addresses (not {bad[0]!r})" if bad else None


def cron_problem(value: str) -> str | None:
    from pizzamail.when.cron import cron_problem  # croniter is imported only when used

    return cron_problem(value)


def when_problem(value: str) -> str | None:
    from pizzamail.when.phrases import when_to_cron

    return when_to_cron(value).problem or None


def template_problem(value: str) -> str | None:
    from pizzamail.when.templates import template_problem  # jinja2 is imported only when used

    return template_problem(value)


def tz_problem(value: str) -> str | None:
    from pizzamail.when.cron import tz_problem

    return tz_problem(value)


Port = Annotated[StrictInt, checked(port_problem)]
BindAddress = Annotated[StrictStr, AfterValidator(_bind_address)]
Count = Annotated[StrictInt, checked(positive)]
#: a count that may be 0 (nothing of it here)
Amount = Annotated[StrictInt, checked(not_negative)]
Seconds = Annotated[StrictFloat, checked(positive)]
Address = Annotated[StrictStr, checked(address_problem)]
Duration = Annotated[StrictStr, checked(duration_problem)]
Policies = Annotated[dict[str, StrictStr], checked(policies_problem)]
Zone = Annotated[StrictStr, checked(unless_empty(tz_problem))]
#: a prompt template (hooks, watches) that Jinja2 can read; empty means the default prompt
Template = Annotated[StrictStr, checked(unless_empty(template_problem))]
