"""Writing mail: the one way a message gets into a thread, and the one way a task is received.

Both write inside the caller's transaction (``db``), so a mail commits together with whatever it
belongs to (a run's end, a decision, a trigger's bookkeeping). Its bytes are in the blob store
first (:meth:`~pizzamail.store.blobs.BlobStore.save`, written and fsynced before the transaction
that names them commits), so a committed row never points at a missing file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pizzamail.mail.parse import ParsedMail
from pizzamail.store import Tx
from pizzamail.store.blobs import Blob
from pizzamail.store.runs import Run, create_run
from pizzamail.store.threads import NewMessage, add_message, create_thread, log_event, message_exists


class Threaded(Protocol):
    """What the store keeps of a mail besides its bytes (a composed reply, a built mail)."""

    @property
    def message_id(self) -> str: ...
    @property
    def in_reply_to(self) -> str | None: ...
    @property
    def references(self) -> list[str]: ...
    @property
    def subject(self) -> str: ...
    @property
    def body(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class Task:
    thread_id: int
    run_id: int
    message_row: int


def message_row(mail: Threaded, blob: Blob, *, kind: str, sender: str, direction: str = "out",
                run_id: int | None = None, folder: str | None = None, flags: str = "") -> NewMessage:
    """The row of a mail pizzamail wrote (or, ``direction="in"``, wrote for the user: a trigger's task)."""
    return NewMessage(message_id=mail.message_id, in_reply_to=mail.in_reply_to, refs=mail.references,
                      direction=direction, kind=kind, sender=sender, subject=mail.subject, body=mail.body,
                      blob=blob.digest, size=blob.size, folder=folder, flags=flags, run_id=run_id)


def received_row(parsed: ParsedMail, blob: Blob, *, message_id: str, kind: str, sender: str,
                 body: str, folder: str | None = None) -> NewMessage:
    """The row of a mail that came in by SMTP (read, as the user wrote it themselves)."""
    return NewMessage(message_id=message_id, in_reply_to=parsed.in_reply_to, refs=parsed.references,
                      direction="in", kind=kind, sender=sender, subject=parsed.subject, body=body,
                      blob=blob.digest, size=blob.size, flags="\\Seen", folder=folder)


async def add_mail(db: Tx, thread_id: int, row: NewMessage, *, once: bool = False
                   ) -> int | None:
    """The mail in its thread. With ``once``, a Message-ID stored already (a resumed run repeating
    itself) is not stored again: None."""
    if once and await message_exists(db, row.message_id):
        return None
    return await add_message(db, thread_id, row)


async def add_task(db: Tx, row: NewMessage, *, thread_id: int | None, agent: str,
                   event: str, source: str | None = None, model: str | None = None,
                   parent: Run | None = None, folder: str = "INBOX", **data: Any) -> Task:
    """A task received: its mail (in ``thread_id``, or a new thread in ``folder`` named after it), a
    queued run of ``agent`` (its address) for it and the ``event`` in the log. ``parent``: the run
    whose ``delegate`` call gave this task."""
    new_thread = thread_id is None
    if thread_id is None:
        thread_id = await create_thread(db, subject=row.subject or "(no subject)", agent=agent,
                                        folder=folder, status="queued")
    message = await add_message(db, thread_id, row, thread_folder=folder if new_thread else None)
    run_id = await create_run(db, thread_id, message, source=source, agent=agent, model=model,
                              parent=parent, thread_queued=new_thread)
    await log_event(db, event, thread_id=thread_id, run_id=run_id, **data)
    return Task(thread_id=thread_id, run_id=run_id, message_row=message)


async def add_received(db: Tx, row: NewMessage, *, thread_id: int | None, agent: str,
                       event: str, folder: str = "INBOX", **data: Any) -> int:
    """A received mail that starts no run (an agent only in Cc): in ``thread_id`` or a new thread
    (in ``folder``), so later runs there see it in their history. Returns the thread."""
    new_thread = thread_id is None
    if thread_id is None:
        thread_id = await create_thread(db, subject=row.subject or "(no subject)", agent=agent,
                                        folder=folder)
    await add_message(db, thread_id, row, thread_folder=folder if new_thread else None)
    await log_event(db, event, thread_id=thread_id, **data)
    return thread_id
