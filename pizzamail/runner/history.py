"""What the model sees before a run's own steps: the system prompt and the thread so far.

The files attached to the user's mails go with their turns: images as pictures, documents (PDF,
DOCX, XLSX, CSV, HTML, text) as the start of their text, bounded, with a note on how
``read_attachment`` reads the rest. Both are made each time a run starts, in a worker thread (a
small mail is parsed in the event loop first, and one without files needs nothing more): the
thread's mails are the record, nothing about them is checkpointed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from pizzamail.composer import MailContext
from pizzamail.config import Agent
from pizzamail.mail.parse import ParsedMail, parse_mail, parsed_at_once
from pizzamail.providers.pictures import MAX_PICTURES, is_image, picture
from pizzamail.providers.types import Message, Picture
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.runs import Run
from pizzamail.store.threads import Message as StoredMessage
from pizzamail.store.threads import get_message, thread_messages, thread_subject
from pizzamail.tools.attachments import attachment_text, attachments_of
from pizzamail.tools.documents import Part

#: characters of one attached document put into its mail's turn (the rest: read_attachment)
FILE_CHARS = 8000
#: characters of all the documents of one mail put into its turn
DOCUMENT_CHARS = 16000

#: bot mails that are the model's own words; errors and notices are ours, not the model's
_SPOKEN_BY_MODEL = frozenset({"reply"})
#: the user's mails that steer the runner (``stop``): never the model's to read
_CONTROL = frozenset({"stop"})


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """A run's thread as loaded at its start."""

    subject: str
    trigger: StoredMessage | None
    """the message that asked for this run (None for runs not started by a mail)"""
    earlier: list[StoredMessage]
    """the thread's messages before the trigger, oldest first"""
    agent: Agent | None = None
    """the agent the run is of: its mail comes From it (None: the main agent)"""

    def mail(self, run: Run) -> MailContext:
        """Threading for the mail that answers the trigger (or the thread's latest message)."""
        parent = self.trigger or (self.earlier[-1] if self.earlier else None)
        refs = parent.refs if parent and parent.refs else [m.message_id for m in self.earlier
                                                           if m is not parent]
        return MailContext(thread_id=run.thread_id, run_id=run.id, subject=self.subject,
                           in_reply_to=parent.message_id if parent else None, references=refs,
                           agent=self.agent)


async def load_context(store: Store, run: Run, agent: Agent) -> RunContext:
    subject = await thread_subject(store, run.thread_id)
    messages = await thread_messages(store, run.thread_id)
    # the task is one of the thread's messages (one read fewer on every run's way to the model)
    trigger = next((m for m in messages if m.id == run.message_id), None)
    if trigger is None and run.message_id is not None:
        trigger = await get_message(store, run.message_id)
    if trigger is not None:
        messages = [m for m in messages if m.id < trigger.id or _answers_earlier_run(m, run)]
    return RunContext(subject=subject, trigger=trigger, earlier=messages, agent=agent)


def _answers_earlier_run(message: StoredMessage, run: Run) -> bool:
    """A mail of an earlier run written after this run's task came: a follow-up queued behind a
    working run sees what that run answered."""
    return message.direction == "out" and message.run_id is not None and message.run_id < run.id


async def history(ctx: RunContext, *, limit: int, blobs: BlobStore) -> list[Message]:
    """The thread in order: the user's mails as user turns (with their images), the bot's replies
    as assistant turns."""
    shown = [m for m in ctx.earlier
             if (m.direction == "in" and m.kind not in _CONTROL) or m.kind in _SPOKEN_BY_MODEL][-limit:]
    if ctx.trigger is not None:
        shown.append(ctx.trigger)
    return [await _turn(m, blobs) for m in shown]


async def _turn(message: StoredMessage, blobs: BlobStore) -> Message:
    if message.direction != "in":
        return Message(role="assistant", content=message.body)
    turn = Message(role="user", content=message.body)
    raw = await blobs.load(message.blob)
    # most mails are small and carry no files: parsed here, they need no trip to a worker thread
    # (which, parsing under the GIL, would only take the event loop's turns)
    parsed = parse_mail(raw) if parsed_at_once(raw) else None
    if parsed is not None and not parsed.files:
        return turn
    found = await asyncio.to_thread(_attached, raw if parsed is None else parsed, message.subject)
    if not found:
        return turn
    notes = [p for p in found if isinstance(p, str)]
    return replace(turn, content="\n\n".join([turn.content, *notes]),
                   pictures=tuple(p for p in found if isinstance(p, Picture)))


def _attached(mail: ParsedMail | bytes, subject: str) -> list[Picture | str]:
    """The mail's images, fitted (or the line saying why one cannot be shown), and the text of its
    other files, each bounded and all together too."""
    parsed = mail if isinstance(mail, ParsedMail) else parse_mail(mail)
    images = [f for f in parsed.files if is_image(f.filename or "", f.content_type)]
    found: list[Picture | str] = [picture(f.data, name=f.filename or "image", media_type=f.content_type)
                                  for f in images[:MAX_PICTURES]]
    if len(images) > MAX_PICTURES:
        found.append(f"[{len(images) - MAX_PICTURES} more images are attached; only {MAX_PICTURES}"
                     " are shown]")
    left = DOCUMENT_CHARS
    for attachment in attachments_of(parsed, subject=subject, start=1):
        if is_image(attachment.filename, attachment.content_type):
            continue
        label = f"{attachment.filename} ({attachment.content_type}, {len(attachment.data)} bytes)"
        if not attachment.readable:
            found.append(f"[attached: {label}]")
            continue
        if left <= 0:
            found.append(f"[attached: {label}; not shown here: read it with read_attachment]")
            continue
        reading = attachment_text(attachment, Part(), limit=min(FILE_CHARS, left))
        left -= len(reading.text)
        found.append(f"[attached: {attachment.filename}]\n{reading.text}")
    return found
