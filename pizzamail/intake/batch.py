"""A task mail's commit: its bytes and its rows in one transaction of the store's group commit.

SMTP answers ``250`` only once its mail is committed, bytes and all. Alone, each mail would pay
its own fsync and its own turn at the store's write lock; the store's group commit
(:mod:`pizzamail.store.commit`) puts the mails that arrive while a commit is under way into the
next one, each in a savepoint of its own, with priority over the runner's writes. A mail's bytes
go into the same transaction (:meth:`~pizzamail.store.blobs.BlobStore.save_in`: the ``blobs``
table), so the commit is their one fsync.
"""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.intake.tasks import Received, Stored, record_task
from pizzamail.store import Store, Tx
from pizzamail.store.blobs import BlobStore


@dataclass(kw_only=True)
class GroupCommit:
    store: Store
    blobs: BlobStore

    async def commit(self, mail: Received) -> Stored:
        """``mail`` recorded (see :func:`~pizzamail.intake.tasks.record_task`) and committed. A session
        that goes away meanwhile leaves its mail in the batch it joined."""

        async def record(db: Tx) -> Stored:
            [blob] = await self.blobs.save_in(db, [mail.raw])
            return await record_task(db, mail, blob)

        return await self.store.write_at_once(record, priority=True)
