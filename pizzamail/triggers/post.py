"""A trigger's task mail: recorded like intake records mail, optionally continuing a thread."""

from __future__ import annotations

import email.policy
import email.utils
from dataclasses import dataclass
from email.message import EmailMessage

import aiosqlite

from pizzamail.mail.parse import parse_bytes
from pizzamail.store.blobs import BlobStore
from pizzamail.store.runs import create_run
from pizzamail.store.threads import NewMessage, add_message, create_thread, log_event


@dataclass(frozen=True, kw_only=True)
class AttachedFile:
    """A file a task mail carries after its text, for the mail client and ``read_attachment``."""

    filename: str
    content_type: str
    """``message/rfc822`` attaches ``data`` as a mail of its own (a forwarded message to mail clients)"""
    data: bytes


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


@dataclass(frozen=True, kw_only=True)
class Posted:
    thread_id: int
    run_id: int
    message_id: str


async def _chain(db: aiosqlite.Connection, thread_id: int) -> tuple[str | None, list[str]]:
    """In-Reply-To and References continuing a thread after its latest message.

    Ids are stored without angle brackets, as everywhere in the store (rows written before that was
    so here still have them: they are stripped)."""
    async with db.execute(
        "SELECT message_id, refs FROM messages WHERE thread_id = ? ORDER BY id DESC LIMIT 1", (thread_id,)
    ) as cursor:
        row = await cursor.fetchone()
    if row is None:
        return None, []
    refs = [r.strip("<>") for r in str(row["refs"]).split() if r][-20:]  # bounded, as mail clients do
    parent = str(row["message_id"]).strip("<>")
    return parent, [*refs, parent]


def _raw(mail: TriggerMail, message_id: str, in_reply_to: str | None, refs: list[str]) -> bytes:
    msg = EmailMessage(policy=email.policy.SMTP)
    msg["From"] = mail.sender
    msg["To"] = mail.agent
    msg["Subject"] = mail.subject
    msg["Date"] = email.utils.formatdate(localtime=True)
    msg["Message-ID"] = f"<{message_id}>"
    if in_reply_to:
        msg["In-Reply-To"] = f"<{in_reply_to}>"
        msg["References"] = " ".join(f"<{r}>" for r in refs)
    msg["X-Pizzamail-Source"] = mail.source
    msg.set_content(mail.text)
    for file in mail.attachments:  # the text stays the first part: the stored body and what clients show
        _attach(msg, file)
    return msg.as_bytes()


def _attach(msg: EmailMessage, file: AttachedFile) -> None:
    if file.content_type == "message/rfc822":
        inner = parse_bytes(file.data)
        msg.add_attachment(inner, filename=file.filename)
        return
    maintype, _, subtype = file.content_type.partition("/")
    if maintype in ("message", "multipart") or not subtype:  # as bytes, only the other types can be sent
        maintype, subtype = "application", "octet-stream"
    msg.add_attachment(file.data, maintype=maintype, subtype=subtype, filename=file.filename)


async def post_task(
    db: aiosqlite.Connection, blobs: BlobStore, mail: TriggerMail, *, thread_id: int | None
) -> Posted:
    """Inside the caller's transaction: the task message (in ``thread_id`` or a new thread) and its run."""
    message_id = email.utils.make_msgid(domain=mail.domain)[1:-1]  # stored without <>
    in_reply_to, refs = await _chain(db, thread_id) if thread_id is not None else (None, [])
    raw = _raw(mail, message_id, in_reply_to, refs)
    digest = blobs.put(raw)
    if thread_id is None:
        thread_id = await create_thread(db, subject=mail.subject, agent=mail.agent)
    row = await add_message(db, thread_id, NewMessage(
        message_id=message_id, in_reply_to=in_reply_to, refs=refs, direction="in", kind="task",
        sender=mail.sender, subject=mail.subject, body=mail.text, blob=digest, size=len(raw), flags="\\Seen",
    ))
    run_id = await create_run(db, thread_id, row, source=mail.source)
    await log_event(db, "task.triggered", thread_id=thread_id, run_id=run_id, source=mail.source)
    return Posted(thread_id=thread_id, run_id=run_id, message_id=message_id)


async def post_notice(
    db: aiosqlite.Connection, blobs: BlobStore, mail: TriggerMail, *, thread_id: int
) -> None:
    """A short mail from the agent into a thread that starts no run (e.g. an occurrence not replayed)."""
    message_id = email.utils.make_msgid(domain=mail.domain)[1:-1]  # stored without <>
    in_reply_to, refs = await _chain(db, thread_id)
    raw = _raw(mail, message_id, in_reply_to, refs)
    await add_message(db, thread_id, NewMessage(
        message_id=message_id, in_reply_to=in_reply_to, refs=refs, direction="out", kind="notice",
        sender=mail.sender, subject=mail.subject, body=mail.text, blob=blobs.put(raw), size=len(raw),
    ))
