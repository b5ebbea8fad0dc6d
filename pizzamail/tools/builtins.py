"""Built-in tools, offered to every run through the same seam as MCP servers.

``post_progress`` (a progress mail in the thread), ``read_attachment`` (the thread's attachments),
``write_file`` (a file in the run's workspace, attached to the reply), ``draft_email`` (mail to
someone else: always held for approval), ``remember``/``recall``/``forget`` (notes kept across
threads, mirrored into ``memory.md``: :mod:`pizzamail.tools.memory`), ``schedule_task`` (a
recurring task in this thread: always held, see :mod:`pizzamail.tools.schedule`).

A run may be resumed after a crash and repeat a call whose step was not recorded yet, so every
built-in is safe to repeat: a progress mail and a note are keyed by their run and text, a file
is simply written again, and a forgotten note stays forgotten.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pizzamail.composer import Composer
from pizzamail.mail.parse import parse_mail
from pizzamail.providers.types import ToolSpec
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailwriter import add_mail, message_row
from pizzamail.store.threads import thread_messages
from pizzamail.tools import Offer, Offered, RunScope, ToolResult
from pizzamail.tools.attachments import Attachment, attachment_text, attachments_of
from pizzamail.tools.documents import Part
from pizzamail.tools.memory import Forget, Recall, Remember
from pizzamail.tools.schedule import ScheduleTask

log = logging.getLogger("pizzamail.tools")

_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _key(*parts: object) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:24]


@dataclass(kw_only=True)
class Builtins:
    """The built-in tool source; one per service."""

    store: Store
    blobs: BlobStore
    composer: Composer
    sender: str
    """the agent's address, the From of progress mails"""
    memory_file: Path | None = None
    """``memory.md``: the memory as a file the user can read"""
    max_file_bytes: int = 10 * 1024 * 1024
    max_read_chars: int = 16_000
    """the most text one read_attachment call returns (below the registry's own cut, so the note
    saying how to read the rest survives)"""

    def offer(self, scope: RunScope) -> Offer:
        return Offer(tools=[
            Offered(tool=PostProgress(owner=self, scope=scope), policy="auto"),
            Offered(tool=ReadAttachment(owner=self, scope=scope), policy="auto"),
            Offered(tool=WriteFile(owner=self, scope=scope), policy="auto"),
            Offered(tool=DraftEmail(), policy="ask", never_auto=True),
            Offered(tool=Remember(store=self.store, memory_file=self.memory_file, scope=scope),
                    policy="auto"),
            Offered(tool=Recall(store=self.store), policy="auto"),
            Offered(tool=Forget(store=self.store, memory_file=self.memory_file), policy="auto"),
            # idempotent: the call is an upsert, so one a crash left unknown is simply made again
            Offered(tool=ScheduleTask(store=self.store, thread_id=scope.thread_id,
                                      agent_tz=self.composer.config.agent.timezone),
                    policy="ask", never_auto=True, idempotent=True),
        ])


@dataclass(frozen=True, kw_only=True)
class PostProgress:
    owner: Builtins
    scope: RunScope
    spec = ToolSpec(name="post_progress", description=(
        "Send the user a short progress note in this thread while you keep working. Use it for long"
        " tasks only, at most a few times."),
        parameters=_schema({"text": _text("the note, in Markdown, one to three sentences")}, ["text"]))

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        text = str(arguments.get("text", "")).strip()
        if not text:
            return ToolResult(text="the note is empty; nothing was sent", is_error=True)
        o, scope = self.owner, self.scope
        message_id = f"progress.{scope.run_id}.{_key(text)}@{o.composer.config.domain}"
        mail = o.composer.progress(scope.mail, text, message_id=message_id)
        blob = await o.blobs.save(mail.as_bytes())
        async with o.store.write() as db:
            sender = scope.agent.address if scope.agent else o.sender
            await add_mail(db, scope.thread_id, message_row(mail, blob, kind="progress", sender=sender,
                                                            run_id=scope.run_id), once=True)
        return ToolResult(text="the progress note was sent")


@dataclass(frozen=True, kw_only=True)
class ReadAttachment:
    owner: Builtins
    scope: RunScope
    spec = ToolSpec(name="read_attachment", description=(
        "List the files attached to the user's mails in this thread, or read one as text: text, CSV,"
        " JSON, HTML, PDF, Word (.docx), Excel (.xlsx) and attached mails. Call it without arguments"
        " to list them. Long files come a part at a time; the text says how to read the rest."),
        parameters=_schema({
            "name": _text("the attachment's file name or its number in the list"),
            "pages": _text('PDF only: the pages to read, e.g. "2-5", "3" or "4-"'),
            "sheet": _text("spreadsheets only: the sheet's name (default: the first)"),
            "rows": _text('spreadsheets and CSV only: the rows to read, e.g. "1-50" or "200-"'),
            "offset": {"type": "integer", "description": "other files: the character to start at"},
        }, []))

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        found = await self._attachments()
        wanted = str(arguments.get("name") or "").strip()
        if not wanted:
            if not found:
                return ToolResult(text="the mails in this thread have no attachments")
            return ToolResult(text="\n".join(a.line() for a in found))
        match = next((a for a in found if wanted in (a.filename, str(a.index))), None)
        if match is None:
            names = ", ".join(a.filename for a in found) or "none"
            return ToolResult(text=f"no attachment named {wanted!r}; attachments: {names}", is_error=True)
        offset = arguments.get("offset") or 0
        if not isinstance(offset, int):
            return ToolResult(text="offset must be a whole number", is_error=True)
        part = Part(pages=str(arguments.get("pages") or ""), sheet=str(arguments.get("sheet") or ""),
                    rows=str(arguments.get("rows") or ""), offset=offset)
        # parsing a large PDF or workbook takes a while: off the event loop
        reading = await asyncio.to_thread(attachment_text, match, part, limit=self.owner.max_read_chars)
        return ToolResult(text=reading.text, is_error=reading.is_error)

    async def _attachments(self) -> list[Attachment]:
        found: list[Attachment] = []
        for message in await thread_messages(self.owner.store, self.scope.thread_id):
            if message.direction != "in":
                continue
            raw = await self.owner.blobs.load(message.blob)
            found += attachments_of(parse_mail(raw), subject=message.subject, start=len(found) + 1)
        return found


@dataclass(frozen=True, kw_only=True)
class WriteFile:
    owner: Builtins
    scope: RunScope
    spec = ToolSpec(name="write_file", description=(
        "Write a file; it is attached to your reply. Give either content (text) or content_base64"
        " (any bytes, e.g. an image or a spreadsheet). Writing the same name again replaces it."),
        parameters=_schema({"name": _text("a plain file name such as report.md (no folders)"),
                            "content": _text("the file's text"),
                            "content_base64": _text("the file's bytes in base64, instead of content")},
                           ["name"]))

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        name = str(arguments.get("name", ""))
        if not _FILE_NAME.match(name):
            return ToolResult(is_error=True, text=(
                f"{name!r} is not a plain file name: use letters, digits, '.', '_' and '-', no folders,"
                " not starting with a dot"))
        data = _content(arguments, self.owner.max_file_bytes)
        if isinstance(data, ToolResult):
            return data
        workspace = self.scope.workspace
        workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = workspace / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, workspace / name)
        return ToolResult(text=f"wrote {name} ({len(data)} bytes); it will be attached to your reply")


def _content(arguments: dict[str, Any], limit: int) -> bytes | ToolResult:
    """The bytes a write_file call asks for, or the error result that says what is wrong."""
    text, encoded = arguments.get("content"), arguments.get("content_base64")
    if (text is None) == (encoded is None):
        return ToolResult(text="give exactly one of content (text) and content_base64", is_error=True)
    if not isinstance(text if encoded is None else encoded, str):
        return ToolResult(text="content and content_base64 must be strings", is_error=True)
    if encoded is not None and len(encoded) > limit * 4 // 3 + 4:  # no decoding of what is too long
        return ToolResult(is_error=True, text=f"the file is over the limit of {limit} bytes")
    try:
        data = str(text).encode("utf-8") if encoded is None else base64.b64decode("".join(encoded.split()),
                                                                                    validate=True)
    except binascii.Error as exc:
        return ToolResult(text=f"content_base64 is not valid base64 ({exc})", is_error=True)
    if len(data) > limit:
        return ToolResult(is_error=True, text=f"the file is {len(data)} bytes; the limit is {limit}")
    return data


@dataclass(frozen=True, kw_only=True)
class DraftEmail:
    """Mail to someone other than the user. Its policy is always ``ask``: this tool is only ever
    held, and the approval side sends (or files the draft) once the user agrees."""

    spec = ToolSpec(name="draft_email", description=(
        "Prepare an email to someone other than the user. It is not sent until the user approves it."),
        parameters=_schema({"to": _text("recipient address(es), comma-separated"),
                            "cc": _text("optional Cc address(es)"), "subject": _text("the subject"),
                            "body": _text("the text of the mail")}, ["to", "subject", "body"]))

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        # never reached through the runner: the policy gate holds every call
        return ToolResult(text="sending mail needs the user's approval", is_error=True)
