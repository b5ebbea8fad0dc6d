"""A clean start-up: one ``serve`` per home, every port bound before anything starts, and no
foreseeable condition (a live home, a busy port, a bad certificate, an unusable home) answered with
a traceback. Each case is a real ``python -m pizzamail serve`` and what it prints."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import Served, serve_env, task_mail, write_config
from tests.e2e.test_roundtrip import fetch_all
from tests.fakes.openai_server import FakeOpenAI, gated, text
from tests.polling import until

#: what ``serve`` prints before it fails, on a home it has just set up (not part of the failure)
PREAMBLE = ("created ", "WARNING: no OS keyring")


def serve(env: dict[str, str]) -> tuple[int, list[str]]:
    """``pizzamail serve`` to its end: its exit status and every line it printed (both streams)."""
    done = subprocess.run([sys.executable, "-m", "pizzamail", "serve"], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    return done.returncode, done.stdout.splitlines()


def failure(lines: list[str]) -> list[str]:
    assert not any("Traceback" in line for line in lines), "\n".join(lines)
    return [line for line in lines if not line.startswith(PREAMBLE)]


def snapshot(home: Path) -> dict[str, object]:
    """Every file as it stands; the database (which the live server writes as it works) by its runs."""
    files: dict[str, object] = {str(path.relative_to(home)): (path.stat().st_size, path.stat().st_mtime_ns)
                                for path in sorted(home.rglob("*"))
                                if path.is_file() and not path.name.startswith("state.db")}
    with sqlite3.connect(home / "state.db") as db:
        files["runs"] = db.execute("SELECT id, status, attempts FROM runs").fetchall()
    return files


def _board_settled(home: Path) -> bool:
    """The Activity folder shows the working run alone (its queued mail replaced)."""
    folder = home / "Maildir" / ".Activity"
    shown = [p.name for p in [*folder.glob("cur/status.*"), *folder.glob("new/status.*")]]
    return len(shown) == 1 and shown[0].startswith("status.1.running.")


def test_a_second_serve_on_a_live_home_says_who_serves_it_and_touches_nothing(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    answer = threading.Event()
    fake_openai.script([gated(text("Planned."), answer)])
    served.start()
    served.send(task_mail("Plan it"))
    served.wait_for("run 1 started")  # in flight: the second serve must not "resume" it
    asyncio.run(until(lambda: _board_settled(served.home)))  # the live server's own last write
    before = snapshot(served.home)
    assert served.proc is not None
    code, lines = serve(served.env)
    assert code != 0
    assert failure(lines) == [f"error: pizzamail is already serving {served.home} (pid {served.proc.pid});"
                              " stop it first, or pass another --home"]
    assert snapshot(served.home) == before
    answer.set()
    served.wait_for("run 1 done")
    assert [m["Subject"] for _, m in fetch_all(served)] == ["Plan the team offsite",
                                                           "Re: Plan the team offsite"]
    assert not [line for line in served.output if "resuming" in line or "left unfiled" in line]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_config(home, base_url=None)
    return home


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another program listens on."""
    with socket.create_server(("127.0.0.1", 0)) as other:
        yield other.getsockname()[1]


@pytest.mark.parametrize("key", ["smtp_port", "imap_port", "imaps_port", "http_port"])
def test_a_busy_port_is_one_line_naming_its_key_and_nothing_starts(home: Path, taken: int, key: str) -> None:
    config = home / "config.toml"
    config.write_text(config.read_text().replace(f"{key} = 0", f"{key} = {taken}"))
    code, lines = serve(serve_env(home))
    assert code != 0
    assert failure(lines) == [f"error: port {taken} for [server] {key} is in use by another program;"
                              " pick a free one in config.toml"]
    assert not (home / "state.db").exists()  # bound before the store opens, so no run resumes either
    assert not (home / "serve.json").exists()


def test_a_bad_certificate_is_one_error_without_a_traceback(home: Path) -> None:
    bad, config = home / "bad.pem", home / "config.toml"
    bad.write_text("not a certificate")
    config.write_text(config.read_text().replace(
        "[server]\n", f'[server]\ntls_cert = "{bad}"\ntls_key = "{bad}"\n'))
    code, lines = serve(serve_env(home))
    assert code != 0
    [error, fix] = failure(lines)
    assert error.startswith("error: config key 'server.tls_cert'") and "bad.pem" in error
    assert fix.startswith("  fix: run `pizzamail init`")
    assert not (home / "state.db").exists()


@pytest.mark.parametrize(("blocked", "why"), [
    ("../file/home", "a file is in the way of a folder"),  # the home's parent folder is a file
    ("logs", "a file is in the way of a folder"),
    ("logs/pizzamail.log/", "is a directory"),
    ("state.db/", "unable to open database file"),
])
def test_an_unusable_home_is_one_line_without_a_traceback(home: Path, blocked: str, why: str) -> None:
    """A trailing slash: a folder where pizzamail keeps a file; else a file where it keeps a folder."""
    where = (home / blocked).resolve()
    if blocked.startswith("../"):
        (home.parent / "file").write_text("")
        home = where
    elif blocked.endswith("/"):
        where.mkdir(parents=True)
    else:
        where.write_text("")
    code, lines = serve(serve_env(home))
    assert code != 0
    assert failure(lines) == [f"error: cannot use {where} for pizzamail's home: {why}; fix that, or pass"
                              " another --home"]
