"""Recording a task: the one path by which mail (or the CLI) becomes durable work.

The raw bytes go to the blob store (fsynced) and the message, its thread and a queued run are
committed in one transaction. Only after that may the SMTP server answer 250.
"""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.mail.build import Outgoing, build_mail
from pizzamail.mail.ids import new_message_id
from pizzamail.mail.parse import ParsedMail, parse_mail
from pizzamail.mail.reply import user_words
from pizzamail.store import Store, Tx
from pizzamail.store.blobs import Blob, BlobStore
from pizzamail.store.inbox import Claim
from pizzamail.store.mailwriter import add_received, add_task, received_row
from pizzamail.store.threads import known


@dataclass(frozen=True, kw_only=True)
class Stored:
    thread_id: int | None
    run_id: int | None
    duplicate: bool = False
    noted: bool = False
    """recorded in its thread without a run: no agent was addressed in To (only in Cc)"""
    stop: bool = False
    """an approver's ``stop``: recorded, never a task"""


@dataclass(frozen=True, kw_only=True)
class Received:
    """A task mail to record (:func:`record_task`): for ``agent`` (its address) to run, or without
    ``runs`` (the agent was only in Cc) for its thread's history. ``claim``: the mail's record in
    the owner's own mailbox, made in the same transaction (a mail taken before is a duplicate)."""

    raw: bytes
    parsed: ParsedMail
    agent: str
    domain: str
    runs: bool = True
    claim: Claim | None = None


async def store_task(
    store: Store, blobs: BlobStore, raw: bytes, parsed: ParsedMail, *, agent: str, domain: str,
    runs: bool = True, claim: Claim | None = None,
) -> Stored:
    """Commit one task mail in a transaction of its own (see :func:`record_task`)."""
    mail = Received(raw=raw, parsed=parsed, agent=agent, domain=domain, runs=runs, claim=claim)
    blob = await blobs.save(raw)
    async with store.write(priority=True) as db:
        return await record_task(db, mail, blob)


async def record_task(db: Tx, mail: Received, blob: Blob) -> Stored:
    """A task mail, its bytes saved as ``blob``, in ``db``'s transaction. A Message-ID seen before
    (a client retrying) is not stored twice; a reply joins the thread of the mail it refers to."""
    parsed = mail.parsed
    message_id = parsed.message_id or new_message_id(mail.domain)
    if mail.claim is not None and not await mail.claim(db):
        return Stored(thread_id=None, run_id=None, duplicate=True)
    seen = await known(db, message_id, parsed.thread_refs())
    if seen.duplicate:
        return Stored(thread_id=None, run_id=None, duplicate=True)
    thread_id = seen.thread_id
    row = received_row(parsed, blob, message_id=message_id, kind="task", sender=parsed.sender or "",
                       body=task_text(parsed, follow_up=thread_id is not None), folder=seen.folder)
    if not mail.runs:
        noted = await add_received(db, row, thread_id=thread_id, agent=mail.agent, event="mail.copied",
                                   size=len(mail.raw))
        return Stored(thread_id=noted, run_id=None, noted=True)
    task = await add_task(db, row, thread_id=thread_id, agent=mail.agent, event="task.received",
                          size=len(mail.raw))
    return Stored(thread_id=task.thread_id, run_id=task.run_id)


def task_text(parsed: ParsedMail, *, follow_up: bool = False) -> str:
    """What the model is given: the body, or the subject when the body is empty. A follow-up in a
    thread gives only the user's own words: the mails it quotes are in the thread's history already
    (a thread's first mail keeps all of its text: what a forward carries is the task's content)."""
    text = (user_words(parsed.body) if follow_up else parsed.body) or parsed.subject
    if parsed.attachments:
        text += "\n\n[attached: " + ", ".join(parsed.attachments) + "]"
    return text


def cli_task_mail(text: str, *, sender: str, agent: str, domain: str) -> Outgoing:
    """The mail a `pizzamail task` would have been, so the thread reads the same in any client."""
    first_line = text.strip().splitlines()[0] if text.strip() else "(no subject)"
    return build_mail(sender=sender, to=agent, subject=first_line[:78], text=text,
                      message_id=new_message_id(domain), headers=(("X-Pizzamail-Source", "cli"),))


async def submit_text(
    store: Store, blobs: BlobStore, text: str, *, sender: str, agent: str, domain: str
) -> Stored:
    raw = cli_task_mail(text, sender=sender, agent=agent, domain=domain).as_bytes()
    return await store_task(store, blobs, raw, parse_mail(raw), agent=agent, domain=domain)
