"""Webhooks: per hook the thread it continues (``thread = "one"``) and its last time and outcome.

Its deliveries are remembered in :mod:`pizzamail.store.deliveries`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.store import Store, Tx, now


@dataclass(frozen=True, kw_only=True)
class Hook:
    name: str
    thread_id: int | None
    last_at: str | None
    last_outcome: str | None


async def list_hooks(store: Store) -> list[Hook]:
    rows = await store.fetchall("SELECT name, thread_id, last_at, last_outcome FROM hooks ORDER BY name")
    return [Hook(**dict(row)) for row in rows]


async def hook_thread(db: Tx, name: str) -> int | None:
    """Read inside the delivery's transaction, so two deliveries cannot start two threads."""
    async with db.execute("SELECT thread_id FROM hooks WHERE name = ?", (name,)) as cursor:
        row = await cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])


async def record_run(db: Tx, name: str, *, thread_id: int, run_id: int) -> None:
    """A delivery started ``run_id`` in ``thread_id`` (the thread the hook continues from now on)."""
    await db.execute(
        "INSERT INTO hooks(name, thread_id, last_at, last_outcome) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(name) DO UPDATE SET thread_id = excluded.thread_id, last_at = excluded.last_at,"
        " last_outcome = excluded.last_outcome",
        (name, thread_id, now(), f"run {run_id}"))


async def record_outcome(store: Store, name: str, outcome: str) -> None:
    """A delivery that started no run (refused, or a repeat): what the user should see."""
    async with store.write() as db:
        await db.execute(
            "INSERT INTO hooks(name, last_at, last_outcome) VALUES (?, ?, ?) ON CONFLICT(name)"
            " DO UPDATE SET last_at = excluded.last_at, last_outcome = excluded.last_outcome",
            (name, now(), outcome))
