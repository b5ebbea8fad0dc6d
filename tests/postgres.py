"""A throwaway PostgreSQL server for the tests: ``initdb`` and ``pg_ctl`` in a temp dir, TCP on
loopback only, fsync off; as root, run as the unprivileged ``postgres`` user (PostgreSQL refuses root).

Each test gets a database of its own, copied from a template the store has already migrated.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from pizzamail.home import Home
from tests.programs import require

BIN_DIRS = ("/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin")
USER = "pm"
TEMPLATE = "pizzamail_template"


def _bin(name: str) -> str:
    for folder in BIN_DIRS:
        if os.access(f"{folder}/{name}", os.X_OK):
            return f"{folder}/{name}"
    found = shutil.which(name)
    if found is None:
        require(f"{name} not installed (apt install postgresql)")
        raise AssertionError(f"{name} not found")  # require() skips or fails first
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass
class Cluster:
    root: Path
    port: int
    _names: Iterator[int] = field(default_factory=itertools.count)

    def url(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url("postgres"), autocommit=True)

    def database(self) -> str:
        """A new database with the store's schema in place; its url."""
        name = f"t{os.getpid()}_{next(self._names)}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE {TEMPLATE}')
        return self.url(name)

    def empty_database(self) -> str:
        """A new database with nothing in it (the store migrates it when it opens)."""
        name = f"e{os.getpid()}_{next(self._names)}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(_as_owner([_bin("pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate",
                                  "-w", "stop"]), check=False, capture_output=True)


def point_home(home: Home, url: str) -> None:
    """Make ``home``'s config name the database at ``url`` (``[store] url``)."""
    text = home.config.read_text() if home.config.exists() else ""
    home.config.write_text(f'{text}\n[store]\nurl = "{url}"\n')


@contextmanager
def running() -> Iterator[Cluster]:
    """A cluster for as long as the block runs."""
    root = Path(tempfile.mkdtemp(prefix="pizzamail-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    subprocess.run(_as_owner([_bin("initdb"), "-D", str(root / "data"), "-U", USER, "--auth=trust",
                              "-E", "UTF8", "--no-locale", "-N"]), check=True, capture_output=True)
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k '' -c fsync=off -c synchronous_commit=off"
               " -c full_page_writes=off -c max_connections=300")
    subprocess.run(_as_owner([_bin("pg_ctl"), "-D", str(root / "data"), "-l", str(root / "pg.log"),
                              "-w", "-o", options, "start"]), check=True, capture_output=True)
    cluster = Cluster(root=root, port=port)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
