"""The end of a run: its mail and its final status, committed together.

A run ends ``done`` (its reply), ``failed`` (an error mail or notice) or ``waiting`` (it stopped at a
call held for approval; the mail says what waits, and the thread's status is ``waiting`` too).

The reply (or error mail) row and ``finish_run`` share one transaction, so after a crash a run is
either still unfinished (and resumes) or finished with exactly one mail. Filing into the Maildir
comes after the commit; what a crash leaves unfiled is filed at the next start. The model's answer
that ends a run is written in the same transaction, not in a commit of its own before it: a crash
in between asks the model again, and that answer had called no tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pizzamail.composer import Composed
from pizzamail.store import Store, Tx
from pizzamail.store.actions import set_request
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailwriter import add_mail, message_row
from pizzamail.store.runs import Run, add_step, fenced, finish_run, run_status
from pizzamail.store.threads import NewMessage, log_event, set_thread_status
from pizzamail.store.usage import record_run_usage

Answer = tuple[int, str, dict[str, Any]]
"""a step written with the run's end: (seq, kind, data)"""


async def conclude(
    store: Store, blobs: BlobStore, run: Run, mail: Composed, *, sender: str, status: str,
    error: str | None = None, model: str | None = None, request_for: int | None = None,
    extra: Sequence[tuple[int, NewMessage]] = (), answer: Answer | None = None,
) -> bool:
    """Record the run's mail and finish it. False if the run was no longer ours to finish.
    ``extra`` messages, each in its thread (a held draft for ``Drafts``, a note in the delegating
    run's thread), are recorded with it, once each; ``answer``, the model's last step (seq, kind,
    data), too."""
    data = mail.as_bytes()

    async def record(db: Tx) -> bool:
        if await run_status(db, run.id) != "running":
            return False
        if answer is not None:  # before the usage is summed up from the steps
            await add_step(db, run.id, *answer)
        # in the transaction, before the row that names it: a SQLite home keeps it in the blobs
        # table, committed by the commit's one fsync (a file cost its own and its folder's, and a
        # thread hop, on the way from the model's answer to the reply filed)
        [blob] = await blobs.save_in(db, [data])
        reply = message_row(mail, blob, kind=mail.kind, sender=sender, run_id=run.id)
        await add_mail(db, run.thread_id, reply)
        for thread_id, message in extra:
            await add_mail(db, thread_id, message, once=True)
        await finish_run(db, run, status=status, error=error, model=model)
        await record_run_usage(db, run.id)
        if request_for is not None:  # a reply to this mail routes back to the action by In-Reply-To
            await set_request(db, request_for, mail.message_id)
        if status == "waiting":  # a held action waits for the user's decision, not a failure
            await set_thread_status(db, run.thread_id, "waiting")
        await log_event(db, f"run.{status}", thread_id=run.thread_id, run_id=run.id,
                        mail=mail.kind, error=error)
        return True

    # statements only: on SQLite one step of the writer's thread, not a hop to it for each of ~10
    return await store.write_at_once(fenced(record))
