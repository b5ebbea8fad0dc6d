"""``pizzamail logs``: serve's JSON lines as a person reads them, one run's lines, and ``-f``."""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from pizzamail.cli import cli
from pizzamail.logs import in_run, setup_logging

AT = "2026-12-01T20:31:05.123+00:00"


def local(at: str = AT) -> str:
    return datetime.fromisoformat(at).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def entry(message: str, **fields: Any) -> dict[str, Any]:
    return {"at": AT, "level": "info", "logger": "pizzamail.runner", "message": message, **fields}


def write_log(home: Path, *entries: dict[str, Any] | str) -> Path:
    (home / "logs").mkdir(parents=True, exist_ok=True)
    path = home / "logs" / "pizzamail.log"
    with path.open("a") as log:
        for item in entries:
            log.write((item if isinstance(item, str) else json.dumps(item)) + "\n")
    return path


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), "logs", *args])


def test_each_entry_reads_as_time_level_part_message_and_its_run(tmp_path: Path) -> None:
    write_log(tmp_path,
              entry("run 3 started (thread 2, attempt 1)", run=3, thread=2),
              {"at": AT, "level": "warning", "logger": "pizzamail.imap",
               "message": "IMAP login failed for user 'me' from 127.0.0.1:5000"},
              {**entry("run 3 hit an internal error", run=3, thread=2), "level": "error",
               "exception": "Traceback (most recent call last):\nRuntimeError: boom"},
              "not json at all")
    result = run(tmp_path)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{local()} info    runner: run 3 started (thread 2, attempt 1)  [run 3, thread 2]",
        f"{local()} warning imap: IMAP login failed for user 'me' from 127.0.0.1:5000",
        f"{local()} error   runner: run 3 hit an internal error  [run 3, thread 2]",
        "    Traceback (most recent call last):",
        "    RuntimeError: boom",
        "not json at all",
    ]


def test_run_shows_only_that_runs_lines(tmp_path: Path) -> None:
    write_log(tmp_path,
              entry("run 1 started (thread 1, attempt 1)", run=1, thread=1),
              entry("tool web_fetch held for approval", run=12, thread=4),
              entry("calling the model", run=1, thread=1),
              entry("run 1 could not be finished; it resumes at the next start"),
              entry("runner stopped; run(s) 12 will resume at the next start"),
              entry("resuming 2 interrupted run(s): [1, 12]"))
    shown = run(tmp_path, "--run", "1").output
    assert [line.split(": ", 1)[1] for line in shown.splitlines()] == [
        "run 1 started (thread 1, attempt 1)  [run 1, thread 1]",
        "calling the model  [run 1, thread 1]",
        "run 1 could not be finished; it resumes at the next start",
        "resuming 2 interrupted run(s): [1, 12]",
    ]
    assert "held for approval" in run(tmp_path, "--run", "12").output
    assert "run(s) 12" in run(tmp_path, "--run", "12").output


def test_lines_limits_what_is_shown_first(tmp_path: Path) -> None:
    write_log(tmp_path, *(entry(f"line {n}") for n in range(5)))
    assert [line.rsplit(" ", 1)[1] for line in run(tmp_path, "-n", "2").output.splitlines()] == ["3", "4"]
    assert len(run(tmp_path, "-n", "0").output.splitlines()) == 5


def test_without_a_log_it_says_what_writes_one(tmp_path: Path) -> None:
    result = run(tmp_path)
    assert result.exit_code == 1
    assert "`pizzamail serve` writes it" in result.output


def test_the_json_log_carries_run_and_thread_while_a_run_works(tmp_path: Path) -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        setup_logging(tmp_path)
        log = logging.getLogger("pizzamail.test")

        async def work() -> None:
            log.info("inside")

        asyncio.run(in_run(7, 3, work()))
        log.info("outside")
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:], root.level = handlers, level
    inside, outside = (json.loads(line) for line in (tmp_path / "pizzamail.log").read_text().splitlines())
    assert (inside["message"], inside["run"], inside["thread"]) == ("inside", 7, 3)
    assert outside["message"] == "outside" and "run" not in outside


def test_follow_prints_each_line_as_it_is_written_and_after_rotation(tmp_path: Path) -> None:
    path = write_log(tmp_path, entry("before"))
    env = {"PIZZAMAIL_HOME": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "PATH": "/usr/bin:/bin"}
    follower = subprocess.Popen([sys.executable, "-m", "pizzamail", "logs", "-f"], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    printed: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            printed.put(line.rstrip("\n"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        assert printed.get(timeout=60).endswith("runner: before")
        write_log(tmp_path, entry("appended", run=2, thread=1))
        assert printed.get(timeout=30).endswith("runner: appended  [run 2, thread 1]")
        path.rename(path.with_suffix(".log.1"))  # as serve's RotatingFileHandler does
        write_log(tmp_path, entry("in the new file"))
        assert printed.get(timeout=30).endswith("runner: in the new file")
    finally:
        follower.kill()
        follower.wait()
        reader.join(timeout=30)  # it reads to the end the kill made
        assert follower.stdout is not None
        follower.stdout.close()


def test_the_workers_log_is_shown_on_asking_for_it(tmp_path: Path) -> None:
    write_log(tmp_path, entry("served"))
    (tmp_path / "logs" / "worker.log").write_text(json.dumps(entry("run 3 started", run=3, thread=2)) + "\n")
    shown = CliRunner().invoke(cli, ["--home", str(tmp_path), "logs", "--worker"])
    assert shown.exit_code == 0 and "run 3 started" in shown.output and "served" not in shown.output
    (tmp_path / "logs" / "worker.log").unlink()
    missing = CliRunner().invoke(cli, ["--home", str(tmp_path), "logs", "--worker"])
    assert missing.exit_code == 1 and "`pizzamail worker` writes it" in missing.output
