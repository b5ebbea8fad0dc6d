"""Automation senders and approvals: a sender's reply never decides unless ``approve = true``, and
the runs its mail starts apply its ``[senders.NAME]`` policy. Real SMTP intake, runner, scripted model."""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.message import EmailMessage
from typing import Any

import pytest

from pizzamail.approvals.ledger import pending
from pizzamail.auth import sender_key
from pizzamail.config import SenderSettings
from pizzamail.intake.tasks import store_task
from pizzamail.mail.parse import parse_mail
from pizzamail.store.actions import held_actions
from pizzamail.tools import ToolRegistry
from tests.approvals.conftest import Approvals, open_approvals, reply
from tests.approvals.test_flow import _held
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import Harness
from tests.runner.test_runner_tools import Adder
from tests.test_intake import BOT, OWNER, count, mail

CRON, CRON_PW = "cron@localhost", "cron-pw-123"


@asynccontextmanager
async def approvals_with_cron(harness: Harness, **cron: Any) -> AsyncIterator[Approvals]:
    harness.secrets.set(sender_key("cron"), CRON_PW)
    configured = harness.with_config(senders={"cron": SenderSettings(address=CRON, **cron)})
    async with open_approvals(configured) as opened:
        yield opened


def send_as_cron(approvals: Approvals, msg: EmailMessage) -> tuple[int, str]:
    try:
        with smtplib.SMTP("127.0.0.1", approvals.port, timeout=10) as client:
            client.login("cron", CRON_PW)
            client.send_message(msg)
    except smtplib.SMTPDataError as exc:
        return exc.smtp_code, exc.smtp_error.decode()
    return 250, ""


@pytest.mark.parametrize("route", ["in-reply-to", "nonce-address"])
async def test_a_senders_approve_is_refused_and_the_action_stays_held(
    harness: Harness, fake_openai: FakeOpenAI, route: str
) -> None:
    async with approvals_with_cron(harness) as approvals:
        _, request = await _held(approvals, fake_openai)
        messages = await count(harness.store, "messages")
        by_nonce = route == "nonce-address"
        answer = reply(request, "approve", sender=CRON, in_reply_to=not by_nonce,
                       address=str(request["Reply-To"]) if by_nonce else None)
        code, text = await asyncio.to_thread(send_as_cron, approvals, answer)
    assert code == 550 and text.startswith(f"5.7.1 <{CRON}> may not decide approvals;")
    assert "approve = true in [senders.cron]" in text
    [action] = await pending(harness.store)
    assert action.status == "held" and approvals.tool.calls == []
    assert await count(harness.store, "messages") == messages  # not stored as a task either


async def test_a_sender_with_approve_true_decides(harness: Harness, fake_openai: FakeOpenAI) -> None:
    async with approvals_with_cron(harness, approve=True) as approvals:
        run_id, request = await _held(approvals, fake_openai, text("Deleted note a."))
        answer = reply(request, "approve", sender=CRON)
        assert await asyncio.to_thread(send_as_cron, approvals, answer) == (250, "")
        assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == [{"name": "a"}]
    [action] = await held_actions(harness.store)
    assert action.status == "done"
    [decision] = await harness.store.fetchall("SELECT by_address, applied FROM decisions")
    assert (decision["by_address"], decision["applied"]) == (CRON, 1)


async def test_the_owner_still_decides_with_senders_configured(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    async with approvals_with_cron(harness) as approvals:
        run_id, request = await _held(approvals, fake_openai, text("Deleted note a."))
        await approvals.submit(reply(request, "approve"))
        assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == [{"name": "a"}]


async def test_a_run_started_by_a_sender_applies_its_policy(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness = harness.with_config(senders={"cron": SenderSettings(address=CRON, policy={"add": "deny"})})
    adder, tools = Adder(), ToolRegistry()
    tools.add(adder)  # auto for the owner
    fake_openai.script([tool_call("add", {"a": 2, "b": 3}), text("Not allowed."),
                        tool_call("add", {"a": 2, "b": 3}), text("It is 5.")])

    async def task(sender: str) -> int:
        raw = mail(From=sender)
        stored = await store_task(harness.store, harness.blobs, raw, parse_mail(raw), agent=BOT,
                                  domain="pizzamail.localhost")
        assert stored.run_id is not None
        return stored.run_id

    async with harness.running(tools=tools) as runner:
        assert await harness.finish(runner, await task(CRON)) == "done"
        assert adder.calls == []
        assert await harness.finish(runner, await task(OWNER)) == "done"
    assert adder.calls == [{"a": 2, "b": 3}]
    cron_first, cron_second, owner_first, _ = fake_openai.requests
    assert not cron_first.tools  # a denied tool is not offered
    assert "policy does not allow the tool 'add'" in cron_second.messages[-1]["content"]
    assert [t["function"]["name"] for t in owner_first.tools or []] == ["add"]
