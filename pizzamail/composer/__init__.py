"""Outgoing mail: the agent's replies, error reports and notices, rendered from ``templates/``.

Every mail the bot writes is text/plain with a sanitised text/html alternative, threaded with
``In-Reply-To``/``References`` under the message it answers, and tagged with ``X-Pizzamail-Thread``
and ``X-Pizzamail-Run`` so the Maildir alone is an audit trail.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.headerregistry import Address
from email.message import EmailMessage
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from pizzamail.composer.render import markdown_html, templates_dir
from pizzamail.config import Agent, Config
from pizzamail.errors import PizzamailError
from pizzamail.mail.build import Fields, Outgoing, alternative_bytes, mail_bytes, text_message
from pizzamail.mail.ids import new_message_id

_REPLY_PREFIX = re.compile(r"^\s*((re|aw|sv|antw)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
#: References keeps the thread root and this many of the latest ids (clients need no more)
MAX_REFERENCES = 20


@dataclass(frozen=True, kw_only=True)
class MailContext:
    """Where a bot mail goes in its thread. Message-IDs are stored without angle brackets."""

    thread_id: int
    run_id: int
    subject: str
    """the thread's subject (prefixes such as ``Re:`` are normalised)"""
    in_reply_to: str | None
    """the Message-ID of the mail being answered"""
    references: list[str] = field(default_factory=list)
    """the chain of Message-IDs before it (the parent's References); the parent is appended"""
    headers: tuple[tuple[str, str], ...] = ()
    """more headers for the mail (``X-Pizzamail-Decision`` after a decision: the audit trail)"""
    agent: Agent | None = None
    """the agent whose mail it is (From, the name in the text); None: the main agent"""


@dataclass(frozen=True, kw_only=True)
class Composed(Outgoing):
    """A rendered mail; its ``body`` is the Markdown text it says (without footer), which the store
    and the history keep."""

    kind: str
    """``reply``, ``error``, ``notice``, ``waiting`` (a call held for approval), ``progress`` or
    ``stopped``"""


def reply_subject(subject: str) -> str:
    rest = _REPLY_PREFIX.sub("", subject).strip()
    return f"Re: {rest or '(no subject)'}"


def reference_chain(ctx: MailContext) -> list[str]:
    chain = list(dict.fromkeys([*ctx.references, *([ctx.in_reply_to] if ctx.in_reply_to else [])]))
    if len(chain) > MAX_REFERENCES:
        chain = [chain[0], *chain[-(MAX_REFERENCES - 1):]]
    return chain


@dataclass(kw_only=True)
class Composer:
    config: Config
    templates: Traversable | None = None
    """a folder whose templates override the bundled ones of the same name (:func:`templates_dir`)"""
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    _env: jinja2.Environment = field(init=False, repr=False)

    def __post_init__(self) -> None:
        roots = [r for r in (self.templates, templates_dir()) if r is not None]
        self._env = jinja2.Environment(
            loader=jinja2.FunctionLoader(lambda name: _load(roots, name)),
            autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",),
                                                default_for_string=False),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def render(self, template: str, **context: Any) -> str:
        return self._env.get_template(template).render(**context)

    def system_prompt(self, *, subject: str, now: datetime, skills: Sequence[object] = (),
                      unavailable: Sequence[object] = (), agent: Agent | None = None,
                      memory: Sequence[object] = ()) -> str:
        """``skills`` have name, description, location; ``unavailable`` have server and reason;
        ``memory`` notes have id and text. ``agent`` (default: the main one) gives the name, the
        address and its own instructions."""
        agent = agent or self.config.main_agent
        return self.render("system.md.j2", agent_name=agent.name, address=agent.address,
                           instructions=agent.instructions.strip(),
                           owner=self.config.account.address, subject=subject,
                           date=now.strftime("%A %d %B %Y"), time=now.strftime("%H:%M %Z"),
                           skills=skills, unavailable=unavailable, memory=memory).strip()

    def reply(self, ctx: MailContext, markdown: str, *, notes: Sequence[str] = (),
              files: Sequence[Path] = (), footer: str = "") -> Composed:
        """The agent's answer; ``markdown`` is the model's final text. ``notes`` are our short
        notices under it (an MCP server that was down, a limit that stopped the run, the offline
        model); ``files`` travel as attachments; ``footer`` (the run's usage) goes in the signature."""
        body = markdown.strip()
        if notes:
            body += "\n\n" + self.render("notes.md.j2", notes=notes).strip()
        return self._compose("reply", ctx, body, files=files, footer=footer)

    def progress(self, ctx: MailContext, markdown: str, *, message_id: str) -> Composed:
        """A progress note during a run; ``message_id`` is fixed by the caller so a resumed run
        that posts the same note again is recognised."""
        return self._compose("progress", ctx, markdown.strip(), message_id=message_id)

    def error(self, ctx: MailContext, error: PizzamailError) -> Composed:
        """A run that failed: what went wrong and how to fix it."""
        body = self.render("error.md.j2", text=error.mail_text(), **self._names(ctx)).strip()
        return self._compose("error", ctx, body)

    def notice(self, ctx: MailContext, error: PizzamailError) -> Composed:
        """No model configured: what to set up, then reply to start."""
        body = self.render("notice.md.j2", message=error.message, hint=error.hint or "",
                           **self._names(ctx)).strip()
        return self._compose("notice", ctx, body)

    def stopped(self, ctx: MailContext, *, by: str) -> Composed:
        """A run ended on the user's ``stop`` (``by``: their address, or ``cli``)."""
        return self._compose("stopped", ctx, self.render("stopped.md.j2", by=by).strip())

    def not_running(self, ctx: MailContext) -> Composed:
        """The answer to a ``stop`` when nothing in the thread is running: nothing changed."""
        return self._compose("notice", ctx, self.render("not_running.md.j2").strip())

    def _names(self, ctx: MailContext) -> dict[str, Any]:
        return {"thread_id": ctx.thread_id, "run_id": ctx.run_id, "agent_name": self._agent(ctx).name}

    def _agent(self, ctx: MailContext) -> Agent:
        return ctx.agent or self.config.main_agent

    def approval(self, ctx: MailContext, *, view: dict[str, Any], headers: Sequence[tuple[str, str]],
                 tag: str, evidence: Sequence[tuple[str, str]] = ()) -> Composed:
        """An approval request (``view`` feeds ``approval.md.j2``); ``evidence`` are (file name, text)
        attachments: the tool output the agent relied on.

        ``tag`` (what will run) leads the subject as ``[tag] Re: <thread subject>``: a leading ``[…]``
        is set aside by RFC 5256's base subject (IMAP THREAD, JWZ threading) and, as reported, by
        Gmail's grouping, which both still see ``Re: <thread subject>``; clients that thread by
        References see the thread's ids as always."""
        body = self.render("approval.md.j2", **view, **self._names(ctx)).strip()
        ctx = replace(ctx, headers=(*ctx.headers, *headers))
        subject = f"[{tag}] {reply_subject(ctx.subject)}"
        return self._compose("waiting", ctx, body, texts=evidence, subject=subject)

    def decision_reply(self, ctx: MailContext, text: str) -> Composed:
        """A short answer to a decision that changed nothing (stale, repeated, unreadable)."""
        return self._compose("notice", ctx, text.strip())

    def _compose(self, kind: str, ctx: MailContext, body: str, *, files: Sequence[Path] = (),
                 message_id: str | None = None, texts: Sequence[tuple[str, str]] = (),
                 footer: str = "", subject: str | None = None) -> Composed:
        subject = subject or reply_subject(ctx.subject)
        refs = reference_chain(ctx)
        names = {**self._names(ctx), "footer": footer}
        text = self.render("mail.txt.j2", body=body, **names)
        html = self.render("mail.html.j2", body_html=Markup(markdown_html(body)), subject=subject,
                           **names)
        message_id = message_id or new_message_id(self.config.domain, idstring=f"r{ctx.run_id}")
        fields = self._fields(kind, ctx, subject, message_id, refs)
        if files or texts:
            msg = text_message(**fields, text=text)
            msg.add_alternative(html, subtype="html")
            for path in files:
                _attach(msg, path)
            for name, content in texts:
                msg.add_attachment(content, subtype="plain", filename=name)
            data = mail_bytes(msg)
        else:
            data = alternative_bytes(**fields, text=text, html=html)
        return Composed(kind=kind, data=data, message_id=message_id, in_reply_to=ctx.in_reply_to,
                        references=refs, subject=subject, body=body)

    def _fields(
        self, kind: str, ctx: MailContext, subject: str, message_id: str, refs: list[str]
    ) -> Fields:
        """The header fields of a mail in ``ctx``'s thread."""
        agent, account = self._agent(ctx), self.config.account
        headers = [
            # RFC 3834: marks the mail as machine-written so well-behaved autoresponders stay quiet
            ("Auto-Submitted", "auto-replied"),
            ("X-Pizzamail-Thread", str(ctx.thread_id)), ("X-Pizzamail-Run", str(ctx.run_id)),
            ("X-Pizzamail-Kind", kind), *ctx.headers,
        ]
        return {"sender": str(Address(display_name=agent.name, addr_spec=agent.address)),
                "to": account.address, "subject": subject, "message_id": message_id,
                "in_reply_to": ctx.in_reply_to, "references": refs, "date": self.clock(),
                "headers": headers}


def _attach(msg: EmailMessage, path: Path) -> None:
    kind, _ = mimetypes.guess_type(path.name)
    maintype, _, subtype = (kind or "application/octet-stream").partition("/")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8") if maintype == "text" else None
    except UnicodeDecodeError:
        text = None  # written as bytes (write_file's content_base64): sent as they are, not repaired
    if text is not None:
        msg.add_attachment(text, subtype=subtype, filename=path.name)
    else:
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=path.name)


def _load(roots: list[Traversable], name: str) -> str | None:
    for root in roots:
        path = root / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return None
