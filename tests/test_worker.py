"""``pizzamail worker``: what it refuses before it starts, what its banner shows, and
``[runner] concurrency = 0`` (serve without a runner) only beside a shared PostgreSQL store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pizzamail.config import parse_config
from pizzamail.errors import ConfigError, StoreUnreachable
from pizzamail.store import Store
from pizzamail.store.location import store_place
from tests.postgres import Cluster

URL = "postgresql://pizzamail@db.internal/pizzamail"


def work(home: Path, config: str, *args: str) -> tuple[int, str]:
    """``pizzamail worker ARGS`` as the user runs it: its exit status and what it printed."""
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(config)
    done = subprocess.run([sys.executable, "-m", "pizzamail", "--home", str(home), "worker", *args],
                          capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1])
    return done.returncode, done.stdout + done.stderr


def test_a_worker_on_sqlite_refuses_in_one_line_and_says_serve_runs_the_runner(tmp_path: Path) -> None:
    code, output = work(tmp_path / "home", "")
    assert code == 1
    assert output.splitlines() == [
        "error: workers share a PostgreSQL store: set [store] url in config.toml"
        " (postgresql://USER@HOST/DB); with SQLite, `pizzamail serve` runs the runner itself"]
    assert not (tmp_path / "home" / "logs").exists()  # refused before it touched the home


def test_a_worker_with_no_runs_to_work_on_says_to_pass_concurrency(tmp_path: Path) -> None:
    code, output = work(tmp_path / "home", f'[runner]\nconcurrency = 0\n[store]\nurl = "{URL}"\n')
    assert code == 1
    assert "pass `--concurrency N`" in output
    code, output = work(tmp_path / "home", f'[store]\nurl = "{URL}"\n', "--concurrency", "0")
    assert code == 2 and "--concurrency" in output


def test_the_banner_names_the_store_without_password_or_options() -> None:
    assert store_place("postgresql://pm@db.internal:5433/pizza?password=hunter22&sslmode=require") == (
        "pm@db.internal:5433/pizza")
    assert store_place("postgresql:///pizza") == "localhost/pizza"


def test_serve_may_leave_every_run_to_workers_only_with_a_shared_store() -> None:
    assert parse_config({"runner": {"concurrency": 0}, "store": {"url": URL}}).runner.concurrency == 0
    with pytest.raises(ConfigError) as refused:
        parse_config({"runner": {"concurrency": 0}})
    assert refused.value.key == "runner.concurrency" and "pizzamail worker" in refused.value.allowed
    with pytest.raises(ConfigError, match="0 or a greater number"):
        parse_config({"runner": {"concurrency": -1}, "store": {"url": URL}})


async def test_a_store_that_cannot_be_reached_is_one_error_with_its_reason(pg_cluster: Cluster) -> None:
    with pytest.raises(StoreUnreachable) as refused:
        await Store(url=pg_cluster.url("no_such_database")).open()
    assert f"pm@127.0.0.1:{pg_cluster.port}/no_such_database" in refused.value.message
    assert 'database "no_such_database" does not exist' in refused.value.message
    assert "`pizzamail keys set store`" in (refused.value.hint or "")
