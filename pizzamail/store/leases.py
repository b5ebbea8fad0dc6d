"""Leases on running runs: any number of runners share one queue, and a dead one's runs are taken over.

A runner claims runs with a lease (:func:`claim_runs`: ``lease_owner`` is its worker id,
``lease_until`` epoch seconds) and renews the leases of all its runs every third of the lease
(:func:`renew_leases`). A runner that stops renewing (killed, its machine lost, its loop stuck)
loses them: any runner's :func:`reclaim_expired` puts them back in the queue, and another takes each
over from its checkpoints. A runner that lost a run finds out at its next renewal
(:func:`leases_lost`), and its writes for the run are refused meanwhile
(:func:`~pizzamail.store.runs.fence`), so a run's steps and its one mail are written by one worker.

Lease times are each process's own clock: machines sharing a database keep their clocks in sync (NTP).
"""

from __future__ import annotations

import os
import secrets
import socket
import time

from pizzamail.store import Store, Tx, now
from pizzamail.store.events import RunChanged, record
from pizzamail.store.runs import Run, requeue
from pizzamail.store.sql import POSTGRESQL


def lease_ran_out(runs: str = "runs") -> str:
    """The condition (one ``?``: epoch seconds) that a run's lease ran out by then; a running run
    with no lease (claimed by no worker, or before leases existed) has nobody to renew it."""
    return f"({runs}.lease_until IS NULL OR {runs}.lease_until < ?)"


def new_worker_id() -> str:
    """``host:pid:random``: who holds a lease, unique even for a restarted process with the same pid."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def lease_end(lease_seconds: float) -> int:
    """The ``lease_until`` of a lease taken or renewed now: it ends once that whole second is over."""
    return int(time.time() + lease_seconds)


async def claim_next(store: Store, *, exclude_threads: set[int], busy: bool = False,
                     worker: str | None = None, lease_seconds: float = 30.0) -> Run | None:
    """The oldest run :func:`claim_runs` may claim, or None."""
    runs = await claim_runs(store, limit=1, exclude_threads=exclude_threads, busy=busy, worker=worker,
                            lease_seconds=lease_seconds)
    return runs[0] if runs else None


async def claim_runs(store: Store, *, limit: int, exclude_threads: set[int], busy: bool = False,
                     worker: str | None = None, lease_seconds: float = 30.0) -> list[Run]:
    """Mark up to ``limit`` of the oldest queued runs as running, leased to ``worker`` for
    ``lease_seconds``, and return them (oldest first). Without a ``worker`` a run is nobody's: any
    runner's start takes it back. A burst of queued runs is claimed in one statement and one commit,
    not one each.

    Runs of one thread are done in order, one at a time: a thread already being worked on, here
    (``exclude_threads``) or by any other worker (a run of it running or delegating), is skipped, and
    so is a run whose thread has an older queued run (so one statement never takes two runs of
    a thread).
    A run a crash cut off (``crashes``) resumes alone, so that if it takes the process down again
    the blame is its own: such runs come first, but only when the caller is not ``busy`` with
    other runs (and the caller starts no other run beside it: claim one, with ``limit=1``, when
    not busy).

    One statement, not serialised with other writes (``serial=False``): on PostgreSQL any number
    of workers claim side by side. That is safe because the statement is the whole decision: FOR
    UPDATE SKIP LOCKED locks the chosen rows (a concurrent claim skips them, never waits), and under
    READ COMMITTED a row changed by a transaction that committed meanwhile is checked again against
    ``status = 'queued'`` before it is taken. The choice is a CTE so that PostgreSQL picks the rows
    once (a locking CTE is never folded into the update). The serialised writers that read a
    thread's runs before changing them lock those rows first
    (:func:`~pizzamail.store.runs.request_stop`); the others change one run in a statement that
    re-checks its status. A claim never waits for a lock, so it is never part of a deadlock either;
    the threads' status is set in a transaction of its own for that reason (a writer holding a
    thread's row may be waiting for this run's).
    """
    crashed = "AND crashes = 0" if busy else ""
    excluded = sorted(exclude_threads)
    others = f"AND thread_id NOT IN ({', '.join('?' * len(excluded))})" if excluded else ""
    until = None if worker is None else lease_end(lease_seconds)

    async def claim(db: Tx) -> list[Run]:
        async with db.execute(
            "WITH picked AS (SELECT id FROM runs r WHERE status ="
            f" 'queued' {crashed} {others} AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.thread_id ="
            " r.thread_id AND o.id <> r.id AND (o.status IN ('running', 'delegating')"
            " OR (o.id < r.id AND o.status = 'queued')))"
            f" ORDER BY crashes = 0, id LIMIT ?{_skip_locked(store)})"
            " UPDATE runs SET status = 'running', attempts = attempts + 1, started_at = ?,"
            " lease_owner = ?, lease_until = ?"
            " WHERE id IN (SELECT id FROM picked) AND status = 'queued' RETURNING *",
            (*excluded, limit, now(), worker, until),
        ) as cursor:
            runs = sorted((Run(**dict(row)) for row in await cursor.fetchall()), key=lambda r: r.id)
        for run in runs:
            record(db, RunChanged(run=run.id, thread=run.thread_id, status="running"))
        if runs and store.dialect != POSTGRESQL:
            await _working(db, runs)
        return runs

    runs = await store.write_at_once(claim, serial=False)
    if runs and store.dialect == POSTGRESQL:
        await store.write_at_once(lambda db: _working(db, runs), serial=False)
    return runs


async def _working(db: Tx, runs: list[Run]) -> None:
    threads = [run.thread_id for run in runs]
    await db.execute(f"UPDATE threads SET status = 'working', updated_at = ? WHERE id IN"
                     f" ({', '.join('?' * len(threads))})", (now(), *threads))


async def renew_leases(store: Store, worker: str, lease_seconds: float, run_ids: list[int]) -> None:
    """Extend ``worker``'s lease on each of ``run_ids``: the runs it is working on now, not every run
    it holds (one it gave up on after a failed write goes back to the queue when its lease runs out,
    instead of being kept alive by a busy worker that will never finish it).

    One statement, not serialised with other writes (as a claim): it changes only ``lease_until`` of
    this worker's own running runs, and skips a row another transaction has locked for the moment
    instead of waiting (never a deadlock); that run is renewed at the next beat, well before its
    lease runs out. A run requeued meanwhile is no longer ``running``, so it is not renewed."""
    if not run_ids:
        return
    marks = ", ".join("?" * len(run_ids))
    async with store.write(serial=False) as db:
        await db.execute(
            "UPDATE runs SET lease_until = ? WHERE id IN (SELECT id FROM runs WHERE lease_owner = ?"
            f" AND status = 'running' AND id IN ({marks}){_skip_locked(store)})",
            (lease_end(lease_seconds), worker, *run_ids))


async def leases_lost(store: Store, worker: str, run_ids: list[int]) -> list[int]:
    """Which of ``run_ids`` (runs ``worker`` works on) it no longer holds: requeued, or taken over."""
    if not run_ids:
        return []
    marks = ", ".join("?" * len(run_ids))
    rows = await store.fetchall(f"SELECT id FROM runs WHERE id IN ({marks}) AND (lease_owner IS NULL"
                                " OR lease_owner <> ?) ORDER BY id", [*run_ids, worker])
    return [int(r[0]) for r in rows]


async def reclaim_expired(store: Store, *, at: float | None = None) -> list[int]:
    """Running runs whose lease ran out by now (or ``at``, epoch seconds) go back to the queue, as
    after a crash (:func:`~pizzamail.store.runs.requeue`): the kill of their worker is counted in
    ``crashes``, not as an attempt. A running run with no lease (claimed by no worker, or before
    leases existed) has nobody to renew it: it is taken back too. Returns their ids."""
    moment = int(time.time() if at is None else at)
    expired = lease_ran_out()
    if await store.fetchone(f"SELECT 1 FROM runs WHERE status = 'running' AND {expired} LIMIT 1",
                            (moment,)) is None:
        return []  # the usual case: no write, so no commit for every other process to hear
    return await requeue(store, expired, (moment,))


def _skip_locked(store: Store) -> str:
    return " FOR UPDATE SKIP LOCKED" if store.dialect == POSTGRESQL else ""
