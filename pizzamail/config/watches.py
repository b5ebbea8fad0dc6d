"""``[watches.NAME]``: a remote IMAP folder whose new mail becomes input to a task."""

from __future__ import annotations

from typing import Annotated

from pydantic import StrictBool, StrictStr
from pydantic.dataclasses import dataclass

from pizzamail.config.checks import (
    SECTION,
    Count,
    Policies,
    Port,
    Seconds,
    Template,
    checked,
    model_problem,
    one_of,
    setting,
    unless_empty,
)
from pizzamail.config.named import named_section
from pizzamail.errors import ConfigError

WATCH_SECURITY = ("ssl", "starttls", "none")
WATCH_THREAD = ("one", "new")
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class WatchSettings:
    """One watched folder; its password: ``pizzamail keys set watch:NAME``.

    Its runs work on strangers' mail, so ``remember`` is denied in them unless ``policy`` names it
    (see :mod:`pizzamail.triggers.policy`).
    """

    host: StrictStr = setting("", "IMAP server, such as imap.example.com")
    port: Port = setting(993, "IMAP port (993 implicit TLS, 143 STARTTLS)")
    security: Annotated[StrictStr, one_of(WATCH_SECURITY)] = setting(
        "ssl", "ssl, starttls or none (none only for a server on loopback)")
    user: StrictStr = setting("", "login at that server")
    folder: StrictStr = setting("INBOX", "the folder watched")
    prompt: Template = setting("", "Jinja2 template for the task, given mail (from, to, subject, date,"
                               " text); default: triage the mail")
    thread: Annotated[StrictStr, one_of(WATCH_THREAD)] = setting(
        "one", "one (every mail continues this watch's thread) or new (a thread per mail)")
    read_only: StrictBool = setting(True, "true: the folder is opened read-only and nothing is marked seen")
    max_chars: Count = setting(20000, "longest mail text handed to the agent")
    retry_initial: Seconds = setting(5.0, "seconds before the first reconnect")
    retry_max: Seconds = setting(300.0, "longest wait between reconnects")
    idle_seconds: Seconds = setting(1500.0, "IDLE is renewed after this (servers drop it at 30 min)")
    policy: Policies = setting({}, "tool glob -> auto, ask or deny for the runs its mail starts (on top"
                               " of [tools.policy]); remember is denied unless named here")
    enabled: StrictBool = setting(True, "false stops watching")
    model: Annotated[StrictStr, checked(unless_empty(model_problem))] = setting(
        "", "provider:model for the runs it starts (default: [agent] model)")


WATCH_REQUIRED = {"host": "the IMAP server's host name", "user": "the login name at that server"}


def watch_settings(name: str, table: object) -> WatchSettings:
    return finish_watch(name, named_section(WatchSettings, "watches", name, table, required=WATCH_REQUIRED))


def finish_watch(name: str, settings: WatchSettings) -> WatchSettings:
    if settings.security == "none" and settings.host not in LOOPBACK_HOSTS:
        raise ConfigError(f"watches.{name}.security", "none", "ssl or starttls for a server beyond loopback")
    return settings
