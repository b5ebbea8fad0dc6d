"""``[mailbox]``: where the user's mail lives. ``local``: pizzamail's own SMTP and IMAP servers (the
default). ``imap``: the user's own account at any IMAP provider (``[mailbox.imap]``), where tasks
arrive in INBOX and pizzamail APPENDs its mail; the agents then answer at plus-addresses of the
user's address by default (``me+bot@example.com``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StrictStr
from pydantic.dataclasses import dataclass

from pizzamail.config.checks import ADDRESS_RE, SECTION, Port, checked, one_of, setting
from pizzamail.config.watches import LOOPBACK_HOSTS, WATCH_SECURITY
from pizzamail.errors import ConfigError

MODES = ("local", "imap")


def _prefix_problem(value: str) -> str | None:
    return None if value.strip("/. ") and value == value.strip() else "a folder name such as pizzamail"


@dataclass(frozen=True, kw_only=True, config=SECTION)
class ImapAccountSettings:
    """``[mailbox.imap]``: the user's own account; its password: ``pizzamail keys set mailbox``."""

    host: StrictStr = setting("", "your IMAP server, such as imap.fastmail.com")
    port: Port = setting(993, "IMAP port (993 implicit TLS, 143 STARTTLS)")
    security: Annotated[StrictStr, one_of(WATCH_SECURITY)] = setting(
        "ssl", "ssl, starttls or none (none only for a server on loopback)")
    user: StrictStr = setting("", "login at that server, usually your address")
    prefix: Annotated[StrictStr, checked(_prefix_problem)] = setting(
        "pizzamail", "the folder pizzamail's own folders go in: PREFIX/Action, PREFIX/Activity")
    authserv_id: StrictStr = setting("", "your provider's name in Authentication-Results (such as"
                                     " mx.example.com): its dmarc=pass also proves a mail is yours")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class MailboxSettings:
    mode: Annotated[StrictStr, one_of(MODES)] = setting(
        "local", "local (pizzamail's own SMTP and IMAP servers) or imap (your own account, [mailbox.imap])")
    imap: ImapAccountSettings = Field(default_factory=ImapAccountSettings)


def check_mailbox(settings: MailboxSettings) -> None:
    """What ``mode = "imap"`` needs beyond the keys' types."""
    if settings.mode != "imap":
        return
    imap = settings.imap
    for key, what in (("host", "your IMAP server's host name"), ("user", "your login at that server")):
        if not getattr(imap, key):
            raise ConfigError(f"mailbox.imap.{key}", "", what)
    if imap.security == "none" and imap.host not in LOOPBACK_HOSTS:
        raise ConfigError("mailbox.imap.security", "none", "ssl or starttls for a server beyond loopback")


def with_plus_addresses(data: dict[str, Any]) -> dict[str, Any]:
    """In IMAP mode, the addresses config.toml leaves out: the owner's is ``[mailbox.imap] user``
    when that is an address, the main agent's ``OWNER+bot@DOMAIN``, a specialist's ``OWNER+NAME@DOMAIN``
    (plus-addressing: mail to them reaches the account's INBOX). Written addresses stay, and so does
    a table of the wrong type (validation names it)."""
    mailbox = data.get("mailbox")
    imap = mailbox.get("imap") if isinstance(mailbox, dict) else None
    if not isinstance(mailbox, dict) or mailbox.get("mode") != "imap" or not isinstance(imap, dict):
        return data
    account, agent, agents = (data.get(key, {}) for key in ("account", "agent", "agents"))
    if not (isinstance(account, dict) and isinstance(agent, dict) and isinstance(agents, dict)):
        return data
    owner = account.get("address")
    if not isinstance(owner, str):
        owner = imap.get("user")
        if not owner:  # check_mailbox names the missing user
            return data
        if not (isinstance(owner, str) and ADDRESS_RE.match(owner)):
            raise ConfigError("account.address", "", "your own address, where the agents' plus-addresses"
                              " come from (needed when [mailbox.imap] user is not an address)")
    local, _, domain = owner.rpartition("@")
    return {**data, "account": {**account, "address": owner},
            "agent": {"address": f"{local}+bot@{domain}", **agent},
            "agents": {key: {"address": f"{local}+{key}@{domain}", **table} if isinstance(table, dict)
                       else table for key, table in agents.items()}}
