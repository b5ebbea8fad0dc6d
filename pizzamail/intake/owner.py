"""Who wrote a mail found in the owner's own mailbox (``[mailbox] mode = "imap"``).

Anyone can send mail with the owner's From. A mail counts as the owner's only when

- the same mail is in the account's Sent folder (mail clients and webmail file what they send
  there; only someone who can log in to the account can put it there): found by its Message-ID,
  and its text must be the same, so a stranger who learnt the Message-ID of something the owner
  sent cannot reuse it for words of their own; or
- the topmost ``Authentication-Results`` of the configured ``authserv_id`` (the receiving server
  the owner trusts) says DMARC passed for the From domain, or DKIM passed with the From domain's
  own signature (:mod:`pizzamail.mail.authres`). That trusts the domain's provider to keep its other
  users from writing the owner's From.

An approver other than the owner has no Sent folder here: only Authentication-Results can show
their mail is theirs. Everything else is an outsider's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Protocol

from pizzamail.mail.authres import trusted, vouches_for
from pizzamail.mail.parse import ParsedMail

_HEADER_END = re.compile(rb"\r?\n\r?\n")


class SentFolder(Protocol):
    """The account's Sent folder (``\\Sent`` by SPECIAL-USE), as the owner check reads it."""

    async def copy_of(self, message_id: str) -> bytes | None:
        """The mail with this Message-ID in Sent (its bytes), or None."""
        ...


@dataclass(frozen=True, kw_only=True)
class Verdict:
    owner: bool
    """written by the owner (or an approver): may decide approvals and stop runs"""
    why: str
    """how that was shown, or why not (for the log and the refusal's record)"""


async def check_owner(
    msg: EmailMessage, parsed: ParsedMail, raw: bytes, *, owner: str, approvers: frozenset[str],
    authserv_id: str, sent: SentFolder,
) -> Verdict:
    """Whether ``raw`` (parsed as ``msg`` and ``parsed``) is the owner's, or an approver's, own mail."""
    sender = (parsed.sender or "").lower()
    if not sender or sender not in approvers:
        return Verdict(owner=False, why=f"<{sender or 'no sender'}> is not an approver")
    results = trusted([str(v) for v in msg.get_all("Authentication-Results") or []], authserv_id)
    passed = vouches_for(results, sender.rpartition("@")[2]) if results is not None else None
    if passed:
        return Verdict(owner=True, why=passed)
    if sender == owner.lower() and parsed.message_id:
        copy = await sent.copy_of(parsed.message_id)
        if copy is not None:
            same = same_text(copy, raw)
            return Verdict(owner=same, why="found in Sent" if same else
                           "its Message-ID is in Sent, but that mail's text differs")
    return Verdict(owner=False, why=_unproven(sender, owner, authserv_id))


def _unproven(sender: str, owner: str, authserv_id: str) -> str:
    sent = "not found in Sent" if sender == owner.lower() else "not the account's own address"
    if not authserv_id:
        return f"{sent}, and no authserv_id is set to read Authentication-Results by"
    return f"{sent}, and no Authentication-Results of {authserv_id} passes DMARC or DKIM for it"


def same_text(one: bytes, other: bytes) -> bool:
    """Whether two copies of a mail have the same body: a delivery adds header fields (Received,
    Delivered-To, Authentication-Results) and may change line ends or trailing spaces, not words."""
    return _body(one) == _body(other)


def _body(raw: bytes) -> list[bytes]:
    parts = _HEADER_END.split(raw, maxsplit=1)
    lines = [line.rstrip() for line in (parts[1] if len(parts) > 1 else b"").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines
