"""``draft_email``: the real draft in ``Drafts``, and sending an approved one through the relay.

A held ``draft_email`` is also filed as a draft (From the owner, ``\\Draft``, carrying
``X-Pizzamail-Approval``). The user approves it by replying ``approve`` (the draft goes out as the
agent wrote it) or by editing the draft and sending it through our SMTP (``send``: exactly the bytes
the user sent go out, minus Bcc and our routing header). Either way the mail is sent by the release
state machine (approved -> executing -> done), through ``[relay]`` with stdlib ``smtplib`` in a
thread; without a relay nothing is sent and the request says how to configure one.
"""

from __future__ import annotations

import asyncio
import json
import re
import smtplib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import getaddresses
from typing import Any

from pizzamail.approvals.decide import approval_header
from pizzamail.config import RelaySettings
from pizzamail.mail.build import Outgoing, build_mail
from pizzamail.store.actions import HeldAction
from pizzamail.store.blobs import BlobStore
from pizzamail.tools import ToolResult

DRAFTS_FOLDER = "Drafts"
#: headers never relayed: Bcc (its recipients are in the envelope) and our routing header
_NOT_RELAYED = frozenset({b"bcc", b"x-pizzamail-approval"})
_FIELD = re.compile(rb"^([!-9;-~]+)[ \t]*:")

NO_RELAY = (
    "no outgoing mail relay is configured, so nothing was sent; the draft stays in Drafts. To send"
    " it, set `[relay]` in config.toml (`host`, `port`, `security` = starttls, ssl or none, and"
    " `user`), store the relay password with `pizzamail keys set relay`, restart pizzamail, then"
    " reply `approve` or send the draft again."
)


def recipients(arguments: dict[str, Any]) -> list[str]:
    """The addresses in a draft's ``to`` and ``cc``."""
    fields = [str(arguments.get(k) or "") for k in ("to", "cc")]
    return [addr for _, addr in getaddresses(fields) if "@" in addr]


def draft_message(action: HeldAction, arguments: dict[str, Any], *, owner: str, domain: str,
                  date: datetime, routed: bool) -> Outgoing:
    """The draft as the agent wrote it; ``routed`` adds the header that names its action."""
    headers = [("Cc", str(arguments["cc"]))] if arguments.get("cc") else []
    if routed:
        headers.append(("X-Pizzamail-Approval", approval_header(action.id, action.nonce)))
    return build_mail(sender=owner, to=str(arguments.get("to") or ""),
                      subject=str(arguments.get("subject") or ""), text=str(arguments.get("body") or ""),
                      message_id=draft_id(action, domain), date=date, headers=headers)


def draft_id(action: HeldAction, domain: str) -> str:
    return f"draft.{action.id}.{action.nonce[:8]}@{domain}"


def strip_for_relay(raw: bytes) -> bytes:
    """``raw`` with the Bcc and X-Pizzamail-Approval fields (and their folded lines) removed;
    every other byte as the user sent it."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = raw.partition(b"\n\n")
    kept: list[bytes] = []
    dropping = False
    for line in head.splitlines(keepends=True):
        if line[:1] in (b" ", b"\t"):
            if not dropping:
                kept.append(line)
            continue
        found = _FIELD.match(line)
        dropping = bool(found and found.group(1).lower() in _NOT_RELAYED)
        if not dropping:
            kept.append(line)
    return b"".join(kept) + sep + body


def sent_arguments(msg: EmailMessage) -> dict[str, Any]:
    """What the user's sent draft says, in ``draft_email``'s arguments (for the record and the agent)."""
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
        body = part.get_content() if part is not None else ""
    except (KeyError, LookupError, ValueError):  # an odd charset or MIME tree: the bytes still go out
        body = ""
    arguments: dict[str, Any] = {"to": str(msg.get("To", "") or ""),
                                 "subject": str(msg.get("Subject", "") or ""), "body": str(body)}
    if msg.get("Cc"):
        arguments["cc"] = str(msg["Cc"])
    return arguments


def sent_by_user(arguments: dict[str, Any], rcpts: list[str]) -> str:
    """What the agent is told of a draft the user sent from their own mail program (IMAP mode)."""
    shown = json.dumps(arguments, ensure_ascii=False)
    return (f"The user edited the draft and sent it themselves from their own mail account to"
            f" {', '.join(rcpts) or 'nobody'}; pizzamail sent nothing. What they sent: {shown}")


@dataclass(kw_only=True)
class Outbox:
    """Sends approved drafts through the configured relay."""

    settings: RelaySettings
    sender: str
    """the envelope sender: the owner's address"""
    domain: str
    blobs: BlobStore
    password: Callable[[], str | None] = lambda: None
    """the relay password (the keyring entry ``relay``)"""

    def problem(self) -> str:
        """Why nothing can be sent now ('' when the relay is ready)."""
        if not self.settings.configured:
            return NO_RELAY
        if self.settings.user and not self.password():
            return ("the relay password is missing, so nothing was sent; store it with `pizzamail keys"
                    " set relay`, then reply `approve` or send the draft again.")
        return ""

    async def send(self, action: HeldAction, arguments: dict[str, Any], *, date: datetime) -> ToolResult:
        """Relay the user's sent draft, or the approved arguments as a mail; never raises."""
        if action.outgoing_blob:
            data = await self.blobs.load(action.outgoing_blob)
            rcpts = [str(r) for r in json.loads(action.outgoing_rcpts or "[]")]
        else:
            message = draft_message(action, arguments, owner=self.sender, domain=self.domain, date=date,
                                    routed=False)
            data, rcpts = message.as_bytes(), recipients(arguments)
        if not rcpts:
            return ToolResult(text="the mail names no recipient; nothing was sent", is_error=True)
        try:
            refused = await asyncio.to_thread(self._deliver, data, rcpts)
        except (OSError, smtplib.SMTPException) as exc:
            return ToolResult(text=f"the relay {self.settings.host} did not take the mail: {exc}",
                              is_error=True)
        sent = [r for r in rcpts if r not in refused]
        text = f"the mail was sent to {', '.join(sent)} through {self.settings.host}"
        if refused:
            text += f"; the relay refused {', '.join(refused)}"
        return ToolResult(text=text)

    def _deliver(self, data: bytes, rcpts: list[str]) -> dict[str, Any]:
        s = self.settings
        context = ssl.create_default_context()
        client = (smtplib.SMTP_SSL(s.host, s.port, timeout=s.timeout, context=context)
                  if s.security == "ssl" else smtplib.SMTP(s.host, s.port, timeout=s.timeout))
        with client:
            if s.security == "starttls":
                client.starttls(context=context)
            if s.user:
                client.login(s.user, self.password() or "")
            return dict(client.sendmail(self.sender, rcpts, data))
