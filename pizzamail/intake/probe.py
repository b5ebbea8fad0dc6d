"""``pizzamail mailbox test``: whether the owner's own account can carry pizzamail, before ``serve``
relies on it. Read-only: it logs in, examines INBOX and Sent, and changes nothing.

Each finding says what was seen and, when something is missing, what fixes it: the login (its error
names the setting or the keyring entry), INBOX and IDLE, the Sent folder and the owner check on it,
Drafts, plus-addressing (shown by mail already delivered to a plus-address of the owner's) and the
``authserv_id`` whose Authentication-Results are trusted.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from email.message import EmailMessage

from pizzamail.account.session import Account, ImapSession
from pizzamail.mail.authres import parse_authres
from pizzamail.mail.ids import first_id
from pizzamail.mail.parse import header_text, parse_bytes

#: the newest mails of INBOX whose Authentication-Results are read
RECENT = 20


@dataclass(frozen=True, kw_only=True)
class Finding:
    ok: bool | None
    """None: not shown either way (nothing to look at yet)"""
    what: str
    fix: str = ""


@dataclass(frozen=True, kw_only=True)
class Owner:
    """Whom the account belongs to, as config.toml says."""

    address: str
    agents: tuple[str, ...]
    authserv_id: str


async def probe_mailbox(account: Account, password: str, owner: Owner, *, tls: ssl.SSLContext | None = None,
                        ) -> list[Finding]:
    """What the account shows; a failed connect or login raises its :class:`AccountError`."""
    async with await ImapSession.open(account, tls=tls) as session:
        await session.login(password)
        found = [Finding(ok=True, what=f"logged in to {session.where} as {account.user}")]
        found += await _inbox(session, owner)
        special = await session.special_folders()
        found.append(await _sent(session, special.get("\\Sent"), owner))
        found.append(_drafts(special.get("\\Drafts")))
        return found


async def _inbox(session: ImapSession, owner: Owner) -> list[Finding]:
    status = await session.open_folder("INBOX", read_only=True)
    idle = "IDLE: new mail is pushed" if session.can_idle else "no IDLE: INBOX is polled every minute"
    found = [Finding(ok=True, what=f"INBOX: {status.exists} mail(s); {idle}")]
    found += [await _plus(session, owner, agent) for agent in owner.agents]
    recent = await session.uids_after(max(status.uidnext - 1 - RECENT, 0))
    fields = await session.headers(recent, ("Authentication-Results",))
    found.append(_authserv(owner.authserv_id, [parse_bytes(raw) for raw in fields.values()]))
    return found


async def _plus(session: ImapSession, owner: Owner, agent: str) -> Finding:
    local, _, domain = owner.address.lower().rpartition("@")
    agent_local, _, agent_domain = agent.lower().rpartition("@")
    if agent_domain != domain or not agent_local.startswith(local + "+"):
        return Finding(ok=None, what=f"{agent} is not a plus-address of {owner.address}: it must be an alias"
                       " that delivers into this account's INBOX")
    if await session.search_header("To", f"{local}+"):
        return Finding(ok=True, what=f"{agent}: mail to plus-addresses of {owner.address} arrives in INBOX")
    return Finding(ok=None, what=f"{agent}: no mail to a plus-address of {owner.address} in INBOX yet",
                   fix=f"send a mail to {agent} from your mail program and run this again; if it does not"
                       " arrive in INBOX, your provider needs plus-addressing turned on (or an alias)")


async def _sent(session: ImapSession, folder: str | None, owner: Owner) -> Finding:
    """The owner check at work: the newest mail in Sent, found again by its Message-ID."""
    fallback = "set authserv_id in [mailbox.imap] to your provider's name in Authentication-Results"
    if folder is None:
        return Finding(ok=False, what="no folder is marked \\Sent (SPECIAL-USE): your replies cannot be"
                       " told from someone else's with your From", fix=fallback)
    status = await session.open_folder(folder, read_only=True)
    newest = await session.uids_after(max(status.uidnext - 2, 0))
    fetched = await session.fetch(newest[-1]) if newest else None
    message_id = first_id(header_text(parse_bytes(fetched.raw), "Message-ID")) if fetched else None
    if message_id is None:
        return Finding(ok=None, what=f"Sent ({folder}) has no mail to check the owner check with",
                       fix=f"send a mail to {owner.address} from your mail program, then run this again")
    if newest[-1] not in await session.search_header("Message-ID", message_id):
        return Finding(ok=False, what=f"{session.where} does not find mail in {folder} by its Message-ID",
                       fix=fallback)
    return Finding(ok=True, what=f"Sent ({folder}): mail is found by its Message-ID, so your replies count"
                   " as yours when your mail program files them there")


def _drafts(folder: str | None) -> Finding:
    if folder is None:
        return Finding(ok=False, what="no folder is marked \\Drafts (SPECIAL-USE): draft_email has nowhere"
                       " to put its drafts", fix="create a Drafts folder in your mail program or webmail")
    return Finding(ok=True, what=f"Drafts ({folder}): draft_email's drafts go there")


def _authserv(authserv_id: str, mails: list[EmailMessage]) -> Finding:
    values = [str(v) for msg in mails for v in msg.get_all("Authentication-Results") or []]
    seen = sorted({found.authserv_id for value in values if (found := parse_authres(value)) is not None})
    names = ", ".join(seen) or "none"
    if not authserv_id:
        return Finding(ok=None, what=f"authserv_id is not set: only Sent shows a mail is yours (in recent"
                       f" INBOX mail, Authentication-Results come from: {names})",
                       fix="set authserv_id in [mailbox.imap] to your provider's name among those, if you"
                           " trust it")
    if authserv_id.lower() in seen:
        return Finding(ok=True, what=f"Authentication-Results of {authserv_id} are on recent INBOX mail")
    return Finding(ok=False if seen else None, what=f"no recent INBOX mail carries Authentication-Results of"
                   f" {authserv_id} (seen: {names})", fix="check authserv_id in [mailbox.imap]")
