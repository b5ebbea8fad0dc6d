"""The extra tool rules of one run (``RunScope.rules``), from who sent its task and what posted it.

- **Mail through SMTP intake and** ``pizzamail task`` (no source): the sender's ``[senders.NAME]
  policy``, none for the owner. A sender is one of the owner's own programs.
- **Schedules** (``schedule:NAME``): none; their prompts are the owner's own words.
- **Webhooks and watched mailboxes** (``hook:NAME``, ``watch:NAME``): they hand the agent text written
  by outsiders (a payload, a stranger's mail): their own ``policy`` on top of :data:`OUTSIDE_DEFAULT`.
  A trigger removed from config since its run was queued, or a source of a kind this code does not
  know, gets the default alone: it fails closed.
- **An outsider's mail in the owner's own mailbox** (``mailbox:AGENT``, ``[mailbox] mode = "imap"``):
  :data:`OUTSIDE_DEFAULT` alone; it has no policy of its own.

Such a thread's runs are also marked ``outside`` (:func:`on_outside_content`): an MCP tool that may
reach the outside world asks first there unless the trigger's own policy allows it, so hidden
instructions cannot send data out through a "read-only" fetcher.

The source is ``runs.source``, written by the trigger's own code when it posts the task (never a
header of received mail, which any SMTP sender could write). When a sender's rules and a source's
rules both apply, each tool gets the stricter of their answers (deny > ask > auto): the run carries
both tables (``RunScope.rules``) and the registry reads each.
"""

from __future__ import annotations

from collections.abc import Iterable

from pizzamail.config import Config, HookSettings, WatchSettings

OUTSIDE_DEFAULT: dict[str, str] = {"remember": "deny", "forget": "deny"}
"""Rules for runs on outsiders' content unless the trigger's ``policy`` names the tool itself.

``remember`` writes the memory that every later run reads: an instruction planted in a stranger's mail
would steer the owner's own runs from then on; ``forget`` would let it erase what the owner's runs
rely on. Tools that reach other people or outlast the run
(``draft_email``, ``schedule_task``) are held for approval whatever the policy says, and MCP tools
ask by default unless they declare themselves read-only, so they need no entry here. A ``"*"`` rule
of the trigger's does not lift the default: an exact name beats a glob, as in every rule table."""


def run_rules(config: Config, *, sender: str, sources: Iterable[str | None]) -> tuple[dict[str, str], ...]:
    """The rule tables of a run whose task mail came from ``sender`` (its From), in a thread that
    triggers posted into from ``sources`` (``runs.source`` of the thread's runs: None for mail and the
    CLI). Every source counts, not only the run's own: an owner's reply in a watch's thread still has
    the outsiders' mails in its history."""
    tables = [sender_rules(config, sender), *(source_rules(config, s) for s in sorted(set(sources), key=str))]
    return tuple(t for t in tables if t)


def on_outside_content(sources: Iterable[str | None]) -> bool:
    """Whether a thread with runs from ``sources`` holds outsiders' text: anything posted by a trigger
    other than a schedule (an unknown kind too: it fails closed)."""
    return any(s and s.partition(":")[0] != "schedule" for s in sources)


def sender_rules(config: Config, sender: str) -> dict[str, str]:
    """The ``[senders.NAME]`` policy of ``sender`` (also when it is disabled now: the run was started
    under it), else none."""
    sender = sender.lower()
    return next((dict(s.policy) for s in config.senders.values() if s.address.lower() == sender), {})


def source_rules(config: Config, source: str | None) -> dict[str, str]:
    """The rules a trigger's posts carry: none for schedules, the outside default under the trigger's
    own policy for everything else."""
    if not source:
        return {}
    kind, _, name = source.partition(":")
    if kind == "schedule":
        return {}
    settings = _outside_trigger(config, kind, name)
    return {**OUTSIDE_DEFAULT, **(settings.policy if settings else {})}


def _outside_trigger(config: Config, kind: str, name: str) -> HookSettings | WatchSettings | None:
    if kind == "hook":
        return config.hooks.get(name)
    if kind == "watch":
        return config.watches.get(name)
    return None
