"""A run's workspace: the folder alone on SQLite; on PostgreSQL a working copy of ``run_files``
that another machine's folder is filled from."""

from __future__ import annotations

from pathlib import Path

import pytest

from pizzamail.home import Home
from pizzamail.store import Store
from pizzamail.store.location import workspaces_for
from pizzamail.store.runfiles import PICTURES, StoredWorkspaces, Workspaces


def files_in(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("store_backend", ["sqlite"])
async def test_a_sqlite_home_keeps_the_folder_alone(home: Home, store: Store) -> None:
    workspaces = workspaces_for(home, store)
    assert type(workspaces) is Workspaces
    folder = await workspaces.fetch(7)
    assert folder == home.root / "workspaces" / "7" and not folder.exists()


@pytest.mark.parametrize("store_backend", ["postgresql"])  # another machine
async def test_what_a_run_kept_is_fetched_into_another_machines_empty_folder(
    home: Home, store: Store, tmp_path: Path
) -> None:
    here = workspaces_for(home, store)
    assert isinstance(here, StoredWorkspaces)
    folder = await here.fetch(7)
    (folder / PICTURES).mkdir(parents=True)
    (folder / "report.md").write_bytes(b"# Report\n")
    (folder / PICTURES / "ab12").write_bytes(b"png bytes")
    (folder / ".report.md.tmp").write_bytes(b"half written")  # a write cut off: never kept
    await here.keep(7)
    there = workspaces_for(Home(root=tmp_path / "machine-b"), store)
    assert files_in(await there.fetch(7)) == {"report.md": b"# Report\n", ".pictures/ab12": b"png bytes"}
    assert files_in(await there.fetch(8)) == {}  # another run's folder stays empty


@pytest.mark.parametrize("store_backend", ["postgresql"])  # another machine
async def test_a_file_written_again_replaces_the_kept_one_and_a_stale_copy(
    home: Home, store: Store, tmp_path: Path
) -> None:
    here, there = workspaces_for(home, store), workspaces_for(Home(root=tmp_path / "machine-b"), store)
    (await here.fetch(3)).mkdir(parents=True)
    (here.folder(3) / "notes.txt").write_bytes(b"first")
    await here.keep(3)
    assert files_in(await there.fetch(3)) == {"notes.txt": b"first"}
    (there.folder(3) / "notes.txt").write_bytes(b"second")  # the run went on over there
    await there.keep(3)
    assert files_in(await here.fetch(3)) == {"notes.txt": b"second"}  # back here: not the stale copy
    rows = await store.fetchall("SELECT name FROM run_files WHERE run_id = 3")
    assert [row[0] for row in rows] == ["notes.txt"]
