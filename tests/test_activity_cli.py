"""``pizzamail activity``: the board's rows, one per active or recently finished run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_cli import run


def test_activity_lists_a_queued_task_as_the_board_shows_it(tmp_path: Path) -> None:
    assert "nothing is running" in run(tmp_path, "activity").output
    run(tmp_path, "task", "Summarise the release notes")
    [row] = json.loads(run(tmp_path, "activity", "--json").output)
    shown = (row["run"], row["thread"], row["state"], row["steps"], row["last_tool"])
    assert shown == (1, 1, "queued", 0, None)
    assert row["subject"] == "Summarise the release notes"
    table = run(tmp_path, "activity").output
    assert "queued" in table and "Summarise the release notes" in table
