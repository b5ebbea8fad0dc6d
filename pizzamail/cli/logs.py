"""``logs``: serve's JSON log as lines a person reads; ``-f`` follows it as ``serve`` writes."""

from __future__ import annotations

import json
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import click

from pizzamail.cli.app import App
from pizzamail.logs import LOG_FILE, WORKER_LOG_FILE

#: how often ``-f`` looks for new lines (no file-change event works the same on every system)
FOLLOW_EVERY = 0.25


@click.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing lines as serve writes them (Ctrl-C ends).")
@click.option("--run", "run_id", type=int, metavar="N", help="Only the lines of run N.")
@click.option("-n", "--lines", default=50, show_default=True, metavar="COUNT",
              help="How many of the last lines to show first (0: all).")
@click.option("--worker", is_flag=True, help="The log of the `pizzamail worker`s that use this home instead.")
@click.pass_obj
def logs(app: App, follow: bool, run_id: int | None, lines: int, worker: bool) -> None:
    """Show serve's log readably: time, level, part, message, and the run and thread it is about."""
    path = app.home.logs / (WORKER_LOG_FILE if worker else LOG_FILE)
    file = _open(path)
    if file is None and not follow:
        writer = "pizzamail worker" if worker else "pizzamail serve"
        raise click.ClickException(f"no log yet at {path}; `{writer}` writes it")
    wanted = _wanted(run_id)
    earlier = (entry for entry in map(_parse, file or ()) if wanted(entry))
    for entry in deque(earlier, maxlen=lines or None):
        click.echo(readable(entry))
    for entry in _follow(path, file) if follow else ():
        if wanted(entry):
            click.echo(readable(entry))
    if file is not None:
        file.close()


def readable(entry: dict[str, Any]) -> str:
    """One entry as ``2026-12-01 20:31:05 warning imap: message [run 3, thread 2]``, its exception
    indented below. A line that is not JSON is shown as it is."""
    if "message" not in entry:
        return str(entry.get("raw", ""))
    part = str(entry.get("logger", "")).removeprefix("pizzamail.")
    about = f"  [run {entry['run']}, thread {entry['thread']}]" if "run" in entry else ""
    line = f"{_local_time(entry.get('at', ''))} {entry.get('level', ''):<7} {part}: {entry['message']}{about}"
    if exception := entry.get("exception"):
        line += "".join(f"\n    {text}" for text in str(exception).splitlines())
    return line


def _local_time(at: str) -> str:
    try:
        return datetime.fromisoformat(at).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return at


def _parse(line: str) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except ValueError:
        entry = None
    return entry if isinstance(entry, dict) else {"raw": line.rstrip("\n")}


def _wanted(run_id: int | None) -> Callable[[dict[str, Any]], bool]:
    if run_id is None:
        return lambda entry: True
    # lines the runner logs about a run from outside it ("run 4 could not be finished", "run(s)
    # [3, 4] will resume") name it in their message only
    named = re.compile(rf"\brun(?:\(s\))?:? [\[\d, ]*?\b{run_id}\b")
    return lambda entry: entry.get("run") == run_id or bool(named.search(str(entry.get("message", ""))))


def _open(path: Path) -> TextIO | None:
    try:
        return path.open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _follow(path: Path, file: TextIO | None) -> Iterator[dict[str, Any]]:
    """Entries as they are appended, across serve's rotation (the file renamed, a new one begun):
    the old file is read to its end first."""
    partial = ""
    try:
        while True:
            chunk = file.readline() if file is not None else ""
            if chunk:
                partial += chunk
                if partial.endswith("\n"):  # a line serve is still writing waits for its end
                    yield _parse(partial)
                    partial = ""
            elif file is None or _rotated(path, file):
                if file is not None:
                    file.close()
                file, partial = _open(path), ""
                if file is None:
                    time.sleep(FOLLOW_EVERY)
            else:
                time.sleep(FOLLOW_EVERY)
    finally:
        if file is not None:
            file.close()


def _rotated(path: Path, file: TextIO) -> bool:
    try:
        return os.fstat(file.fileno()).st_ino != path.stat().st_ino
    except FileNotFoundError:
        return False  # between the rename and the new file: keep the old one
