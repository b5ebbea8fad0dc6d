"""The trigger sections of ``config.toml``: ``[schedules.NAME]``, ``[hooks.NAME]``, ``[senders.NAME]``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pizzamail.config.fields import (
    address_problem,
    named_section,
    one_of,
    policies_problem,
    positive,
    setting,
    user_problem,
)
from pizzamail.errors import ConfigError


def cron_check(value: str) -> str | None:
    from pizzamail.when.cron import cron_problem  # croniter is imported only when used

    return cron_problem(value)


def when_check(value: str) -> str | None:
    from pizzamail.when.phrases import when_to_cron

    return (when_to_cron(value).problem or None) if value else None


def template_check(value: str) -> str | None:
    """A prompt template (hooks, watches) that Jinja2 can read; empty means the default prompt."""
    if not value:
        return None
    from pizzamail.when.templates import template_problem  # jinja2 is imported only when used

    return template_problem(value)


def tz_check(value: str) -> str | None:
    from pizzamail.when.cron import tz_problem

    return tz_problem(value)


CATCH_UP = ("once", "skip")
HOOK_AUTH = ("hmac", "standard", "bearer")
HOOK_THREAD = ("new", "one")


@dataclass(frozen=True, kw_only=True)
class ScheduleSettings:
    """One ``[schedules.NAME]``: a prompt started in the schedule's own thread at each cron time.

    Exactly one of ``cron`` and ``when`` is given; after :func:`schedule_settings` ``cron`` always
    holds the expression (``when`` translated) and ``when`` keeps the phrase it came from.
    """

    cron: str = setting("", "cron expression, such as \"0 8 * * 1-5\" (weekdays at 8)", cron_check)
    when: str = setting("", "instead of cron: a phrase such as \"every weekday at 8\"", when_check)
    tz: str = setting("", "IANA time zone the times are read in, such as Europe/Berlin"
                      " (empty: [agent] timezone, else this machine's zone)",
                      lambda v: tz_check(v) if v else None)
    prompt: str = setting("", "the task given to the agent at each occurrence")
    catch_up: str = setting("once", "after downtime: once (run one missed occurrence) or skip",
                            one_of(CATCH_UP))
    enabled: bool = setting(True, "false pauses the schedule")


@dataclass(frozen=True, kw_only=True)
class HookSettings:
    """One ``[hooks.NAME]``: ``POST /hooks/NAME`` starts a task (secret: `pizzamail keys set hook:NAME`).

    Its runs work on a payload written by someone else, so ``remember`` is denied in them unless
    ``policy`` names it (see :mod:`pizzamail.triggers.policy`).
    """

    auth: str = setting("hmac", "hmac (X-Pizzamail-Signature), standard (Standard Webhooks:"
                        " webhook-signature) or bearer (Authorization: Bearer)", one_of(HOOK_AUTH))
    prompt: str = setting("", "Jinja2 template for the task, given payload (default: the payload)",
                          template_check)
    thread: str = setting("new", "new (a thread per delivery) or one (one thread for this hook)",
                          one_of(HOOK_THREAD))
    max_body: int = setting(1024 * 1024, "largest body accepted, bytes", positive)
    rate: int = setting(30, "deliveries accepted per minute (burst of the same size)", positive)
    policy: dict[str, str] = setting({}, "tool glob -> auto, ask or deny for the runs it starts (on top"  # noqa: RUF009
                                     " of [tools.policy]); remember is denied unless named here",
                                     policies_problem)



def schedule_settings(name: str, table: object) -> ScheduleSettings:
    """One ``[schedules.NAME]`` section, validated, ``when`` translated into ``cron`` (also used by
    ``pizzamail schedule add`` and the schedule_task tool)."""
    prefix = f"schedules.{name}"
    settings = named_section(ScheduleSettings, "schedules", name, table)
    if settings.cron and settings.when:
        raise ConfigError(f"{prefix}.when", settings.when, "either cron or when, not both")
    if not (settings.cron or settings.when):
        raise ConfigError(f"{prefix}.when", "", 'a phrase such as "every weekday at 8"'
                          ' (or cron = "0 8 * * 1-5")')
    if not settings.prompt.strip():
        raise ConfigError(f"{prefix}.prompt", settings.prompt, "the task text (not empty)")
    if settings.when:
        from pizzamail.when.phrases import when_to_cron

        return replace(settings, cron=when_to_cron(settings.when).cron)
    return settings


def hook_settings(name: str, table: object) -> HookSettings:
    return named_section(HookSettings, "hooks", name, table)



@dataclass(frozen=True, kw_only=True)
class SenderSettings:
    """One ``[senders.NAME]``: a program that submits tasks by mail with its own SMTP login.

    Its login is ``user`` (default: NAME), its password is in the keyring (``pizzamail account
    password --sender NAME``). It may start tasks; it decides approvals only with ``approve = true``.
    """

    address: str = setting("", "the From address it submits as, such as cron@localhost",
                           lambda v: address_problem(v) if v else None)
    user: str = setting("", "its SMTP login name (default: the section's NAME)",
                        lambda v: user_problem(v) if v else None)
    approve: bool = setting(False, "true lets its mail decide approvals (default: it may not)")
    rate: int = setting(30, "mails accepted per minute (burst of the same size); more are"
                        " answered 450, so its mailer retries later", positive)
    policy: dict[str, str] = setting({}, "tool glob -> auto, ask or deny for the runs its mail starts"  # noqa: RUF009
                                     " (on top of [tools.policy])", policies_problem)
    enabled: bool = setting(True, "false refuses its logins")

    def login(self, name: str) -> str:
        return self.user or name


def sender_settings(name: str, table: object) -> SenderSettings:
    return named_section(SenderSettings, "senders", name, table,
                         required={"address": "the address it sends from, such as cron@localhost"})
