"""The IMAP mail index: folders (UIDVALIDITY, UIDNEXT, modseq, \\Recent) and the Maildir files in
them (UID, flags, size, cached header fields, ENVELOPE and BODYSTRUCTURE), plus the QRESYNC memory
of expunged UIDs.

Reads take the store; writes take the transaction's connection (``db``), because the mailbox pairs
each of them with file changes inside one transaction. Flags are kept as one space-separated text.
"""

from __future__ import annotations

import functools
import itertools
import operator
import time
from array import array
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from pizzamail.store import Row, Store, Tx

#: UIDs per query: well under SQLite's limit on bound parameters
_CHUNK = 500
_MAIL = "SELECT uid, name, subdir, size, internaldate, flags, modseq FROM mail"
#: what is cached of a message (columns of ``mail``); a read takes only those a command needs
CACHED = ("envelope", "bodystructure", "headers")  # in the order of Structures' fields
#: asks :func:`cached_mail_of` for the place of each message's file (its name and subdir)
PLACE = "place"


@dataclass(frozen=True, kw_only=True)
class Folder:
    id: int
    name: str
    uidvalidity: int
    uidnext: int
    modseq: int
    special_use: str | None
    subscribed: bool
    #: UIDs from here on are \Recent for the next session that opens the folder
    first_recent: int


class MailRow(NamedTuple):
    """One message's index entry (``name`` and ``subdir`` place its Maildir file). A named tuple:
    a listing makes thousands, and a frozen dataclass takes three times as long to make."""

    uid: int
    name: str
    subdir: str
    size: int
    internaldate: int
    flags: frozenset[str]
    modseq: int


class Structures(NamedTuple):
    """What is cached of a message, once computed (None: not yet): its ENVELOPE and BODYSTRUCTURE
    in wire form, and the raw lines of the header fields clients list (``headers``)."""

    envelope: bytes | None = None
    bodystructure: bytes | None = None
    headers: bytes | None = None


@dataclass(frozen=True, kw_only=True)
class NewMail:
    """A file about to be indexed, with what is cached of it (nothing for a file found on disk)."""

    name: str
    subdir: str
    size: int
    internaldate: int
    flags: frozenset[str]
    cached: Structures = field(default_factory=Structures)
    message_ref: int | None = None
    """the stored message this file is the copy of (filed once indexed)"""


@dataclass(frozen=True, kw_only=True)
class Counts:
    """What STATUS reports of a folder's messages."""

    messages: int
    unseen: int
    recent: int


@dataclass(frozen=True, kw_only=True)
class Outline:
    """What opening a folder needs, without a row per message: its modseq, the UIDs (4 bytes
    each), the first unseen UID and the keywords in use."""

    modseq: int
    uids: array[int]
    first_unseen: int | None
    keywords: frozenset[str]


@dataclass(frozen=True, kw_only=True)
class Unfiled:
    """A stored message not yet copied into its folder."""

    id: int
    blob: str
    folder: str
    flags: frozenset[str]
    created_at: str


def flags_text(flags: Iterable[str]) -> str:
    return " ".join(sorted(set(flags)))


def _folder(row: Row) -> Folder:
    return Folder(id=row["id"], name=row["name"], uidvalidity=row["uidvalidity"], uidnext=row["uidnext"],
                  modseq=row["modseq"], special_use=row["special_use"], subscribed=bool(row["subscribed"]),
                  first_recent=row["first_recent"])


def _mails(rows: Sequence[tuple[Any, ...] | Row]) -> list[MailRow]:
    """The entries of rows of ``_MAIL``."""
    if not rows:
        return []
    return list(_mail_rows(*zip(*cast(list[tuple[Any, ...]], rows), strict=True)))


def _mail_rows(uid: Iterable[int], name: Iterable[str], subdir: Iterable[str], size: Iterable[int],
               internaldate: Iterable[int], flags: Iterable[str], modseq: Iterable[int]) -> Iterator[MailRow]:
    """Entries from their columns, made in C (map, zip, the tuples' own constructor) with no Python
    code run per message: a listing, a FLAGS listing or a SEARCH reads thousands."""
    return map(_new_mail_row, zip(uid, name, subdir, size, internaldate, map(_flag_set, flags), modseq,
                                  strict=True))


@functools.lru_cache(maxsize=1024)  # a folder's messages share a few combinations of flags
def _flag_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# -- reads ------------------------------------------------------------------------------------------


async def folders(store: Store) -> list[Folder]:
    return [_folder(r) for r in await store.fetchall("SELECT * FROM folders ORDER BY id")]


async def folder_named(store: Store, name: str) -> Folder | None:
    row = await store.fetchone("SELECT * FROM folders WHERE name = ?", (name,))
    return _folder(row) if row else None


async def first_recent(store: Store, folder_id: int) -> int | None:
    row = await store.fetchone("SELECT first_recent FROM folders WHERE id = ?", (folder_id,))
    return int(row["first_recent"]) if row else None


async def folder_modseq(store: Store, folder_id: int) -> int | None:
    row = await store.fetchone("SELECT modseq FROM folders WHERE id = ?", (folder_id,))
    return int(row["modseq"]) if row else None


async def outline(store: Store, folder_id: int) -> Outline | None:
    """The folder's outline. Its modseq is read first: a change landing in between shows up in
    the rest, which a session catching up from that modseq then sees again (harmless)."""
    modseq = await folder_modseq(store, folder_id)
    if modseq is None:
        return None
    rows = await store.fetchall("SELECT uid FROM mail WHERE folder_id = ? ORDER BY uid", (folder_id,))
    unseen = await store.fetchone(
        "SELECT min(uid) AS uid FROM mail WHERE folder_id = ? AND ' ' || flags || ' ' NOT LIKE ? ESCAPE '!'",
        (folder_id, "% \\Seen %"))
    texts = await store.fetchall("SELECT DISTINCT flags FROM mail WHERE folder_id = ? AND flags <> ''",
                                 (folder_id,))
    keywords = {f for r in texts for f in r["flags"].split() if not f.startswith("\\")}
    return Outline(modseq=modseq, uids=array("I", (r[0] for r in rows)),
                   first_unseen=unseen["uid"] if unseen else None, keywords=frozenset(keywords))


async def mail_of(store: Store, folder_id: int, uids: Sequence[int]) -> dict[int, MailRow]:
    """Index entries of these UIDs (ascending); expunged ones are missing."""
    found = _mails(await _rows_of(store, _MAIL, folder_id, uids))
    return dict(zip(map(_UID, found), found, strict=True))


async def cached_mail_of(
    store: Store, folder_id: int, uids: Sequence[int], wanted: Collection[str],
) -> dict[int, tuple[MailRow, Structures]]:
    """:func:`mail_of` with the ``wanted`` parts of what is cached of each message (see ``CACHED``),
    and only the ``wanted`` ones of ``PLACE`` and ``modseq``: the others come back empty (name and
    subdir "", modseq 0; such a row cannot find its file). A listing reads thousands of rows, and
    each column read costs more than making the row of it."""
    place = ("name", "subdir") if PLACE in wanted else ()
    columns = ("uid", "size", "internaldate", "flags", *place, *(("modseq",) if "modseq" in wanted else ()),
               *(c for c in CACHED if c in wanted))
    rows = await _rows_of(store, f"SELECT {', '.join(columns)} FROM mail", folder_id, uids)
    if not rows:
        return {}
    read = dict(zip(columns, zip(*rows, strict=True), strict=True))
    n = len(rows)
    mail = _mail_rows(read["uid"], read.get("name", [""] * n), read.get("subdir", [""] * n), read["size"],
                      read["internaldate"], read["flags"], read.get("modseq", [0] * n))
    if not any(c in read for c in CACHED):  # FLAGS, sizes, dates: one empty value shared by all
        return dict(zip(read["uid"], zip(mail, itertools.repeat(_NO_STRUCTURES)), strict=True))
    cached = map(_new_structures, zip(*(_blobs(read[c]) if c in read else [None] * n for c in CACHED),
                                      strict=True))
    return dict(zip(read["uid"], zip(mail, cached, strict=True), strict=True))


_new_mail_row = functools.partial(tuple.__new__, MailRow)
_UID = operator.itemgetter(0)
_new_structures = functools.partial(tuple.__new__, Structures)
_NO_STRUCTURES = Structures()


def _blobs(column: Sequence[bytes | None]) -> Iterable[bytes | None]:
    """A column of blobs as bytes (PostgreSQL may hand out memoryviews)."""
    if set(map(type, column)) <= {bytes, type(None)}:
        return column
    return map(_blob, column)


async def _rows_of(store: Store, select: str, folder_id: int, uids: Sequence[int]) -> list[tuple[Any, ...]]:
    """A range query per chunk where the UIDs are dense (a listing of 1:*), else a list of UIDs.
    The UID is the first column."""
    found: list[tuple[Any, ...]] = []
    for start in range(0, len(uids), _CHUNK):
        chunk = uids[start:start + _CHUNK]
        first, last = chunk[0], chunk[-1]
        if last - first < 2 * len(chunk):
            rows = await store.fetch_tuples(select + " WHERE folder_id = ? AND uid BETWEEN ? AND ?",
                                            (folder_id, first, last))
            if last - first + 1 > len(chunk):  # else every UID in the range is asked for
                wanted = set(chunk)
                rows = [r for r in rows if r[0] in wanted]
            found += rows
        else:
            marks = ", ".join("?" * len(chunk))
            found += await store.fetch_tuples(select + f" WHERE folder_id = ? AND uid IN ({marks})",
                                              (folder_id, *chunk))
    return found


async def mail_in(store: Store, folder_id: int) -> list[MailRow]:
    return _mails(await store.fetch_tuples(_MAIL + " WHERE folder_id = ? ORDER BY uid", (folder_id,)))


async def mail_changed_since(store: Store, folder_id: int, modseq: int) -> list[MailRow]:
    return _mails(await store.fetch_tuples(_MAIL + " WHERE folder_id = ? AND modseq > ? ORDER BY uid",
                                           (folder_id, modseq)))


async def mail_entry(store: Store, folder_id: int, uid: int) -> MailRow | None:
    row = await store.fetchone(_MAIL + " WHERE folder_id = ? AND uid = ?", (folder_id, uid))
    return _mails([row])[0] if row else None


async def uids_named(store: Store, folder_id: int, names: list[str]) -> dict[str, int]:
    """The UIDs of those names that are indexed in the folder."""
    found: dict[str, int] = {}
    for start in range(0, len(names), _CHUNK):
        chunk = names[start:start + _CHUNK]
        rows = await store.fetchall(f"SELECT name, uid FROM mail WHERE folder_id = ? AND name IN"
                                    f" ({', '.join('?' * len(chunk))})", (folder_id, *chunk))
        found.update((str(r["name"]), int(r["uid"])) for r in rows)
    return found


async def count_through(store: Store, folder_id: int, uid: int) -> int:
    """How many messages of the folder have a UID up to ``uid``."""
    row = await store.fetchone("SELECT count(*) AS n FROM mail WHERE folder_id = ? AND uid <= ?",
                               (folder_id, uid))
    return int(row["n"]) if row else 0


async def uids_through(store: Store, folder_id: int, uid: int) -> set[int]:
    rows = await store.fetchall("SELECT uid FROM mail WHERE folder_id = ? AND uid <= ?", (folder_id, uid))
    return {int(r["uid"]) for r in rows}


async def expunged_since(store: Store, folder_id: int, modseq: int) -> list[int]:
    """UIDs expunged with a modseq above ``modseq``, ascending (QRESYNC)."""
    rows = await store.fetchall(
        "SELECT uid FROM expunged WHERE folder_id = ? AND modseq > ? ORDER BY uid", (folder_id, modseq))
    return [int(r["uid"]) for r in rows]


async def counts(store: Store, folder_id: int, recent_from: int) -> Counts:
    # '!' escapes nothing here: it only stops PostgreSQL reading the flag's backslash as an escape
    row = await store.fetchone(
        "SELECT count(*) AS messages,"
        " sum(CASE WHEN ' ' || flags || ' ' LIKE ? ESCAPE '!' THEN 0 ELSE 1 END) AS unseen,"
        " sum(CASE WHEN uid >= ? THEN 1 ELSE 0 END) AS recent FROM mail WHERE folder_id = ?",
        ("% \\Seen %", recent_from, folder_id),
    )
    assert row is not None
    return Counts(messages=int(row["messages"]), unseen=int(row["unseen"] or 0),
                  recent=int(row["recent"] or 0))


def _blob(value: bytes | None) -> bytes | None:
    return value if value is None or value.__class__ is bytes else bytes(value)


async def unfiled(store: Store) -> list[Unfiled]:
    rows = await store.fetchall(
        "SELECT id, blob, folder, flags, created_at FROM messages WHERE filed = 0 ORDER BY id")
    return [Unfiled(id=r["id"], blob=r["blob"], folder=r["folder"], flags=frozenset(r["flags"].split()),
                    created_at=r["created_at"]) for r in rows]


# -- writes (inside the caller's transaction) -----------------------------------------------------


async def add_folder(
    db: Tx, name: str, *, special_use: str | None, subscribed: bool,
) -> None:
    await db.execute(
        "INSERT INTO folders(id, name, uidvalidity, special_use, subscribed) VALUES (?, ?, ?, ?, ?)",
        (await _new_folder_id(db), name, await _new_uidvalidity(db), special_use, int(subscribed)),
    )


async def _one(db: Tx, sql: str, params: Iterable[object] = ()) -> int:
    async with db.execute(sql, tuple(params)) as cursor:
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0] or 0)


async def _new_uidvalidity(db: Tx) -> int:
    """Never one given out before, also to a folder since deleted (clients cache by it)."""
    fresh = max(int(time.time()), await _one(db, "SELECT latest FROM uidvalidity") + 1)
    await db.execute("UPDATE uidvalidity SET latest = ?", (fresh,))
    return fresh


async def _new_folder_id(db: Tx) -> int:
    """Never one given out before: SQLite would hand a deleted folder's id to the next one."""
    latest = await _one(db, "SELECT latest FROM folder_ids")
    fresh = max(latest, await _one(db, "SELECT max(id) FROM folders")) + 1
    await db.execute("UPDATE folder_ids SET latest = ?", (fresh,))
    return fresh


async def delete_folder(db: Tx, folder_id: int) -> None:
    await db.execute("DELETE FROM folders WHERE id = ?", (folder_id,))


async def rename_folder(db: Tx, folder_id: int, name: str) -> None:
    await db.execute("UPDATE folders SET name = ? WHERE id = ?", (name, folder_id))


async def set_subscribed(db: Tx, folder_id: int, subscribed: bool) -> None:
    await db.execute("UPDATE folders SET subscribed = ? WHERE id = ?", (int(subscribed), folder_id))


async def claim_recent(db: Tx, folder_id: int, through: int) -> int | None:
    """Move the folder's \\Recent floor past ``through``; returns the floor before (None: no folder)."""
    async with db.execute("SELECT first_recent FROM folders WHERE id = ?", (folder_id,)) as cursor:
        row = await cursor.fetchone()
    if row is None:
        return None
    floor = int(row[0])
    await db.execute("UPDATE folders SET first_recent = ? WHERE id = ?", (max(floor, through + 1), folder_id))
    return floor


async def bump_modseq(db: Tx, folder_id: int) -> int:
    """The folder's next modseq, for the change being written."""
    await db.execute("UPDATE folders SET modseq = modseq + 1 WHERE id = ?", (folder_id,))
    return await _one(db, "SELECT modseq FROM folders WHERE id = ?", (folder_id,))


async def locked_mail(db: Tx, folder_id: int, uids: Iterable[int]) -> list[MailRow]:
    """Index entries of these UIDs, read inside a write transaction (so they cannot be stale)."""
    wanted = sorted(set(uids))
    rows: list[MailRow] = []
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start:start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        async with db.execute(_MAIL + f" WHERE folder_id = ? AND uid IN ({marks}) ORDER BY uid",
                              (folder_id, *chunk)) as cursor:
            rows.extend(_mails(list(await cursor.fetchall())))
    return rows


async def add_mail(db: Tx, folder_id: int, files: list[NewMail]) -> list[int]:
    """Index files under one new modseq with a block of consecutive UIDs; returns the UIDs. A file
    that is the copy of a stored message (``message_ref``) is linked to it, which counts as filed."""
    modseq = await bump_modseq(db, folder_id)
    first = await _one(db, "SELECT uidnext FROM folders WHERE id = ?", (folder_id,))
    await db.execute("UPDATE folders SET uidnext = uidnext + ? WHERE id = ?", (len(files), folder_id))
    await db.executemany(
        "INSERT INTO mail(folder_id, uid, name, subdir, size, internaldate, flags, modseq, message_ref,"
        " headers, envelope, bodystructure) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(folder_id, first + n, f.name, f.subdir, f.size, f.internaldate, flags_text(f.flags), modseq,
          f.message_ref, f.cached.headers, f.cached.envelope, f.cached.bodystructure)
         for n, f in enumerate(files)],
    )
    await mark_filed(db, [f.message_ref for f in files if f.message_ref is not None])
    return list(range(first, first + len(files)))


async def copy_cache(db: Tx, source_id: int, target_id: int, pairs: list[tuple[int, int]]) -> None:
    """What is cached of moved messages, (source UID, target UID) each, to their new entries."""
    cached = ", ".join(f"{c} = (SELECT {c} FROM mail AS s WHERE s.folder_id = ? AND s.uid = ?)"
                       for c in CACHED)
    await db.executemany(
        f"UPDATE mail SET {cached} WHERE folder_id = ? AND uid = ?",
        [(*(source_id, old) * len(CACHED), target_id, new) for old, new in pairs],
    )


async def link_mail(db: Tx, folder_id: int, uid: int, message_ref: int) -> None:
    """An indexed file is the copy of a stored message, which counts as filed."""
    await db.execute("UPDATE mail SET message_ref = ? WHERE folder_id = ? AND uid = ?",
                     (message_ref, folder_id, uid))
    await mark_filed(db, [message_ref])


async def mark_filed(db: Tx, message_refs: list[int]) -> None:
    """The stored messages have their copies in their folders."""
    if message_refs:
        await db.executemany("UPDATE messages SET filed = 1 WHERE id = ?", [(ref,) for ref in message_refs])


async def write_flags(
    db: Tx, folder_id: int, modseq: int, changes: dict[int, tuple[frozenset[str], str]],
) -> None:
    """New flags and subdir (uid -> (flags, subdir)) under ``modseq``."""
    await db.executemany(
        "UPDATE mail SET flags = ?, subdir = ?, modseq = ? WHERE folder_id = ? AND uid = ?",
        [(flags_text(flags), subdir, modseq, folder_id, uid) for uid, (flags, subdir) in changes.items()],
    )


async def forget_mail(db: Tx, folder_id: int, uids: list[int]) -> None:
    """Drop index entries, remembering their UIDs as expunged (QRESYNC) under one new modseq."""
    modseq = await bump_modseq(db, folder_id)
    await db.executemany("DELETE FROM mail WHERE folder_id = ? AND uid = ?", [(folder_id, u) for u in uids])
    await db.executemany(
        "INSERT INTO expunged(folder_id, uid, modseq) VALUES (?, ?, ?)"
        " ON CONFLICT(folder_id, uid) DO UPDATE SET modseq = excluded.modseq",
        [(folder_id, u, modseq) for u in uids],
    )


async def save_structures(db: Tx, folder_id: int, computed: dict[int, Structures]) -> None:
    """Cache what FETCH computed; a value left None keeps what is cached."""
    await db.executemany(
        "UPDATE mail SET envelope = coalesce(?, envelope), bodystructure = coalesce(?, bodystructure),"
        " headers = coalesce(?, headers) WHERE folder_id = ? AND uid = ?",
        [(s.envelope, s.bodystructure, s.headers, folder_id, uid) for uid, s in computed.items()],
    )
