"""The trigger sections of ``config.toml``: ``[schedules.NAME]``, ``[hooks.NAME]``, ``[senders.NAME]``."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from pydantic import StrictBool, StrictStr
from pydantic.dataclasses import dataclass

from pizzamail.config.checks import (
    SECTION,
    Count,
    Policies,
    Template,
    Zone,
    address_problem,
    checked,
    cron_problem,
    model_problem,
    one_of,
    setting,
    unless_empty,
    user_problem,
    when_problem,
)
from pizzamail.config.named import named_section
from pizzamail.errors import ConfigError

CATCH_UP = ("once", "skip")
HOOK_AUTH = ("hmac", "standard", "bearer")
HOOK_THREAD = ("new", "one")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class ScheduleSettings:
    """One ``[schedules.NAME]``: a prompt started in the schedule's own thread at each cron time.

    Exactly one of ``cron`` and ``when`` is given; after :func:`schedule_settings` ``cron`` always
    holds the expression (``when`` translated) and ``when`` keeps the phrase it came from.
    """

    cron: Annotated[StrictStr, checked(cron_problem)] = setting(
        "", "cron expression, such as \"0 8 * * 1-5\" (weekdays at 8)")
    when: Annotated[StrictStr, checked(unless_empty(when_problem))] = setting(
        "", "instead of cron: a phrase such as \"every weekday at 8\"")
    tz: Zone = setting("", "IANA time zone the times are read in, such as Europe/Berlin"
                       " (empty: [agent] timezone, else this machine's zone)")
    prompt: StrictStr = setting("", "the task given to the agent at each occurrence")
    catch_up: Annotated[StrictStr, one_of(CATCH_UP)] = setting(
        "once", "after downtime: once (run one missed occurrence) or skip")
    enabled: StrictBool = setting(True, "false pauses the schedule")
    model: Annotated[StrictStr, checked(unless_empty(model_problem))] = setting(
        "", "provider:model for its runs (default: [agent] model)")


@dataclass(frozen=True, kw_only=True, config=SECTION)
class HookSettings:
    """One ``[hooks.NAME]``: ``POST /hooks/NAME`` starts a task (secret: `pizzamail keys set hook:NAME`).

    Its runs work on a payload written by someone else, so ``remember`` is denied in them unless
    ``policy`` names it (see :mod:`pizzamail.triggers.policy`).
    """

    auth: Annotated[StrictStr, one_of(HOOK_AUTH)] = setting(
        "hmac", "hmac (X-Pizzamail-Signature), standard (Standard Webhooks: webhook-signature) or"
                " bearer (Authorization: Bearer)")
    prompt: Template = setting("", "Jinja2 template for the task, given payload (default: the payload)")
    thread: Annotated[StrictStr, one_of(HOOK_THREAD)] = setting(
        "new", "new (a thread per delivery) or one (one thread for this hook)")
    max_body: Count = setting(1024 * 1024, "largest body accepted, bytes")
    rate: Count = setting(30, "deliveries accepted per minute (burst of the same size)")
    policy: Policies = setting({}, "tool glob -> auto, ask or deny for the runs it starts (on top of"
                               " [tools.policy]); remember is denied unless named here")
    model: Annotated[StrictStr, checked(unless_empty(model_problem))] = setting(
        "", "provider:model for the runs it starts (default: [agent] model)")


def schedule_settings(name: str, table: object) -> ScheduleSettings:
    """One ``[schedules.NAME]`` section, validated, ``when`` translated into ``cron`` (also used by
    ``pizzamail schedule add`` and the schedule_task tool)."""
    return finish_schedule(name, named_section(ScheduleSettings, "schedules", name, table))


def finish_schedule(name: str, settings: ScheduleSettings) -> ScheduleSettings:
    prefix = f"schedules.{name}"
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


@dataclass(frozen=True, kw_only=True, config=SECTION)
class SenderSettings:
    """One ``[senders.NAME]``: a program that submits tasks by mail with its own SMTP login.

    Its login is ``user`` (default: NAME), its password is in the keyring (``pizzamail account
    password --sender NAME``). It may start tasks; it decides approvals only with ``approve = true``.
    """

    address: Annotated[StrictStr, checked(unless_empty(address_problem))] = setting(
        "", "the From address it submits as, such as cron@localhost")
    user: Annotated[StrictStr, checked(unless_empty(user_problem))] = setting(
        "", "its SMTP login name (default: the section's NAME)")
    approve: StrictBool = setting(False, "true lets its mail decide approvals (default: it may not)")
    rate: Count = setting(30, "mails accepted per minute (burst of the same size); more are answered"
                          " 450, so its mailer retries later")
    policy: Policies = setting({}, "tool glob -> auto, ask or deny for the runs its mail starts"
                               " (on top of [tools.policy])")
    enabled: StrictBool = setting(True, "false refuses its logins")

    def login(self, name: str) -> str:
        return self.user or name


SENDER_REQUIRED = {"address": "the address it sends from, such as cron@localhost"}


def sender_settings(name: str, table: object) -> SenderSettings:
    return named_section(SenderSettings, "senders", name, table, required=SENDER_REQUIRED)
