"""Decisions that race, arrive late or answer an older request, through our SMTP intake: whatever
their order, a call runs only as one applied approval of it says."""

from __future__ import annotations

import asyncio
import smtplib

import pytest

from pizzamail.approvals.decide import DISAGREE
from pizzamail.store.actions import held_actions
from tests.approvals.conftest import Approvals, reply
from tests.approvals.test_flow import _held
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import bot_mails, plain


async def test_approve_and_deny_racing_decide_once_and_the_call_follows_the_one_applied(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Done."))
    await asyncio.gather(approvals.submit(reply(request, "approve")),
                         approvals.submit(reply(request, "deny: not now")))
    assert await approvals.finish(run_id) == "done"
    applied = await approvals.harness.store.fetchall("SELECT kind FROM decisions WHERE applied = 1")
    assert len(applied) == 1
    [action] = await held_actions(approvals.harness.store)
    if applied[0]["kind"] == "approve":
        assert (action.status, approvals.tool.calls) == ("done", [{"name": "a"}])
    else:
        assert (action.status, approvals.tool.calls) == ("denied", [])


async def test_approving_an_older_request_after_a_new_one_runs_neither(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    """Feedback makes the agent ask again (a new action, a new nonce): "approve" on the first
    request then changes nothing, and the second still waits for its own answer."""
    run_id, first = await _held(approvals, fake_openai, tool_call("delete_note", {"name": "b"}),
                                text("Deleted b."))
    await approvals.submit(reply(first, "Delete note b instead, please."))
    approvals.runner.wake()
    assert await approvals.finish(run_id) == "waiting"
    approvals.runner.forget(run_id)
    requests = [m for _, m in await bot_mails(approvals.harness.mailbox) if m["X-Pizzamail-Approval"]]
    second = requests[-1]
    assert second["X-Pizzamail-Approval"] != first["X-Pizzamail-Approval"]
    await approvals.submit(reply(first, "approve"))
    await approvals.filed()
    old, new = await held_actions(approvals.harness.store)
    assert (old.status, new.status, approvals.tool.calls) == ("feedback", "held", [])
    await approvals.submit(reply(second, "approve"))
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == [{"name": "b"}]


async def test_a_late_approve_after_a_standing_rule_released_the_call_runs_nothing_more(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Done."))
    await approvals.submit(reply(request, "approve always"))
    assert await approvals.finish(run_id) == "done"
    fake_openai.script([tool_call("delete_note", {"name": "a"}), text("Done again.")])
    second = await approvals.harness.task("Again please")
    approvals.runner.wake()
    assert await approvals.finish(second) == "done"
    assert approvals.tool.calls == [{"name": "a"}, {"name": "a"}]
    for words in ("approve", "approve always", "retry"):
        await approvals.submit(reply(request, words))
    await approvals.filed()
    assert approvals.tool.calls == [{"name": "a"}, {"name": "a"}]
    assert len(await held_actions(approvals.harness.store)) == 1


async def test_a_reply_whose_plain_and_html_parts_disagree_keeps_the_action_waiting(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    _, request = await _held(approvals, fake_openai)
    answer = reply(request, "deny: not this one")
    answer.add_alternative("<p>approve</p>", subtype="html")
    await approvals.submit(answer)
    await approvals.filed()
    [action] = await held_actions(approvals.harness.store)
    assert action.status == "held" and approvals.tool.calls == []
    mails = [plain(m) for _, m in await bot_mails(approvals.harness.mailbox)]
    notice = [body for body in mails if "Nothing changed" in body]
    assert notice and " ".join(DISAGREE.split()[:6]) in " ".join(notice[0].split())


async def test_a_call_id_the_model_repeats_after_an_approval_is_asked_about_again(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    """Some servers number every answer's calls from the same id: the second "call_1" is a new call,
    held for its own decision — never taken as answered by the first one's approval."""
    run_id, request = await _held(approvals, fake_openai, tool_call("delete_note", {"name": "c"}),
                                  text("Deleted a and c."))
    await approvals.submit(reply(request, "approve"))
    assert await approvals.finish(run_id) == "waiting"
    approvals.runner.forget(run_id)
    assert approvals.tool.calls == [{"name": "a"}]
    first, second = await held_actions(approvals.harness.store)
    assert (first.status, second.status, second.arguments) == ("done", "held", '{"name":"c"}')
    assert first.call_id != second.call_id
    again = [m for _, m in await bot_mails(approvals.harness.mailbox) if m["X-Pizzamail-Approval"]][-1]
    await approvals.submit(reply(again, "approve"))
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == [{"name": "a"}, {"name": "c"}]
    sent = fake_openai.requests[-1].messages
    ids = [c["id"] for m in sent if m.get("tool_calls") for c in m["tool_calls"]]
    assert len(set(ids)) == 2 and [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


async def test_a_reply_that_names_two_requests_is_refused_and_decides_neither(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    """It answers one request (In-Reply-To) but goes to another's nonce (a client that completed
    the address from an earlier reply): which call "approve" is about cannot be known."""
    _, first = await _held(approvals, fake_openai)
    _, second = await _held(approvals, fake_openai)
    crossed = reply(first, "approve", address=str(second["Reply-To"]))
    with pytest.raises(smtplib.SMTPDataError) as refused:
        await approvals.submit(crossed)
    assert refused.value.smtp_code == 550 and b"more than one approval request" in refused.value.smtp_error
    assert [a.status for a in await held_actions(approvals.harness.store)] == ["held", "held"]
    assert approvals.tool.calls == []
