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
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.inbox import Claim
from pizzamail.store.mailwriter import add_received, add_task, received_row
from pizzamail.store.threads import message_exists, thread_for_references


@dataclass(frozen=True, kw_only=True)
class Stored:
    thread_id: int | None
    run_id: int | None
    duplicate: bool = False
    noted: bool = False
    """recorded in its thread without a run: no agent was addressed in To (only in Cc)"""
    stop: bool = False
    """an approver's ``stop``: recorded, never a task"""


async def store_task(
    store: Store, blobs: BlobStore, raw: bytes, parsed: ParsedMail, *, agent: str, domain: str,
    runs: bool = True, claim: Claim | None = None,
) -> Stored:
    """Commit a task mail for ``agent`` (its address) to run. A Message-ID seen before (a client
    retrying) is not stored twice. Without ``runs`` (the agent was only in Cc) the mail is recorded in
    its thread, for later runs' history, and starts none. ``claim``: the mail's record in the owner's
    own mailbox, made in the same transaction (a mail taken before is a duplicate too)."""
    message_id = parsed.message_id or new_message_id(domain)
    thread_id = await thread_for_references(store, parsed.thread_refs())
    blob = await blobs.save(raw)
    async with store.write() as db:
        if (claim is not None and not await claim(db)) or await message_exists(db, message_id):
            return Stored(thread_id=None, run_id=None, duplicate=True)
        row = received_row(parsed, blob, message_id=message_id, kind="task", sender=parsed.sender or "",
                           body=task_text(parsed, follow_up=thread_id is not None))
        if not runs:
            noted = await add_received(db, row, thread_id=thread_id, agent=agent, event="mail.copied",
                                       size=len(raw))
            return Stored(thread_id=noted, run_id=None, noted=True)
        task = await add_task(db, row, thread_id=thread_id, agent=agent, event="task.received",
                              size=len(raw))
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
