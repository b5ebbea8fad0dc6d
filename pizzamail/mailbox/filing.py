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
    as unfiled and index it twice. A service shares one Filer between everything that files."""

    mailbox: MailFolders
    blobs: BlobStore
    files: Callable[[], bool] = lambda: True
    """whether this process files now: of several serves sharing the user's own account, only the
    leader writes to it (the others' mail stays unfiled until the leader's filing picks it up)"""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def run(self) -> int:
        if not self.files():
            return 0
        async with self._lock:
            if not self.files():  # asked again after the wait: the leadership may have moved meanwhile
                return 0
            return await file_pending(self.mailbox, self.blobs)
