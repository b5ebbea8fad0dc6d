"""The pure webhook parts without a server: the nesting count that guards the JSON parser, and the
signature checks at fixed clocks (the HTTP side is tests/triggers/test_webhook_abuse.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pizzamail.errors import HttpRefusal
from pizzamail.triggers.hooks import json_depth, render_prompt
from pizzamail.triggers.signatures import WINDOW, check, sign, sign_standard

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.sampled_from('[]{}"\\,:ab\n')),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=30,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@given(JSON, st.booleans())
def test_the_nesting_count_agrees_with_the_parsed_value(value: Any, indent: bool) -> None:
    """Brackets, quotes and backslashes inside strings never count: only real nesting does."""
    text = json.dumps(value, indent=2 if indent else None, ensure_ascii=False)
    assert json_depth(text, stop=1000) == depth(value)


def test_the_count_stops_early_and_survives_malformed_text() -> None:
    assert json_depth("[" * 1_000_000, stop=64) == 65
    assert json_depth('"unterminated \\" [[[[') == 0
    assert json_depth("]]]] [[") == 2


def test_a_rendering_is_bounded_and_has_no_lone_surrogates() -> None:
    with pytest.raises(HttpRefusal) as refused:
        render_prompt("{% for a in payload %}{{ payload }}{% endfor %}", list(range(1000)), hook="h",
                      limit=5000)
    assert refused.value.status == 413
    assert render_prompt("{{ payload.t }}", {"t": "a\ud800b"}, hook="h", limit=100) == "a\ufffdb"
    wide = [[[0] * 1000]]
    assert render_prompt("", wide, hook="h", limit=3000).endswith("[[[" + ",".join(["0"] * 1000) + "]]]")


def test_a_template_error_keeps_its_detail_off_the_wire() -> None:
    with pytest.raises(HttpRefusal) as refused:
        render_prompt("{{ 1 // payload }}", 0, hook="h", limit=100)
    assert "ZeroDivisionError" in str(refused.value.detail)
    assert "ZeroDivision" not in str(refused.value.http_response().body())


BODY, NOW = b'{"a": 1}', 1_700_000_000


def test_the_window_counts_from_the_signed_timestamp_both_ways() -> None:
    for at, ok in [(NOW - WINDOW, True), (NOW + WINDOW, True), (NOW - WINDOW - 1, False),
                   (NOW + WINDOW + 1, False)]:
        headers = {"x-pizzamail-timestamp": str(at), "x-pizzamail-delivery": "d",
                   "x-pizzamail-signature": sign("s", str(at), BODY)}
        standard = {"webhook-id": "m", "webhook-timestamp": str(at),
                    "webhook-signature": sign_standard("s", "m", str(at), BODY)}
        for scheme, sent in (("hmac", headers), ("standard", standard)):
            if ok:
                assert check(scheme, "s", sent, BODY, now=NOW).signed_at == at
            else:
                with pytest.raises(HttpRefusal, match="window"):
                    check(scheme, "s", sent, BODY, now=NOW)


def test_both_schemes_name_the_same_delivery_by_a_different_digest() -> None:
    stamp = str(NOW)
    ours = check("hmac", "s", {"x-pizzamail-timestamp": stamp, "x-pizzamail-delivery": "d",
                               "x-pizzamail-signature": sign("s", stamp, BODY)}, BODY, now=NOW)
    standard = {"webhook-id": "d", "webhook-timestamp": stamp,
                "webhook-signature": sign_standard("s", "d", stamp, BODY)}
    theirs = check("standard", "s", standard, BODY, now=NOW)
    assert ours.id == theirs.id == "d" and len(ours.digest) == len(theirs.digest) == 64
    assert ours.digest != theirs.digest
    bearer = check("bearer", "s", {"authorization": "Bearer s"}, BODY, now=NOW)
    assert (bearer.id, bearer.digest) == ("", "")
