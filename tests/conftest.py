"""Shared fixtures: a hermetic environment and an open store + mailbox in a temp home."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from pizzamail.home import Home
from pizzamail.mailbox import Mailbox
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.location import blobs_for
from tests import postgres
from tests.programs import require

# Fuzzing stays random (a new run may find a new input; a failure prints the blob that replays it), but
# no deadline: a 2-core CI machine under load is not a correctness signal. No example database on disk.
settings.register_profile("pizzamail", deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pizzamail")

pytest_plugins = ["tests.fakes.openai_server", "tests.fakes.anthropic_server", "tests.fakes.bedrock_server",
                  "pytester"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_client(why_missing): drives a real program (tests/programs.py)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("real_client"):
        require(*mark.args)


@pytest.fixture(autouse=True)
def hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees the developer's home, keys or keyring."""
    for name in ("OPENAI_API_KEY", "PIZZAMAIL_HOME", "ANTHROPIC_API_KEY", "AWS_BEARER_TOKEN_BEDROCK",
                 "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # botocore's credential chain stays local
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    yield


@pytest.fixture
def home(tmp_path: Path) -> Home:
    h = Home(root=tmp_path / "pizzamail")
    h.create_dirs()
    return h


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[postgres.Cluster]:
    """One throwaway PostgreSQL server for the whole run, with the store's schema as a template."""
    with postgres.running() as cluster:
        with cluster.admin() as conn:
            conn.execute(f"CREATE DATABASE {postgres.TEMPLATE}")

        async def migrate() -> None:
            async with Store(url=cluster.url(postgres.TEMPLATE)):
                pass

        # asked for from inside a test's event loop: migrated on a loop of its own
        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, migrate()).result()
        yield cluster


@pytest.fixture
def store_backend() -> str:
    """The store's engine; the suites that must hold on both (runner, approvals, triggers) make it a
    parameter (their conftest), the rest run on SQLite."""
    return "sqlite"


@pytest.fixture
async def store(home: Home, store_backend: str, request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if store_backend == "postgresql":
        cluster: postgres.Cluster = request.getfixturevalue("pg_cluster")
        opened = Store(url=cluster.database())
        postgres.point_home(home, opened.url or "")  # the commands a test runs use it too
    else:
        opened = Store(path=home.database)
    async with opened as s:
        yield s


@pytest.fixture
def blobs(home: Home, store: Store) -> BlobStore:
    """Where the store keeps blobs: files for SQLite, the database itself for PostgreSQL."""
    return blobs_for(home, store)


@pytest.fixture
async def mailbox(home: Home, store: Store) -> Mailbox:
    return await Mailbox(root=home.maildir, store=store).open()
