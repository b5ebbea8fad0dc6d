"""The cycle collector's pace in ``serve``: a burst of objects that die together is not collected."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import pizzamail.service
from pizzamail import collector
from pizzamail.cli import cli


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def young_collections(burst: int) -> int:
    """How many collections of the youngest generation ``burst`` tuples alive at once cause."""
    runs: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 0:
            runs.append(1)

    gc.collect()
    gc.callbacks.append(count)
    try:
        alive = [(n, str(n)) for n in range(burst)]
        del alive
    finally:
        gc.callbacks.remove(count)
    return len(runs)


def test_pace_changes_only_the_youngest_generation() -> None:
    gc.set_threshold(700, 11, 12)
    collector.pace()
    assert gc.get_threshold() == (collector.YOUNG, 11, 12)


def test_a_batch_of_a_listing_dies_before_a_collection_comes() -> None:
    """A listing's batch of 256 mails keeps about 2,500 tuples alive at once."""
    gc.set_threshold(700, 10, 10)
    assert young_collections(2_500) >= 3
    collector.pace()
    assert young_collections(2_500) == 0


def test_serve_paces_the_collector_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    class Started:
        def __init__(self, **_: object) -> None:
            pass

        async def run(self, stop: asyncio.Event, ready: Callable[[object], None]) -> None:
            seen.append(gc.get_threshold()[0])

    monkeypatch.setattr(pizzamail.service, "Service", Started)
    gc.set_threshold(700, 10, 10)
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "serve"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert seen == [collector.YOUNG]
