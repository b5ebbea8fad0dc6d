"""A trigger's task mail: recorded like intake records mail, optionally continuing a thread."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pizzamail.mail.build import AttachedFile, Outgoing, build_mail
from pizzamail.mail.ids import new_message_id
from pizzamail.store import Tx
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailwriter import add_mail, add_task, message_row
from pizzamail.store.threads import thread_chain


@dataclass(frozen=True, kw_only=True)
class TriggerMail:
    subject: str
    text: str
    source: str
    """``schedule:NAME``, ``schedule:NAME (by hand)``, ``hook:NAME`` or ``watch:NAME``: the run's
    ``runs.source``, which decides its extra tool rules (:mod:`pizzamail.triggers.policy`); also in the
    X-Pizzamail-Source header and the event log, for people (that header is never read back)"""
    sender: str
    agent: str
    domain: str
    attachments: tuple[AttachedFile, ...] = ()
    """none: the task mail is its text alone, one text/plain part"""
    model: str = ""
    """the trigger's ``model`` for the run (empty: the agent's own)"""


@dataclass(frozen=True, kw_only=True)
class Posted:
    thread_id: int
    run_id: int
    message_id: str


async def _built(db: Tx, mail: TriggerMail, thread_id: int | None) -> Outgoing:
    """The mail, continuing ``thread_id``'s chain (read in the transaction that records it)."""
    in_reply_to, refs = await thread_chain(db, thread_id) if thread_id is not None else (None, [])
    return build_mail(sender=mail.sender, to=mail.agent, subject=mail.subject, text=mail.text,
                      message_id=new_message_id(mail.domain), in_reply_to=in_reply_to, references=refs,
                      headers=(("X-Pizzamail-Source", mail.source),), attachments=mail.attachments)


async def post_task(
    db: Tx, blobs: BlobStore, mail: TriggerMail, *, thread_id: int | None
) -> Posted:
    """Inside the caller's transaction: the task message (in ``thread_id`` or a new thread) and its run.
    Its bytes depend on the thread's latest message, so they are saved inside the transaction,
    still before it commits."""
    built = await _built(db, mail, thread_id)
    blob = await blobs.save(await asyncio.to_thread(built.as_bytes))
    row = message_row(built, blob, direction="in", kind="task", sender=mail.sender, flags="\\Seen")
    task = await add_task(db, row, thread_id=thread_id, agent=mail.agent, event="task.triggered",
                          source=mail.source, model=mail.model)
    return Posted(thread_id=task.thread_id, run_id=task.run_id, message_id=built.message_id)


async def post_notice(
    db: Tx, blobs: BlobStore, mail: TriggerMail, *, thread_id: int
) -> None:
    """A short mail from the agent into a thread that starts no run (e.g. an occurrence not replayed)."""
    built = await _built(db, mail, thread_id)
    blob = await blobs.save(await asyncio.to_thread(built.as_bytes))
    await add_mail(db, thread_id, message_row(built, blob, kind="notice", sender=mail.sender))
