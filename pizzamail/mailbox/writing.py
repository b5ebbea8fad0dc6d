"""What pizzamail's own writers need of a mailbox: filing, the Action folder's sync and the Activity
board. The local Maildir (:class:`~pizzamail.mailbox.box.Mailbox`) and the user's own IMAP account
(:class:`pizzamail.remote.box.RemoteMailbox`) both provide it.

Every delivery names its mail (``base``): delivering a name that is already there returns the mail
already there, so a writer that crashed between its delivery and its record simply delivers again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pizzamail.store import Store
from pizzamail.store.mailindex import Folder


class PlacedMail(Protocol):
    """A mail in a folder as its writers know it: its UID there and the name it was delivered under."""

    @property
    def uid(self) -> int: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """One mail of :meth:`MailFolders.deliver_each` (the arguments of :meth:`MailFolders.deliver`)."""

    data: bytes
    flags: frozenset[str] = frozenset()
    base: str | None = None
    internaldate: int | None = None
    message_ref: int | None = None


class MailFolders(Protocol):
    @property
    def store(self) -> Store: ...

    async def folder(self, name: str) -> Folder | None:
        """The folder pizzamail calls ``name`` (INBOX, Action, Activity, Drafts, ...), None if missing."""
        ...

    async def create_folder(self, name: str) -> Folder: ...

    async def messages(self, folder: Folder) -> Sequence[PlacedMail]:
        """The mails of ``folder`` that pizzamail delivered and that are still there."""
        ...

    async def deliver(
        self, folder: Folder, data: bytes, *, flags: Iterable[str] = (), base: str | None = None,
        internaldate: int | None = None, message_ref: int | None = None,
    ) -> int:
        """Put ``data`` into ``folder`` under the name ``base`` at most once; returns its UID.
        ``message_ref``: the mail is the copy of that stored message, which then counts as filed."""
        ...

    async def deliver_each(self, folder: Folder, mails: Sequence[Delivery]) -> list[int]:
        """:meth:`deliver` of several mails into ``folder``, in one go where the mailbox can (the
        Maildir: one trip to write the files, one commit); returns their UIDs."""
        ...

    async def expunge(self, folder: Folder, uids: Iterable[int]) -> list[int]:
        """Remove those mails for good; returns the UIDs removed."""
        ...
