"""Optional expiry and one reminder, driven by the runner's injected clock (no sleeping)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pizzamail.approvals.ledger import pending
from pizzamail.config import ApprovalsSettings, parse_config
from pizzamail.errors import ConfigError
from pizzamail.store.actions import held_actions
from tests.approvals.conftest import Approvals, open_approvals
from tests.fakes.openai_server import FakeOpenAI, text
from tests.runner.conftest import Harness, bot_mails


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


async def _mails_of_kind(approvals: Approvals, kind: str) -> int:
    rows = await approvals.harness.store.fetchall("SELECT id FROM messages WHERE kind = ?", (kind,))
    return len(rows)


async def _action_copies(approvals: Approvals) -> int:
    folder = await approvals.harness.mailbox.folder("Action")
    return len(await approvals.harness.mailbox.messages(folder)) if folder else 0


async def test_doing_nothing_never_denies_when_expiry_is_off(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    clock = Clock()
    async with open_approvals(harness, clock=clock) as approvals:
        await approvals.held(fake_openai, text("Went on without it."))
        clock.advance(days=365)
        await approvals.swept()
        [action] = await pending(harness.store)
        assert action.status == "held"
        assert await _mails_of_kind(approvals, "reminder") == 0
        assert await _action_copies(approvals) == 1


async def test_one_reminder_then_expiry_and_the_agent_goes_on(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    clock = Clock()
    configured = harness.with_config(approvals=ApprovalsSettings(expires="2h", remind_after="1h"))
    async with open_approvals(configured, clock=clock) as approvals:
        run_id = await approvals.held(fake_openai, text("Went on without it."))
        clock.advance(minutes=30)
        await approvals.swept()
        assert await _mails_of_kind(approvals, "reminder") == 0
        clock.advance(minutes=45)
        await approvals.swept()
        await approvals.swept()
        assert await _mails_of_kind(approvals, "reminder") == 1  # once, not repeated
        reminder = (await bot_mails(approvals.harness.mailbox))[-1][1]
        assert reminder["X-Pizzamail-Approval"] and "Reminder" in reminder.get_body().get_content()  # type: ignore[union-attr]
        clock.advance(hours=2)
        await approvals.swept()
        assert await approvals.finish(run_id) == "done"
        assert await _action_copies(approvals) == 0
    assert "expired unanswered" in fake_openai.requests[-1].messages[-1]["content"]
    [action] = await held_actions(harness.store)
    assert action.status == "expired" and approvals.tool.calls == []
    [decision] = await harness.store.fetchall("SELECT kind, by_address, applied FROM decisions")
    assert tuple(decision) == ("expire", "pizzamail", 1)


@pytest.mark.parametrize("value", ["2 hours", "0h", "1w", "h"])
def test_a_bad_duration_names_the_key(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"approvals": {"expires": value}})
    assert "approvals.expires" in str(raised.value)


def test_per_server_expiry_beats_the_global_one() -> None:
    config = parse_config({"approvals": {"expires": "1d", "remind_after": "30m"},
                           "mcp": {"servers": {"gh": {"url": "http://127.0.0.1:1/mcp", "expires": "2h"}}}})
    assert config.expiry_seconds("gh") == 7200
    assert config.expiry_seconds("builtin") == 86400
    assert parse_config({}).expiry_seconds("builtin") is None
