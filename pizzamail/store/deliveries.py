"""Webhook deliveries remembered, so that none runs twice, also across restarts.

A delivery id is kept for good (its row names the run it started). A signature is kept while its
signed timestamp could still pass the tolerance window; after that the window refuses it anyway.
"""

from __future__ import annotations

from pizzamail.store import Store, Tx, now


async def seen_before(store: Store, hook: str, delivery_id: str, digest: str) -> str | None:
    """``"signature"`` or ``"delivery"`` when either was accepted before, else None (a read only: the
    caller still records with :func:`remember`, which decides a race). The signature is looked at
    first: the same signature again is a replayed request, the same id newly signed a sender's retry."""
    if digest and await store.fetchone(
            "SELECT 1 FROM webhook_signatures WHERE hook = ? AND digest = ?", (hook, digest)):
        return "signature"
    if delivery_id and await store.fetchone(
            "SELECT 1 FROM deliveries WHERE hook = ? AND delivery_id = ?", (hook, delivery_id)):
        return "delivery"
    return None


async def remember(db: Tx, hook: str, delivery_id: str, digest: str, *,
                   signed_at: int, forget_before: int) -> str | None:
    """Inside the delivery's transaction: record its id and signature, or name the one seen before.

    Signatures signed before ``forget_before`` (Unix seconds) are dropped on the way."""
    if delivery_id:
        cursor = await db.execute(
            "INSERT INTO deliveries(hook, delivery_id, received_at) VALUES (?, ?, ?)"
            " ON CONFLICT(hook, delivery_id) DO NOTHING", (hook, delivery_id, now()))
        if cursor.rowcount == 0:
            return "delivery"
    if digest:
        await db.execute("DELETE FROM webhook_signatures WHERE signed_at < ?", (forget_before,))
        cursor = await db.execute(
            "INSERT INTO webhook_signatures(hook, digest, signed_at) VALUES (?, ?, ?)"
            " ON CONFLICT(hook, digest) DO NOTHING", (hook, digest, signed_at))
        if cursor.rowcount == 0:
            return "signature"
    return None


async def earlier_run(store: Store, hook: str, delivery_id: str) -> tuple[int, int] | None:
    """The run and thread that the delivery ``delivery_id`` started when it was received before."""
    row = await store.fetchone(
        "SELECT r.id, r.thread_id FROM deliveries d JOIN runs r ON r.id = d.run_id"
        " WHERE d.hook = ? AND d.delivery_id = ?", (hook, delivery_id))
    return (int(row[0]), int(row[1])) if row else None


async def link_run(db: Tx, hook: str, delivery_id: str, run_id: int) -> None:
    if delivery_id:
        await db.execute("UPDATE deliveries SET run_id = ? WHERE hook = ? AND delivery_id = ?",
                         (run_id, hook, delivery_id))
