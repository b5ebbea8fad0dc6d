"""What a watch remembers in the store: where it is in the remote folder, and what it handled.

A mail is handled in one transaction: its ``watched_mail`` row (unique per watch, UIDVALIDITY and
UID), the task :func:`~pizzamail.triggers.post.post_task` records, and the watch's progress. After a
crash a mail is either handled in full or not at all (and then handled at the next connect); the
unique row means it can never become a second task.
"""

from __future__ import annotations

import logging

from pizzamail.account.session import FolderStatus
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.watches import Handled, add_handled, find_watch, record_run, start_at, watch_thread
from pizzamail.triggers.post import Posted, TriggerMail, post_task

log = logging.getLogger("pizzamail.triggers")


async def begin(store: Store, name: str, status: FolderStatus, *, mailbox: str) -> int:
    """At each connect: the last UID handled, deciding the start point on first use or a new UIDVALIDITY.

    A first connect starts at UIDNEXT, so the mail already in the folder is not turned into tasks;
    so does a watch pointed at another ``mailbox`` (``user@host:port/folder``), whose UIDs are others.
    """
    saved = await find_watch(store, name)
    known = saved is not None and saved.uidvalidity is not None and saved.mailbox == mailbox
    if saved is not None and known and saved.uidvalidity == status.uidvalidity:
        return saved.last_uid
    start = status.uidnext - 1
    if saved is None or not known:
        note = (f"started at UID {status.uidnext} of {mailbox}: the {status.exists} mail(s) already in the"
                " folder are not turned into tasks")
        log.info("watch %s: %s", name, note)
    else:
        note = (f"UIDVALIDITY changed from {saved.uidvalidity} to {status.uidvalidity} (the folder was"
                f" recreated or renumbered): restarted at UID {status.uidnext};"
                " mail already there is left alone")
        log.warning("watch %s: %s", name, note)
    await start_at(store, name, mailbox=mailbox, uidvalidity=status.uidvalidity, uid=start, note=note)
    return start


async def record(
    store: Store, blobs: BlobStore, handled: Handled, mail: TriggerMail, *, one_thread: bool
) -> Posted | None:
    """The mail's task, unless this mail was handled before (then None). Advances ``last_uid``."""
    async with store.write() as db:
        if not await add_handled(db, handled):
            return None
        thread_id = await watch_thread(db, handled.watch) if one_thread else None
        posted = await post_task(db, blobs, mail, thread_id=thread_id)
        kept = posted.thread_id if one_thread else None
        await record_run(db, handled, run_id=posted.run_id, thread_id=kept)
    return posted
