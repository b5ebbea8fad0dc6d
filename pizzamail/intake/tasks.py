"""Recording a task: the one path by which mail (or the CLI) becomes durable work.

The raw bytes go to the blob store (fsynced) and the message, its thread and a queued run are
committed in one transaction. Only after that may the SMTP server answer 250.
"""

from __future__ import annotations

import email.policy
import email.utils
import uuid
from dataclasses import dataclass
from email.message import EmailMessage

from pizzamail.mail.parse import ParsedMail, parse_mail
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.runs import create_run
from pizzamail.store.threads import (
    NewMessage,
    add_message,
    create_thread,
    log_event,
    message_exists,
    thread_for_references,
)


@dataclass(frozen=True, kw_only=True)
class Stored:
    thread_id: int | None
    run_id: int | None
    duplicate: bool = False


async def store_task(
    store: Store, blobs: BlobStore, raw: bytes, parsed: ParsedMail, *, agent: str, domain: str
) -> Stored:
    """Commit a task mail. A Message-ID seen before (a client retrying) is not stored twice."""
    message_id = parsed.message_id or f"{uuid.uuid4().hex}@{domain}"
    thread_id = await thread_for_references(store, parsed.thread_refs())
    digest = blobs.put(raw)
    async with store.write() as db:
        if await message_exists(db, message_id):
            return Stored(thread_id=None, run_id=None, duplicate=True)
        if thread_id is None:
            thread_id = await create_thread(db, subject=parsed.subject or "(no subject)", agent=agent)
        row = await add_message(db, thread_id, NewMessage(
            message_id=message_id, in_reply_to=parsed.in_reply_to, refs=parsed.references,
            direction="in", kind="task", sender=parsed.sender or "", subject=parsed.subject,
            body=task_text(parsed), blob=digest, size=len(raw), flags="\\Seen",
        ))
        run_id = await create_run(db, thread_id, row)
        await log_event(db, "task.received", thread_id=thread_id, run_id=run_id, size=len(raw))
    return Stored(thread_id=thread_id, run_id=run_id)


def task_text(parsed: ParsedMail) -> str:
    """What the model is given: the body, or the subject when the body is empty."""
    text = parsed.body or parsed.subject
    if parsed.attachments:
        text += "\n\n[attached: " + ", ".join(parsed.attachments) + "]"
    return text


def cli_task_mail(text: str, *, sender: str, agent: str, domain: str) -> bytes:
    """The mail a `pizzamail task` would have been, so the thread reads the same in any client."""
    msg = EmailMessage(policy=email.policy.SMTP)
    first_line = text.strip().splitlines()[0] if text.strip() else "(no subject)"
    msg["From"] = sender
    msg["To"] = agent
    msg["Subject"] = first_line[:78]
    msg["Date"] = email.utils.formatdate(localtime=True)
    msg["Message-ID"] = email.utils.make_msgid(domain=domain)
    msg["X-Pizzamail-Source"] = "cli"
    msg.set_content(text)
    return msg.as_bytes()


async def submit_text(
    store: Store, blobs: BlobStore, text: str, *, sender: str, agent: str, domain: str
) -> Stored:
    raw = cli_task_mail(text, sender=sender, agent=agent, domain=domain)
    return await store_task(store, blobs, raw, parse_mail(raw), agent=agent, domain=domain)
