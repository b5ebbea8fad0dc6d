"""The mail index as IMAP sees it: folders, the index entries of their messages, the messages'
bytes, and change notification. The IMAP server talks only to this interface.

Implementations: :class:`~pizzamail.mailbox.box.Mailbox` (Maildir files indexed in the store, what
``serve`` runs) and :class:`~pizzamail.mailbox.memory.MemoryMailbox` (dicts, for fast transcript
tests). Every change bumps the folder's modseq and sets the folder's change event, so IDLE needs no
polling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pizzamail.store.mailindex import Counts, Folder, MailRow, Outline, Structures


@dataclass
class ChangeEvents:
    """One event per folder, set at its next change: whoever waits (IDLE) takes the event, then
    looks, so a change right after the look still wakes it."""

    _events: dict[int, asyncio.Event] = field(default_factory=dict)

    def event(self, folder_id: int) -> asyncio.Event:
        return self._events.setdefault(folder_id, asyncio.Event())

    def changed(self, folder_id: int) -> None:
        event = self._events.pop(folder_id, None)
        if event is not None:
            event.set()


class MailIndex(Protocol):
    # -- folders ------------------------------------------------------------------------------

    async def folders(self) -> list[Folder]:
        """Every folder, in the order they were made."""
        ...

    async def folder(self, name: str) -> Folder | None:
        """The folder by name (``INBOX`` in any case)."""
        ...

    async def create_folder(
        self, name: str, *, special_use: str | None = None, exist_ok: bool = False, subscribed: bool = True,
    ) -> Folder:
        """Make a folder; a taken or unusable name is a ``FolderError``."""
        ...

    async def delete_folder(self, folder: Folder) -> None:
        """Remove a folder and its messages (sub-folders are left alone)."""
        ...

    async def rename_folder(self, folder: Folder, new_name: str) -> None:
        """Rename a folder and the folders below it."""
        ...

    async def set_subscribed(self, folder: Folder, subscribed: bool) -> None: ...

    async def counts(self, folder: Folder) -> Counts:
        """Messages, unseen and recent ones (STATUS)."""
        ...

    async def modseq(self, folder: Folder) -> int | None:
        """The folder's current modseq (None: the folder is gone)."""
        ...

    def change_event(self, folder: Folder) -> asyncio.Event:
        """An event set at the next change of ``folder`` (take a fresh one after each wake-up)."""
        ...

    # -- \Recent --------------------------------------------------------------------------------

    async def recent_from(self, folder: Folder) -> int:
        """The first UID no session has been shown as \\Recent (RFC 3501 §2.3.2)."""
        ...

    async def claim_recent(self, folder: Folder, uids: Sequence[int]) -> set[int]:
        """Of ``uids``, the ones still recent, which from now on are recent for the caller only."""
        ...

    # -- index entries ------------------------------------------------------------------------

    async def outline(self, folder: Folder) -> Outline | None:
        """The folder's modseq, UIDs, first unseen UID and keywords (None: the folder is gone), as
        of ``folder.modseq`` or later."""
        ...

    async def rows(self, folder: Folder, uids: Sequence[int]) -> dict[int, MailRow]:
        """The entries of these UIDs (ascending); expunged ones are missing."""
        ...

    @property
    def reads_in_place(self) -> bool:
        """Its reads of entries run on the caller's thread and never suspend (SQLite's): one
        started early only runs when its task's turn comes."""
        ...

    async def cached_rows(
        self, folder: Folder, uids: Sequence[int], wanted: Collection[str],
    ) -> dict[int, tuple[MailRow, Structures]]:
        """:meth:`rows` with the ``wanted`` parts of what is cached of each message (``headers``,
        ``envelope``, ``bodystructure``; the others may be left None)."""
        ...

    async def message(self, folder: Folder, uid: int) -> MailRow | None: ...

    async def changed_since(self, folder: Folder, modseq: int) -> list[MailRow]:
        """Entries with a modseq above ``modseq`` (new or re-flagged), by UID."""
        ...

    async def vanished(self, folder: Folder, known: Collection[int]) -> set[int]:
        """Of the ``known`` UIDs, those no longer in the folder."""
        ...

    async def expunged_since(self, folder: Folder, modseq: int) -> list[int]:
        """UIDs expunged with a modseq above ``modseq``, ascending (QRESYNC)."""
        ...

    async def save_structures(self, folder: Folder, computed: dict[int, Structures]) -> None:
        """Cache what FETCH computed; a value left None keeps what is cached."""
        ...

    # -- message bytes ------------------------------------------------------------------------

    async def read(self, folder: Folder, row: MailRow) -> bytes | None:
        """The message; None when ``row`` is out of date (re-flagged or expunged meanwhile)."""
        ...

    async def read_many(
        self, folder: Folder, rows: Sequence[MailRow], *, header_only: bool = False
    ) -> list[bytes | None]:
        """The messages of ``rows`` in one go (one trip off the event loop), or with ``header_only``
        at least their headers (a header listing needs no attachment); None as for ``read``."""
        ...

    # -- changes ------------------------------------------------------------------------------

    async def deliver(
        self, folder: Folder, data: bytes, *, flags: Iterable[str] = (), internaldate: int | None = None,
    ) -> int:
        """Add a message (its line ends made CRLF); returns its UID."""
        ...

    async def set_flags(self, folder: Folder, changes: dict[int, set[str]]) -> int:
        """Replace the flags of several messages (uid -> new flags); returns the new modseq."""
        ...

    async def set_flags_unless_changed(
        self, folder: Folder, changes: dict[int, set[str]], unchangedsince: int
    ) -> tuple[int, set[int]]:
        """``set_flags`` for the messages whose modseq is still at most ``unchangedsince`` (RFC 7162
        §3.1.3); returns the new modseq (0: nothing written) and the UIDs left alone."""
        ...

    async def expunge(self, folder: Folder, uids: Iterable[int]) -> list[int]:
        """Remove messages; returns the UIDs actually removed."""
        ...

    async def move(self, source: Folder, uids: Iterable[int], target: Folder) -> list[tuple[int, int]]:
        """Move messages, each ending up in exactly one folder; returns (old UID, new UID) pairs."""
        ...
