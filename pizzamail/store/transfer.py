"""A SQLite home's state copied into PostgreSQL (``pizzamail migrate-store``).

Every table the PostgreSQL schema has is copied with its ids, in one transaction, parents before
the rows that refer to them; SQLite's own tables (the migrations it ran, the FTS5 index of memory,
which PostgreSQL keeps as a generated column) are left behind. The blobs (files on disk in a SQLite
home, and the rows of its own ``blobs`` table) and each run's workspace files become rows. Last,
each identity sequence is moved past the ids copied, so the next row gets a new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from graphlib import TopologicalSorter
from pathlib import Path

from pizzamail.errors import TransferError
from pizzamail.store import Row, Store, Tx
from pizzamail.store.blobs import digest_of
from pizzamail.store.runfiles import files_in

#: rows read from SQLite and sent to PostgreSQL at a time
BATCH = 500
#: counters whose one row the migrations make (the highest id or UIDVALIDITY ever given out): the
#: home's replaces it
SEEDED = ("folder_ids", "uidvalidity")


@dataclass(frozen=True, kw_only=True)
class Copied:
    rows: dict[str, int]
    """rows copied, by table"""
    blobs: int
    run_files: int


async def copy_state(source: Store, target: Store, *, blobs: Path, workspaces: Path) -> Copied:
    """Copy the SQLite ``source`` (and the files under ``blobs`` and ``workspaces``) into the empty
    PostgreSQL ``target``, both open and migrated."""
    tables = await _target_tables(target)
    present = {str(row[0]) for row in await source.fetchall(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    async with target.write() as db:  # under the write lock: a second copy waits, then finds rows
        await _refuse_data(db, [t for t in [*tables, "blobs", "run_files"] if t not in SEEDED])
        for table in SEEDED:
            await db.execute(f'DELETE FROM "{table}"')
        rows = {table: await _copy_table(source, db, table, columns)
                for table, columns in tables.items() if table in present}
        stored = await _copy_blobs(db, blobs) + await _copy_stored_blobs(source, db)
        run_files = await _copy_run_files(db, workspaces)
        for table, column in await _identities(target):
            await db.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"
                             f' (SELECT max("{column}") FROM "{table}"))')
    return Copied(rows=rows, blobs=stored, run_files=run_files)


async def _refuse_data(db: Tx, tables: list[str]) -> None:
    for table in tables:
        if await (await db.execute(f'SELECT 1 FROM "{table}" LIMIT 1')).fetchone() is not None:
            raise TransferError(f"the database already holds pizzamail's data (its table {table} has rows)",
                                hint="give the url of an empty database (`createdb NAME` makes one)")


async def _target_tables(target: Store) -> dict[str, list[str]]:
    """PostgreSQL's tables with the columns a row is written with (a generated one computes itself),
    parents first; not ``migrations``, which the target keeps for itself, nor the ones filled from
    files."""
    columns: dict[str, list[str]] = {}
    for row in await target.fetchall(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND is_generated = 'NEVER'"
            " ORDER BY table_name, ordinal_position"):
        columns.setdefault(str(row[0]), []).append(str(row[1]))
    parents: dict[str, set[str]] = {table: set() for table in columns}
    for row in await target.fetchall(
            "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint"
            " WHERE contype = 'f' AND connamespace = current_schema()::regnamespace"):
        if row[0] != row[1]:  # a row referring to its own table's: copied in rowid order
            parents[str(row[0])].add(str(row[1]))
    order = TopologicalSorter(parents).static_order()
    return {table: columns[table] for table in order if table not in ("migrations", "blobs", "run_files")}


async def _identities(target: Store) -> list[tuple[str, str]]:
    rows = await target.fetchall(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND is_identity = 'YES'")
    return [(str(row[0]), str(row[1])) for row in rows]


async def _copy_table(source: Store, db: Tx, table: str, columns: list[str]) -> int:
    """The rows in SQLite's order (a row referring to an earlier one of its table comes after it)."""
    info = await source.fetchall(f'PRAGMA table_info("{table}")')
    missing = {str(row[1]) for row in info} - set(columns)
    if missing:
        raise TransferError(f"table {table} has columns the target lacks: {', '.join(sorted(missing))}",
                            hint="run the same pizzamail version on both sides")
    names = [c for c in columns if c in {str(row[1]) for row in info}]
    quoted = ", ".join(f'"{c}"' for c in names)
    insert = f'INSERT INTO "{table}" ({quoted}) VALUES ({", ".join("?" * len(names))})'
    copied = 0
    async for batch in _batches(source, table, quoted):
        await db.executemany(insert, [[row[i] for i in range(1, len(names) + 1)] for row in batch])
        copied += len(batch)
    return copied


async def _batches(source: Store, table: str, columns: str) -> AsyncIterator[list[Row]]:
    """``columns`` of every row of ``table``, ``BATCH`` rows at a time, each row led by its rowid."""
    after = -1
    while True:
        batch = await source.fetchall(
            f'SELECT rowid, {columns} FROM "{table}" WHERE rowid > ? ORDER BY rowid LIMIT {BATCH}', (after,))
        if not batch:
            return
        yield batch
        after = int(batch[-1][0])


async def _copy_blobs(db: Tx, root: Path) -> int:
    paths = await asyncio.to_thread(_blob_files, root)
    for path in paths:
        await _put_blob(db, path.name, await asyncio.to_thread(path.read_bytes))
    return len(paths)


async def _copy_stored_blobs(source: Store, db: Tx) -> int:
    """The blobs a SQLite home keeps in its database (mail taken by SMTP), a batch at a time."""
    copied = 0
    async for batch in _batches(source, "blobs", "digest, data"):
        await db.executemany(_INSERT_BLOB, [(row[1], bytes(row[2])) for row in batch])
        copied += len(batch)
    return copied


async def _copy_run_files(db: Tx, root: Path) -> int:
    copied = 0
    for run_id, folder in await asyncio.to_thread(_run_folders, root):
        for name in await asyncio.to_thread(files_in, folder):
            data = await asyncio.to_thread((folder / name).read_bytes)
            digest = digest_of(data)
            await _put_blob(db, digest, data)
            await db.execute("INSERT INTO run_files(run_id, name, digest) VALUES (?, ?, ?)",
                             (run_id, name, digest))
            copied += 1
    return copied


_INSERT_BLOB = "INSERT INTO blobs(digest, data) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING"


async def _put_blob(db: Tx, digest: str, data: bytes) -> None:
    await db.execute(_INSERT_BLOB, (digest, data))


def _blob_files(root: Path) -> list[Path]:
    """``blobs/<ab>/<digest>``; a half-written one (hidden) was never named by a row."""
    return sorted(p for p in root.glob("??/*") if p.is_file() and not p.name.startswith("."))


def _run_folders(root: Path) -> list[tuple[int, Path]]:
    if not root.is_dir():
        return []
    return sorted((int(p.name), p) for p in root.iterdir() if p.is_dir() and p.name.isdigit())


