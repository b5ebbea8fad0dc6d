"""Filing stored messages into their folders: the Maildir, or the user's own account in IMAP mode
(any :class:`~pizzamail.mailbox.writing.MailFolders`).

A message is committed to the store first (``filed = 0``) and copied into its folder afterwards;
what a crash leaves unfiled is filed at the next start. The mail's name is derived from the row, so
filing twice never makes two copies, and a file a crash left behind unindexed (or indexed by the
start-up reconciliation as a stranger's) is recognised as the row's and taken over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pizzamail.lanes import foreground_context
from pizzamail.mailbox.maildir import message_base
from pizzamail.mailbox.writing import Delivery, MailFolders
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailindex import Unfiled, unfiled


async def file_pending(mailbox: MailFolders, blobs: BlobStore) -> int:
    """File every unfiled message, up to :data:`AT_ONCE` of a folder in one delivery; returns how many
    were filed."""
    rows = await unfiled(mailbox.store)
    by_folder: dict[str, list[Unfiled]] = {}
    for row in rows:
        by_folder.setdefault(row.folder, []).append(row)
    for name, waiting in by_folder.items():
        folder = await mailbox.folder(name) or await mailbox.create_folder(name)
        for start in range(0, len(waiting), AT_ONCE):
            await mailbox.deliver_each(folder, [await _delivery(row, blobs)
                                                for row in waiting[start:start + AT_ONCE]])
    return len(rows)


AT_ONCE = 64
"""messages filed in one delivery (one trip to write their files, one commit); a start after a
long time away may find thousands unfiled, whose bytes need not all be in memory at once"""


async def _delivery(row: Unfiled, blobs: BlobStore) -> Delivery:
    created = created_stamp(row.created_at)
    return Delivery(data=await blobs.load(row.blob), flags=row.flags, base=message_base(row.id, created),
                    internaldate=created, message_ref=row.id)


def created_stamp(created_at: str) -> int:
    """A message row's ``created_at`` as Unix seconds (part of its Maildir name, its INTERNALDATE)."""
    return int(datetime.strptime(created_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())


@dataclass(kw_only=True)
class Filer:
    """Runs :func:`file_pending` one pass at a time: two passes at once could both see a row
    as unfiled and index it twice. A service shares one Filer between everything that files.

    Whoever asks while a pass runs waits for the next one, which starts after that pass and is shared
    by everyone who asked meanwhile: a caller's mail, committed before it asked, is filed when it
    returns, and a burst of callers (every run that ends, every status mail) costs two passes, not a
    queue of passes that each look at the whole index for the one row left."""

    mailbox: MailFolders
    blobs: BlobStore
    files: Callable[[], bool] = lambda: True
    """whether this process files now: of several serves sharing the user's own account, only the
    leader writes to it (the others' mail stays unfiled until the leader's filing picks it up)"""
    pace: Callable[[], Awaitable[None]] = lambda: asyncio.sleep(0)
    """awaited before each pass: the service's waits while SMTP clients hand over mail
    (:mod:`pizzamail.intake.pace`), and everyone who asks meanwhile joins that pass"""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _next: asyncio.Future[int] | None = field(default=None, init=False, repr=False)
    """the pass that has not started yet: everyone asking now joins it"""

    async def run(self) -> int:
        """File every message committed before this call; returns how many the pass filed."""
        if not self.files():
            return 0
        if self._next is None:  # in the foreground: a run may start it, and anyone may wait for it
            self._next = asyncio.create_task(self._pass(), context=foreground_context())
        # one caller cancelled (a stopping runner) must not cancel the pass the others wait for
        return await asyncio.shield(self._next)

    async def _pass(self) -> int:
        await self.pace()
        async with self._lock:
            self._next = None  # started: whoever asks from now on may have committed after its look
            if not self.files():  # asked again after the wait: the leadership may have moved meanwhile
                return 0
            return await file_pending(self.mailbox, self.blobs)
