"""A run's extra tool rules from its sender and its source (pizzamail.triggers.policy), without I/O."""

from __future__ import annotations

import pytest

from pizzamail.config import Config, HookSettings, SenderSettings, WatchSettings, parse_config
from pizzamail.errors import ConfigError
from pizzamail.tools.policy import strictest_rule
from pizzamail.triggers.policy import OUTSIDE_DEFAULT, run_rules, source_rules

OWNER, CRON = "me@pizzamail.localhost", "cron@localhost"


def config(*, hook: dict[str, str] | None = None, watch: dict[str, str] | None = None,
           sender: dict[str, str] | None = None) -> Config:
    return Config(hooks={"gh": HookSettings(policy=hook or {})},
                  watches={"inbox": WatchSettings(host="imap.example.com", user="u", policy=watch or {})},
                  senders={"cron": SenderSettings(address=CRON, policy=sender or {})})


def decide(rules: tuple[dict[str, str], ...], name: str) -> str | None:
    """What a run's rules say for a tool, read as ToolRegistry reads them (None: nothing)."""
    return strictest_rule(rules, name)


@pytest.mark.parametrize("source", [None, "", "schedule:news", "schedule:news (by hand)"])
def test_the_owners_mail_and_schedules_get_no_rules(source: str | None) -> None:
    assert run_rules(config(hook={"*": "deny"}), sender=OWNER, sources=[source]) == ()


@pytest.mark.parametrize("source", ["hook:gh", "watch:inbox"])
def test_hooks_and_watches_deny_remember_and_forget_by_default(source: str) -> None:
    rules = run_rules(config(), sender=OWNER, sources=[source])
    assert rules == ({"remember": "deny", "forget": "deny"},)
    decided = (decide(rules, "remember"), decide(rules, "forget"), decide(rules, "recall"))
    assert decided == ("deny", "deny", None)


@pytest.mark.parametrize(("source", "settings"), [("hook:gh", "hook"), ("watch:inbox", "watch")])
def test_a_triggers_own_policy_applies_and_can_restore_remember(source: str, settings: str) -> None:
    allowing = config(**{settings: {"remember": "auto", "gh_*": "ask"}})
    rules = run_rules(allowing, sender=OWNER, sources=[source])
    assert (decide(rules, "remember"), decide(rules, "gh_create_issue")) == ("auto", "ask")


def test_a_triggers_glob_does_not_lift_the_default_an_exact_name_does() -> None:
    loose = run_rules(config(hook={"*": "auto"}), sender=OWNER, sources=["hook:gh"])
    assert (decide(loose, "remember"), decide(loose, "post_progress")) == ("deny", "auto")
    stricter = run_rules(config(hook={"*": "ask"}), sender=OWNER, sources=["hook:gh"])
    assert (decide(stricter, "remember"), decide(stricter, "post_progress")) == ("deny", "ask")


@pytest.mark.parametrize("source", ["hook:gone", "watch:gone", "mystery:x", "hook:"])
def test_a_trigger_gone_from_config_or_an_unknown_kind_fails_closed(source: str) -> None:
    allowing = config(hook={"remember": "auto"}, watch={"remember": "auto"})
    assert source_rules(allowing, source) == OUTSIDE_DEFAULT


def test_the_sender_alone_keeps_its_policy() -> None:
    rules = run_rules(config(sender={"*": "ask", "lookup": "deny"}), sender="CRON@localhost", sources=[None])
    assert rules == ({"*": "ask", "lookup": "deny"},)


def test_sender_and_source_together_the_stricter_wins_for_each_tool() -> None:
    # the sender allows memory and asks for the rest; the hook asks for gh_* and allows post_progress
    both = config(sender={"remember": "auto", "*": "ask", "add": "deny"},
                  hook={"gh_*": "auto", "post_progress": "auto"})
    rules = run_rules(both, sender=CRON, sources=["hook:gh"])
    names = ("remember", "gh_list", "post_progress", "add", "other")
    assert {name: decide(rules, name) for name in names} == {
        "remember": "deny",  # the hook's default beats the sender's auto
        "gh_list": "ask",  # the sender's "*" beats the hook's gh_* = auto
        "post_progress": "ask",
        "add": "deny",  # the sender's deny beats silence
        "other": "ask",
    }


@pytest.mark.parametrize("section", ["hooks", "watches"])
def test_a_trigger_policy_is_checked_like_a_senders(section: str) -> None:
    table = {"hooks": {"gh": {}}, "watches": {"inbox": {"host": "imap.example.com", "user": "u"}}}[section]
    name = next(iter(table))
    ok = parse_config({section: {name: {**table[name], "policy": {"remember": "auto", "*": "ask"}}}})
    assert getattr(ok, section)[name].policy == {"remember": "auto", "*": "ask"}
    with pytest.raises(ConfigError) as caught:
        parse_config({section: {name: {**table[name], "policy": {"remember": "sometimes"}}}})
    assert caught.value.key == f"{section}.{name}.policy"
