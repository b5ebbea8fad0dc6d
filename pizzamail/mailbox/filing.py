"""Filing stored messages into their folders: the Maildir, or the user's own account in IMAP mode
(any :class:`~pizzamail.mailbox.writing.MailFolders`).

A message is committed to the store first (``filed = 0``) and copied into its folder afterwards;
what a crash leaves unfiled is filed at the next start. The mail's name is derived from the row, so
filing twice never makes two copies, and a file a crash left behind unindexed (or indexed by the
start-up reconciliation as a stranger's) is recognised as the row's and taken over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pizzamail.mailbox.maildir import message_base
from pizzamail.mailbox.writing import MailFolders
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailindex import unfiled


async def file_pending(mailbox: MailFolders, blobs: BlobStore) -> int:
    """File every unfiled message; returns how many were filed."""
    rows = await unfiled(mailbox.store)
    for row in rows:
        folder = await mailbox.folder(row.folder) or await mailbox.create_folder(row.folder)
        created = created_stamp(row.created_at)
        data = await blobs.load(row.blob)
        await mailbox.deliver(folder, data, flags=row.flags, base=message_base(row.id, created),
                              internaldate=created, message_ref=row.id)
    return len(rows)


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
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _next: asyncio.Future[int] | None = field(default=None, init=False, repr=False)
    """the pass that has not started yet: everyone asking now joins it"""

    async def run(self) -> int:
        """File every message committed before this call; returns how many the pass filed."""
        if not self.files():
            return 0
        if self._next is None:
            self._next = asyncio.ensure_future(self._pass())
        # one caller cancelled (a stopping runner) must not cancel the pass the others wait for
        return await asyncio.shield(self._next)

    async def _pass(self) -> int:
        async with self._lock:
            self._next = None  # started: whoever asks from now on may have committed after its look
            if not self.files():  # asked again after the wait: the leadership may have moved meanwhile
                return 0
            return await file_pending(self.mailbox, self.blobs)
