"""Group commit: the mails that arrive while a commit is under way share the next one.

SMTP answers ``250`` only once its mail is committed, bytes and all. Alone, each mail would pay
its own fsync and its own turn at the store's write lock; here the mails of a batch are saved
together (:meth:`~pizzamail.store.blobs.BlobStore.save_in`: into the ``blobs`` table of the same
transaction, so the commit is the batch's one fsync) and recorded in one transaction, one commit,
all in one step of the store's writer thread on SQLite
(:meth:`~pizzamail.store.Store.write_at_once`: every hop between threads waits for a busy event
loop, which cost more than the fsyncs). The first mail never waits for company: it is committed
at once, and whatever arrives meanwhile forms the next batch. Each mail is recorded in a savepoint
of its own, so one that fails (its own error, answered to its own sender) leaves the others in.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pizzamail.errors import TransactionLost
from pizzamail.intake.tasks import Received, Stored, record_task
from pizzamail.store import Store, Tx, savepoint
from pizzamail.store.blobs import Blob, BlobStore

_Waiting = tuple[Received, "asyncio.Future[Stored]"]


@dataclass(kw_only=True)
class GroupCommit:
    store: Store
    blobs: BlobStore
    _waiting: list[_Waiting] = field(default_factory=list)
    _committing: asyncio.Task[None] | None = None

    async def commit(self, mail: Received) -> Stored:
        """``mail`` recorded (see :func:`~pizzamail.intake.tasks.record_task`) and committed."""
        stored: asyncio.Future[Stored] = asyncio.get_running_loop().create_future()
        stored.add_done_callback(_retrieved)
        self._waiting.append((mail, stored))
        if self._committing is None:
            self._committing = asyncio.create_task(self._commit_waiting())
        # shielded: a session that goes away leaves its mail in the batch it joined
        return await asyncio.shield(stored)

    async def _commit_waiting(self) -> None:
        batch: list[_Waiting] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                await self._commit_batch(batch)
        finally:
            self._committing = None
            for _, stored in [*batch, *self._waiting]:
                stored.cancel()  # only the unanswered: stopped with the service

    async def _commit_batch(self, batch: list[_Waiting]) -> None:
        try:
            answers = await self._write([mail for mail, _ in batch])
        except Exception as exc:  # the blobs or the commit failed: every mail of the batch
            answers = [exc] * len(batch)
        for (_, stored), answer in zip(batch, answers, strict=True):
            if isinstance(answer, Exception):
                stored.set_exception(answer)
            else:
                stored.set_result(answer)

    async def _write(self, mails: list[Received]) -> list[Stored | Exception]:
        async def record(db: Tx) -> list[Stored | Exception]:
            blobs = await self.blobs.save_in(db, [mail.raw for mail in mails])
            return [await _recorded(db, mail, blob) for mail, blob in zip(mails, blobs, strict=True)]

        return await self.store.write_at_once(record, priority=True)


async def _recorded(db: Tx, mail: Received, blob: Blob) -> Stored | Exception:
    try:
        async with savepoint(db, "mail"):
            return await record_task(db, mail, blob)
    except TransactionLost:  # the batch's blobs went with it: no later mail may be recorded
        raise
    except Exception as exc:  # this mail's own answer; the others are committed
        return exc


def _retrieved(stored: asyncio.Future[Stored]) -> None:
    """An answer whose session went away meanwhile is nobody's to read: not an unread error."""
    if not stored.cancelled():
        stored.exception()
