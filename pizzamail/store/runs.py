"""Runs (one piece of agent work on a thread) and their steps (checkpoints)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from pizzamail.errors import LeaseLost
from pizzamail.store import Store, Tx, Work, dialect_of, insert, now
from pizzamail.store.events import RunChanged, RunQueued, StopRequested, record
from pizzamail.store.sql import POSTGRESQL
from pizzamail.store.threads import log_event

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Run:
    id: int
    thread_id: int
    message_id: int | None
    status: str
    attempts: int
    """times a worker started on it (a clean stop, a crash or a dead worker gives its start back);
    see ``crashes`` for the limit"""
    model: str | None
    error: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    stopped_by: str | None = None
    """the limit that stopped the run early (``model_calls``, ``tool_calls``, ``tokens``, ``wall_time``)"""
    source: str | None = None
    """the trigger that posted its task (``hook:NAME`` …, see :mod:`pizzamail.triggers.policy`); None
    for mail through SMTP intake and ``pizzamail task``"""
    crashes: int = 0
    """crashes of the process in a row that cut this run off before it checkpointed a new step"""
    agent: str | None = None
    """the address of the agent this run is of (``research@…``); None: the main agent"""
    stop_requested: str | None = None
    """who asked this run to stop (an address, or ``cli``); the runner ends it ``stopped``"""
    parent_run: int | None = None
    """the run whose ``delegate`` call started this one (it waits, ``delegating``, until it ends)"""
    depth: int = 0
    """delegations between this run and the one the user started (0: the user's own)"""
    lease_owner: str | None = None
    """the worker that holds it while ``running`` (see :mod:`pizzamail.store.leases`)"""
    lease_until: int | None = None
    """epoch seconds: past this, with no renewal, another worker may take the run over"""


@dataclass(frozen=True, kw_only=True)
class Step:
    seq: int
    kind: str
    data: dict[str, Any]


async def create_run(
    db: Tx, thread_id: int, message_row: int | None, *, source: str | None = None,
    agent: str | None = None, model: str | None = None, parent: Run | None = None,
    thread_queued: bool = False,
) -> int:
    """A queued run of ``agent`` (its address; None: the main agent), with ``model`` instead of the
    agent's own when given (a trigger's ``model``). ``source`` only from a trigger's own code
    (``TriggerMail.source``), never from mail. ``parent``: the run delegating this one.
    ``thread_queued``: the thread was made ``queued`` in this transaction (its status and time
    need no second write)."""
    stamp = now()
    run = await insert(
        db, "INSERT INTO runs(thread_id, message_id, status, created_at, source, agent, model, parent_run,"
        " depth) VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?)",
        (thread_id, message_row, stamp, source, agent.lower() if agent else None, model or None,
         parent.id if parent else None, parent.depth + 1 if parent else 0))
    if not thread_queued:
        await db.execute(
            "UPDATE threads SET status = 'queued', updated_at = ? WHERE id = ?", (stamp, thread_id)
        )
    record(db, RunQueued(run=run, thread=thread_id))
    record(db, RunChanged(run=run, thread=thread_id, status="queued"))
    return run


async def thread_sources(store: Store, thread_id: int) -> list[str]:
    """The triggers that posted runs into a thread (``runs.source``), each once."""
    rows = await store.fetchall(
        "SELECT DISTINCT source FROM runs WHERE thread_id = ? AND source IS NOT NULL", (thread_id,))
    return [str(row[0]) for row in rows]


async def get_run(store: Store, run_id: int) -> Run:
    row = await store.fetchone("SELECT * FROM runs WHERE id = ?", (run_id,))
    assert row is not None, f"no run {run_id}"
    return Run(**dict(row))


async def any_queued(store: Store) -> bool:
    """Whether a run waits in the queue: a read, so a look at an empty queue takes no write turn."""
    return await store.fetchone("SELECT 1 FROM runs WHERE status = 'queued' LIMIT 1") is not None


async def requeue_interrupted(store: Store) -> list[int]:
    """Every run left ``running`` goes back to the queue (SQLite, one runner per home: at its start
    they were all cut off by a crash). See :func:`requeue`."""
    return await requeue(store, "1 = 1", ())


async def requeue(store: Store, which: str, params: tuple[Any, ...]) -> list[int]:
    """``running`` runs matching ``which`` (SQL) go back to the queue, and every runner hears it;
    they resume from their steps.

    Their worker died, or its process crashed: that is not counted as a failed attempt (the start
    is given back) but in ``crashes``, which the run's next checkpoint clears: only a run that
    crashes the process again and again before getting any further runs out of them.
    """
    async with store.write() as db:
        async with db.execute(
            "UPDATE runs SET status = 'queued', crashes = crashes + 1, lease_owner = NULL,"
            " lease_until = NULL, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END"
            f" WHERE status = 'running' AND ({which}) RETURNING id, thread_id", params,
        ) as cursor:
            rows = sorted((int(r[0]), int(r[1])) for r in await cursor.fetchall())
        for run_id, thread_id in rows:
            await db.execute("UPDATE threads SET status = 'queued', updated_at = ? WHERE id = ?",
                             (now(), thread_id))
            record(db, RunQueued(run=run_id, thread=thread_id))
            record(db, RunChanged(run=run_id, thread=thread_id, status="queued"))
    return [run_id for run_id, _ in rows]


#: the worker the current task works for (set by the runner around each run, see :func:`working_as`)
_worker: ContextVar[str | None] = ContextVar("pizzamail_worker", default=None)


@contextmanager
def working_as(worker: str) -> Iterator[None]:
    """Within: every checkpoint and end of a run is fenced (:func:`fence`) with ``worker``'s lease,
    whichever part of the runner writes it (its pool, delegation, approvals)."""
    token = _worker.set(worker)
    try:
        yield
    finally:
        _worker.reset(token)


def fenced(work: Work[T]) -> Work[T]:
    """``work`` for :meth:`Store.write_at_once`, fenced (:func:`fence`) as its caller is: on SQLite it
    runs on the writer's thread, whose context does not hold the caller's worker."""
    worker = _worker.get()

    @functools.wraps(work)
    async def as_caller(db: Tx) -> T:
        if worker is None:
            return await work(db)
        with working_as(worker):
            return await work(db)

    return as_caller


async def fence(db: Tx, run_id: int) -> None:
    """Raise :class:`LeaseLost` (rolling the caller's transaction back) when the worker this task
    works for (:func:`working_as`) no longer holds ``run_id``: another took it over, or it was
    requeued. Outside a worker (tests, tools, the CLI) nothing is checked.

    Checked inside the caller's serialised transaction, whose later statements can count on it: only
    a claim (of a ``queued`` run) and a renewal (of its own worker's) change a lease beside it."""
    worker = _worker.get()
    if worker is None:
        return
    async with db.execute("SELECT 1 FROM runs WHERE id = ? AND status = 'running' AND lease_owner = ?",
                          (run_id, worker)) as cursor:
        if await cursor.fetchone() is None:
            raise LeaseLost(run_id)


async def add_step(
    db: Tx, run_id: int, seq: int, kind: str, data: dict[str, Any]
) -> None:
    await fence(db, run_id)
    await db.execute(
        "INSERT INTO steps(run_id, seq, kind, data, created_at) VALUES (?, ?, ?, ?, ?)",
        (run_id, seq, kind, json.dumps(data), now()),
    )
    # the run got further than where any crash cut it off: those crashes were not its doing
    await db.execute("UPDATE runs SET crashes = 0 WHERE id = ? AND crashes > 0", (run_id,))
    async with db.execute("SELECT thread_id, status FROM runs WHERE id = ?", (run_id,)) as cursor:
        row = await cursor.fetchone()
    if row is not None:
        record(db, RunChanged(run=run_id, thread=int(row[0]), status=str(row[1])))


async def steps_of(store: Store, run_id: int) -> list[Step]:
    rows = await store.fetchall(
        "SELECT seq, kind, data FROM steps WHERE run_id = ? ORDER BY seq", (run_id,)
    )
    return [Step(seq=r["seq"], kind=r["kind"], data=json.loads(r["data"])) for r in rows]


async def finish_run(
    db: Tx, run: Run, *, status: str, error: str | None = None,
    model: str | None = None,
) -> None:
    await fence(db, run.id)
    await db.execute(
        "UPDATE runs SET status = ?, error = ?, model = coalesce(?, model), finished_at = ?,"
        " crashes = 0 WHERE id = ?", (status, error, model, now(), run.id),
    )
    record(db, RunChanged(run=run.id, thread=run.thread_id, status=status))
    thread_status = status if status in ("done", "stopped") else "failed"
    await db.execute(
        "UPDATE threads SET status = ?, updated_at = ? WHERE id = ?",
        (thread_status, now(), run.thread_id),
    )
    if run.parent_run is not None and status in ENDED:
        await _wake_parent(db, run.parent_run)


#: a run in one of these states never changes again
ENDED = ("done", "failed", "stopped")
_ENDED_SQL = "('done', 'failed', 'stopped')"


async def _wake_parent(db: Tx, parent: int) -> None:
    """The delegating run goes back to the queue once its last child has ended (in the child's
    ending transaction, so no end is missed and none wakes it twice)."""
    cursor = await db.execute(
        "UPDATE runs SET status = 'queued' WHERE id = ? AND status = 'delegating' AND NOT EXISTS"
        f" (SELECT 1 FROM runs c WHERE c.parent_run = ? AND c.status NOT IN {_ENDED_SQL})",
        (parent, parent))
    if cursor.rowcount == 1:
        await _announce_queued(db, parent)


async def _announce_queued(db: Tx, run_id: int) -> None:
    async with db.execute("SELECT thread_id FROM runs WHERE id = ?", (run_id,)) as cursor:
        row = await cursor.fetchone()
    assert row is not None
    record(db, RunQueued(run=run_id, thread=int(row[0])))
    record(db, RunChanged(run=run_id, thread=int(row[0]), status="queued"))


async def await_children(db: Tx, run: Run) -> str:
    """``waiting``: the run now waits (``delegating``) for its children; ``ready``: every one has
    ended already (it goes on at once); ``stopping``: a stop was asked meanwhile (it ends instead).
    Decided in one transaction with the children's ends and with stop requests."""
    await fence(db, run.id)
    if await stop_asked(db, run.id):
        return "stopping"
    async with db.execute(f"SELECT 1 FROM runs WHERE parent_run = ? AND status NOT IN {_ENDED_SQL}"
                          " LIMIT 1", (run.id,)) as cursor:
        if await cursor.fetchone() is None:
            return "ready"
    await db.execute("UPDATE runs SET status = 'delegating' WHERE id = ? AND status = 'running'", (run.id,))
    record(db, RunChanged(run=run.id, thread=run.thread_id, status="delegating"))
    return "waiting"


async def stop_asked(db: Tx, run_id: int) -> str | None:
    """Who asked ``run_id`` to stop, read inside the caller's transaction (None: nobody)."""
    async with db.execute("SELECT stop_requested FROM runs WHERE id = ?", (run_id,)) as cursor:
        row = await cursor.fetchone()
    return str(row[0]) if row and row[0] else None


async def stop_descendants(db: Tx, run_id: int, *, by: str) -> None:
    """A run ending ``stopped`` takes every run it delegated with it, those started after the stop
    was asked too."""
    for run in await _descendants(db, run_id):
        await _ask_to_stop(db, run, by=by)


async def count_children(store: Store, run_id: int) -> int:
    row = await store.fetchone("SELECT count(*) FROM runs WHERE parent_run = ?", (run_id,))
    return int(row[0]) if row else 0


async def has_queued(store: Store) -> bool:
    return await store.fetchone("SELECT 1 FROM runs WHERE status = 'queued' LIMIT 1") is not None


async def count_queued(store: Store) -> int:
    row = await store.fetchone("SELECT count(*) FROM runs WHERE status = 'queued'")
    return int(row[0]) if row else 0


async def release_runs(store: Store, run_ids: list[int], *, worker: str | None = None) -> None:
    """Runs interrupted by a clean shutdown go back to the queue without using up an attempt; with a
    ``worker``, only those it still holds (another may have taken one over meanwhile)."""
    if not run_ids:
        return
    marks = ", ".join("?" * len(run_ids))
    held = "" if worker is None else "AND lease_owner = ?"
    async with store.write() as db:
        async with db.execute(
            "UPDATE runs SET status = 'queued', lease_owner = NULL, lease_until = NULL,"
            " attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END"
            f" WHERE status = 'running' AND id IN ({marks}) {held} RETURNING id, thread_id",
            [*run_ids, *([] if worker is None else [worker])],
        ) as cursor:
            rows = sorted((int(r[0]), int(r[1])) for r in await cursor.fetchall())
        for run_id, thread_id in rows:
            record(db, RunChanged(run=run_id, thread=thread_id, status="queued"))
            await db.execute("UPDATE threads SET status = 'queued', updated_at = ? WHERE id = ?",
                             (now(), thread_id))


async def run_status(db: Tx, run_id: int) -> str | None:
    """Read inside the caller's transaction: whether the run is still this worker's to finish."""
    async with db.execute("SELECT status FROM runs WHERE id = ?", (run_id,)) as cursor:
        row = await cursor.fetchone()
    return str(row[0]) if row else None


async def resume_waiting(db: Tx, run_id: int, thread_id: int) -> None:
    """A run waiting for a decision goes back to the queue; it resumes from its checkpoints. Its
    attempts start over: waiting for a person is not a failed attempt."""
    cursor = await db.execute("UPDATE runs SET status = 'queued', attempts = 0"
                              " WHERE id = ? AND status = 'waiting'", (run_id,))
    if cursor.rowcount == 1:
        record(db, RunQueued(run=run_id, thread=thread_id))
        record(db, RunChanged(run=run_id, thread=thread_id, status="queued"))
    await db.execute("UPDATE threads SET status = 'queued', updated_at = ? WHERE id = ?", (now(), thread_id))


async def request_stop(db: Tx, thread_id: int, *, by: str) -> int | None:
    """Ask the thread's active run (working, or waiting for its delegates or for a decision) to
    stop, with every run it delegated, and end the follow-ups queued behind it, which never start.
    The run asked, or None when none was active (then nothing changes). A run that waited for a
    decision withdraws its request when it ends.

    Only the request is written here: the runner working on the run cancels it and writes its end
    (told by :class:`StopRequested`, which reaches other processes too on PostgreSQL; on SQLite
    another process's runner notices the row)."""
    if dialect_of(db) == POSTGRESQL:
        # what is read below must still hold when it is written: a claim (not serialised with this
        # transaction) could start a queued follow-up in between. Claims skip locked rows.
        await db.execute("SELECT id FROM runs WHERE thread_id = ? FOR UPDATE", (thread_id,))
    async with db.execute("SELECT id FROM runs WHERE thread_id = ? AND status IN"
                          " ('running', 'delegating', 'waiting')", (thread_id,)) as cursor:
        row = await cursor.fetchone()
    if row is None:
        return None
    run_id = int(row[0])
    async with db.execute("SELECT id FROM runs WHERE thread_id = ? AND status = 'queued'",
                          (thread_id,)) as cursor:
        queued = [int(r[0]) for r in await cursor.fetchall()]
    await db.execute("UPDATE runs SET status = 'stopped', error = 'stopped before it started',"
                     " finished_at = ? WHERE thread_id = ? AND status = 'queued'", (now(), thread_id))
    for follow_up in queued:  # the Activity board drops their "queued" rows at once
        record(db, RunChanged(run=follow_up, thread=thread_id, status="stopped"))
    # after the follow-ups: a run waiting for its delegates is queued again to be ended
    for stopping in [run_id, *await _descendants(db, run_id)]:
        await _ask_to_stop(db, stopping, by=by)
    return run_id


async def _descendants(db: Tx, run_id: int) -> list[int]:
    """The runs delegated from ``run_id``, their own delegates too, that have not ended."""
    async with db.execute(
        "WITH RECURSIVE tree(id) AS (SELECT id FROM runs WHERE parent_run = ? UNION"
        " SELECT r.id FROM runs r JOIN tree ON r.parent_run = tree.id)"
        f" SELECT r.id FROM runs r JOIN tree ON r.id = tree.id WHERE r.status NOT IN {_ENDED_SQL}"
        " ORDER BY r.id", (run_id,)) as cursor:
        return [int(r[0]) for r in await cursor.fetchall()]


async def _ask_to_stop(db: Tx, run_id: int, *, by: str) -> None:
    """A working run is told (:class:`StopRequested`); one no worker holds (queued, waiting for a
    decision or for its delegates) goes to the queue, and the runner that takes it ends it."""
    # this update locks the row first (a claim in flight is waited for, a later one skips the row),
    # so the status read next still holds when the run is queued again below
    await db.execute("UPDATE runs SET stop_requested = coalesce(stop_requested, ?) WHERE id = ?",
                     (by, run_id))
    async with db.execute("SELECT thread_id, status FROM runs WHERE id = ?", (run_id,)) as cursor:
        row = await cursor.fetchone()
    assert row is not None
    if row[1] == "running":
        record(db, StopRequested(run=run_id, thread=int(row[0])))
        return
    await db.execute("UPDATE runs SET status = 'queued' WHERE id = ?", (run_id,))
    await _announce_queued(db, run_id)


async def ask_stop(db: Tx, thread_id: int, *, by: str) -> int | None:
    """:func:`request_stop`, in the thread's log either way (who asked, and which run if any)."""
    run_id = await request_stop(db, thread_id, by=by)
    await log_event(db, "run.stop_requested", thread_id=thread_id, run_id=run_id, by=by)
    return run_id


async def stops_requested(store: Store, run_ids: list[int]) -> list[int]:
    """Which of ``run_ids`` are still running with a stop asked for."""
    if not run_ids:
        return []
    marks = ", ".join("?" * len(run_ids))
    rows = await store.fetchall(f"SELECT id FROM runs WHERE stop_requested IS NOT NULL AND status ="
                                f" 'running' AND id IN ({marks})", run_ids)
    return [int(r[0]) for r in rows]


async def last_run(db: Tx, thread_id: int) -> int | None:
    """The thread's latest run, whatever its state (a mail about the thread names it)."""
    async with db.execute("SELECT max(id) FROM runs WHERE thread_id = ?", (thread_id,)) as cursor:
        row = await cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else None


async def stopped_by(store: Store, run_id: int) -> str:
    """Who asked ``run_id`` to stop (``""`` when nobody did)."""
    row = await store.fetchone("SELECT stop_requested FROM runs WHERE id = ?", (run_id,))
    return str(row[0]) if row and row[0] else ""
