"""The user's own IMAP account: pizzamail's folders there and the mails it APPENDed to them.

A mail is written down (``uid`` NULL) before its APPEND and given its UID after; a row still without
one after a crash is resolved by a search of the folder for its Message-ID. A folder whose UIDVALIDITY
changed keeps its mails' names and Message-IDs and loses their UIDs, which are found the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pizzamail.store import Store, insert
from pizzamail.store.mailindex import mark_filed

_PLACED = "SELECT name, message_id, uid FROM remote_mail"


@dataclass(frozen=True, kw_only=True)
class RemoteFolder:
    id: int
    name: str
    """pizzamail's name (INBOX, Action, Drafts, ...)"""
    remote: str
    """its name at the account"""
    uidvalidity: int


@dataclass(frozen=True, kw_only=True)
class Placed:
    """A mail pizzamail put into a remote folder, under the name its writer gave it."""

    name: str
    message_id: str
    uid: int | None
    """None: its APPEND may have happened but was never confirmed"""


async def save_folder(
    store: Store, account: str, name: str, *, remote: str, uidvalidity: int
) -> RemoteFolder:
    """The folder as the server has it now; a new UIDVALIDITY voids the UIDs of its mails."""
    async with store.write() as db:
        async with db.execute("SELECT id, remote, uidvalidity FROM remote_folders"
                              " WHERE account = ? AND name = ?", (account, name)) as cursor:
            row = await cursor.fetchone()
        if row is None:
            new = await insert(
                db, "INSERT INTO remote_folders(account, name, remote, uidvalidity) VALUES (?, ?, ?, ?)",
                (account, name, remote, uidvalidity))
            return RemoteFolder(id=new, name=name, remote=remote, uidvalidity=uidvalidity)
        folder_id = int(row[0])
        if (row[1], row[2]) != (remote, uidvalidity):
            await db.execute("UPDATE remote_folders SET remote = ?, uidvalidity = ? WHERE id = ?",
                             (remote, uidvalidity, folder_id))
            await db.execute("UPDATE remote_mail SET uid = NULL WHERE folder_id = ?", (folder_id,))
    return RemoteFolder(id=folder_id, name=name, remote=remote, uidvalidity=uidvalidity)


async def placed(store: Store, folder_id: int) -> list[Placed]:
    rows = await store.fetchall(_PLACED + " WHERE folder_id = ? ORDER BY name", (folder_id,))
    return [Placed(name=r["name"], message_id=r["message_id"], uid=r["uid"]) for r in rows]


async def placed_named(store: Store, folder_id: int, name: str) -> Placed | None:
    row = await store.fetchone(_PLACED + " WHERE folder_id = ? AND name = ?", (folder_id, name))
    return None if row is None else Placed(name=row["name"], message_id=row["message_id"], uid=row["uid"])


async def intend(store: Store, folder_id: int, name: str, message_id: str) -> None:
    """Written down before the APPEND: from now on a crash is resolved by a search, not a second APPEND."""
    async with store.write() as db:
        await db.execute("INSERT INTO remote_mail(folder_id, name, message_id) VALUES (?, ?, ?)"
                         " ON CONFLICT (folder_id, name) DO NOTHING", (folder_id, name, message_id))


async def place(
    store: Store, folder_id: int, name: str, uid: int, *, message_ref: int | None = None
) -> None:
    """The mail is at ``uid``; ``message_ref``: it is the copy of that stored message, now filed."""
    async with store.write() as db:
        await db.execute("UPDATE remote_mail SET uid = ? WHERE folder_id = ? AND name = ?",
                         (uid, folder_id, name))
        if message_ref is not None:
            await mark_filed(db, [message_ref])


async def forget(store: Store, folder_id: int, names: Iterable[str]) -> None:
    """These mails are gone from the folder (expunged, or their APPEND never happened)."""
    async with store.write() as db:
        await db.executemany("DELETE FROM remote_mail WHERE folder_id = ? AND name = ?",
                         [(folder_id, name) for name in names])
