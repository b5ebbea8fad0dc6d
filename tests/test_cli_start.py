"""The command line starts fast: a command imports what it uses, nothing else (bench/cli_start.py
measures the time; these tests pin the reason)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from pizzamail.cli import COMMANDS, cli

# Each takes 25 ms (croniter) to 850 ms (mcp) to import; none is needed to list threads or approvals.
HEAVY = {"mcp", "jinja2", "cryptography", "keyring", "httpx", "aiosmtpd", "uvicorn", "starlette",
         "croniter", "markdown_it"}

IMPORTED = """
import sys
from pizzamail.cli import main
sys.argv = ["pizzamail", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(sorted({name.partition(".")[0] for name in sys.modules}))
"""


def imported_by(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", IMPORTED, *args], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).parents[1])
    return set(json.loads(done.stdout.splitlines()[-1].replace("'", '"')))


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["threads"], ["approvals"]])
def test_a_listing_imports_no_heavy_library(tmp_path: Path, args: list[str]) -> None:
    assert imported_by("--home", str(tmp_path / "home"), *args) & HEAVY == set()


def test_the_help_written_beside_each_command_is_the_commands_own() -> None:
    ctx = click.Context(cli)
    for name, (_, written) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
        assert command.get_short_help_str(limit=1000) == written, name
        bare = click.Command(name, help=written)
        assert command.get_short_help_str(limit=45) == bare.get_short_help_str(limit=45)


def test_an_unknown_command_is_refused_by_click(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pizzamail", "--home", str(tmp_path), "thread"],
                          capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert done.returncode == 2
    assert "No such command 'thread'" in done.stderr
