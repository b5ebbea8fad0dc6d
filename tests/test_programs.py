"""The switch that turns a missing real client from a skip into a failure (tests/programs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.programs import REQUIRE_CLIENTS, missing, require

NOWHERE = "pizzamail-no-such-program"
MARKED = f"""
from tests.programs import missing, needs

@needs(missing("{NOWHERE}", install="apt-get install nothing"))
def test_drives_it() -> None:
    pass
"""


def test_a_missing_program_is_named_with_the_command_that_installs_it() -> None:
    assert missing(NOWHERE, "sh", install="x") is None
    assert missing(NOWHERE, install="apt-get install nothing") == (
        f"{NOWHERE} not installed (apt-get install nothing)")


def test_a_missing_program_skips_on_a_developer_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_CLIENTS, raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"{NOWHERE} not installed"):
        require(missing(NOWHERE, install="x"))


def test_a_missing_program_fails_where_ci_requires_the_real_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_CLIENTS, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{NOWHERE} not installed .* requires it"):
        require(missing(NOWHERE, install="x"))
    require(missing("sh", install="x"))  # a present program passes


@pytest.mark.parametrize(("required", "outcome"), [("", "1 skipped"), ("1", "1 error")])
def test_a_marked_test_is_skipped_or_fails_through_the_conftest_hook(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, required: str, outcome: str
) -> None:
    monkeypatch.setenv(REQUIRE_CLIENTS, required)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[1]))
    pytester.makeconftest("from tests.conftest import pytest_configure, pytest_runtest_setup  # noqa: F401")
    pytester.makepyfile(MARKED)
    result = pytester.runpytest_subprocess("-ra", "-p", "no:randomly", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([f"*{NOWHERE} not installed (apt-get install nothing)*", f"*{outcome}*"])
