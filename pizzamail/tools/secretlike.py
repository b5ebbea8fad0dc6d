"""Does a text look like it holds a secret? Used to refuse notes the agent would otherwise keep and
show in every later prompt and in ``memory.md``.

detect-secrets (Yelp) supplies the patterns for known token formats (GitHub, AWS, Slack, Stripe,
JWTs, private keys, ``password = "…"`` …): a maintained list beats one of our own. Only its pattern
and keyword plugins are used: its entropy plugins flag ordinary words in prose ("tomatoes"), and the
public-IP one is not about secrets. What it lacks is added here: current OpenAI and Anthropic keys
(``sk-proj-…``, ``sk-ant-…``) and payment card numbers (13-19 digits passing the Luhn check).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

_UNWANTED = {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"}
_MODEL_KEY = re.compile(r"\bsk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_-]{20,}")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")


def secret_kinds(text: str) -> list[str]:
    """The kinds of secret ``text`` seems to hold ("GitHub Token", "Payment card number" …), each once."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import transient_settings

    with transient_settings(_settings()):
        found = [s.type for line in text.splitlines() for s in scan_line(line)]
    if _MODEL_KEY.search(text):
        found.append("Model provider API key")
    if any(_luhn(re.sub(r"\D", "", m[0])) for m in _CARD.finditer(text)):
        found.append("Payment card number")
    return list(dict.fromkeys(found))


@cache
def _settings() -> dict[str, Any]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    plugins: list[type] = list(get_mapping_from_secret_type_to_class().values())
    names = sorted(c.__name__ for c in plugins)
    return {"plugins_used": [{"name": n} for n in names if n not in _UNWANTED]}


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        d = int(char) * (2 if position % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0
