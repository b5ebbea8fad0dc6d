"""``[watches.NAME]``: a remote IMAP folder whose new mail becomes input to a task."""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.config.fields import (
    named_section,
    one_of,
    policies_problem,
    port_problem,
    positive,
    setting,
)
from pizzamail.config.triggers import template_check
from pizzamail.errors import ConfigError

WATCH_SECURITY = ("ssl", "starttls", "none")
WATCH_THREAD = ("one", "new")
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True, kw_only=True)
class WatchSettings:
    """One watched folder; its password: ``pizzamail keys set watch:NAME``.

    Its runs work on strangers' mail, so ``remember`` is denied in them unless ``policy`` names it
    (see :mod:`pizzamail.triggers.policy`).
    """

    host: str = setting("", "IMAP server, such as imap.example.com")
    port: int = setting(993, "IMAP port (993 implicit TLS, 143 STARTTLS)", port_problem)
    security: str = setting("ssl", "ssl, starttls or none (none only for a server on loopback)",
                            one_of(WATCH_SECURITY))
    user: str = setting("", "login at that server")
    folder: str = setting("INBOX", "the folder watched")
    prompt: str = setting("", "Jinja2 template for the task, given mail (from, to, subject, date, text);"
                          " default: triage the mail", template_check)
    thread: str = setting("one", "one (every mail continues this watch's thread) or new (a thread per mail)",
                          one_of(WATCH_THREAD))
    read_only: bool = setting(True, "true: the folder is opened read-only and nothing is marked seen")
    max_chars: int = setting(20000, "longest mail text handed to the agent", positive)
    retry_initial: float = setting(5.0, "seconds before the first reconnect", positive)
    retry_max: float = setting(300.0, "longest wait between reconnects", positive)
    idle_seconds: float = setting(1500.0, "IDLE is renewed after this (servers drop it at 30 min)", positive)
    policy: dict[str, str] = setting({}, "tool glob -> auto, ask or deny for the runs its mail starts (on"  # noqa: RUF009
                                     " top of [tools.policy]); remember is denied unless named here",
                                     policies_problem)
    enabled: bool = setting(True, "false stops watching")


def watch_settings(name: str, table: object) -> WatchSettings:
    prefix = f"watches.{name}"
    settings = named_section(WatchSettings, "watches", name, table, required={
        "host": "the IMAP server's host name", "user": "the login name at that server"})
    if settings.security == "none" and settings.host not in LOOPBACK_HOSTS:
        raise ConfigError(f"{prefix}.security", "none", "ssl or starttls for a server beyond loopback")
    return settings
