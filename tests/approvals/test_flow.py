"""Approval requests and decisions by reply, through our SMTP intake and the runner."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import smtplib
from email.message import EmailMessage

import pytest

from pizzamail.approvals.decide import decide
from pizzamail.approvals.ledger import apply_decision, pending
from pizzamail.approvals.request import request_tag
from pizzamail.store.actions import canonical_json, held_actions, transition
from pizzamail.store.approvals import rules
from tests.approvals.conftest import OWNER, Approvals, reply
from tests.fakes.openai_server import FakeOpenAI, error, text, tool_call
from tests.runner.conftest import bot_mails, plain


async def _held(approvals: Approvals, fake_openai: FakeOpenAI, *then: object) -> tuple[int, EmailMessage]:
    """A task whose model asks to delete note "a"; returns the run and its approval request."""
    run_id = await approvals.held(fake_openai, *then)
    mails = [m for _, m in await bot_mails(approvals.harness.mailbox) if m["X-Pizzamail-Approval"]]
    return run_id, mails[-1]


def _decision(mail: EmailMessage) -> dict[str, str]:
    """The latest X-Pizzamail-Decision header's fields (the first one: its kind, with an empty value)."""
    fields = [f.strip().partition("=") for f in str(mail.get_all("X-Pizzamail-Decision")[-1]).split(";")]
    return {name: value for name, _, value in fields}


def _sha256(arguments: dict[str, str]) -> str:
    return hashlib.sha256(canonical_json(arguments).encode()).hexdigest()


async def _action_folder(approvals: Approvals) -> int:
    folder = await approvals.harness.mailbox.folder("Action")
    return len(await approvals.harness.mailbox.messages(folder)) if folder else 0


async def test_the_request_says_what_why_and_how_to_answer(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    _, request = await _held(approvals, fake_openai)
    [action] = await pending(approvals.harness.store)
    assert request["Reply-To"] == f"bot+{action.nonce}@pizzamail.localhost"
    assert request["X-Pizzamail-Approval"] == f"{action.id}; nonce={action.nonce}"
    body = plain(request)
    assert "**delete_note**" in body and '"name": "a"' in body and "approve always" in body
    assert body.index("**This call:** Delete the note 'a' for good.") < body.index("**Arguments:**")
    assert await _action_folder(approvals) == 1
    assert approvals.tool.calls == []


async def test_approve_runs_the_action_once_and_the_agent_replies(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Deleted note a."))
    await approvals.submit(reply(request, "approve"))
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == [{"name": "a"}]
    assert fake_openai.requests[-1].messages[-1]["content"] == "deleted a"
    final = (await bot_mails(approvals.harness.mailbox))[-1][1]
    assert "Deleted note a." in plain(final)
    assert str(final["X-Pizzamail-Decision"]).startswith("approved; action=1; by=me@pizzamail.localhost")
    [decided] = await approvals.harness.store.fetchall("SELECT via FROM decisions WHERE applied = 1")
    assert _decision(final) == {"approved": "", "action": "1", "by": OWNER, "via": f"<{decided['via']}>",
                                "tool": "builtin/delete_note", "sha256": _sha256({"name": "a"}),
                                "at": _decision(final)["at"]}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", _decision(final)["at"])
    [action] = await held_actions(approvals.harness.store)
    assert action.status == "done"
    await approvals.swept()
    assert await _action_folder(approvals) == 0
    # the same approval again (a replay) changes nothing and is answered with the state
    await approvals.submit(reply(request, "approve"))
    await approvals.filed()
    assert approvals.tool.calls == [{"name": "a"}]
    notice = [m for _, m in await bot_mails(approvals.harness.mailbox) if "Nothing changed" in plain(m)]
    assert notice and "approved and done" in plain(notice[0])


async def test_deny_with_a_reason_reaches_the_model(approvals: Approvals, fake_openai: FakeOpenAI) -> None:
    run_id, request = await _held(approvals, fake_openai, text("OK, I kept it."))
    await approvals.submit(reply(request, "deny: I still need it"))
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == []
    told = fake_openai.requests[-1].messages[-1]["content"]
    assert "denied" in told and "I still need it" in told


async def test_free_text_is_feedback_without_running(approvals: Approvals, fake_openai: FakeOpenAI) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Understood."))
    await approvals.submit(reply(request, "Delete note b instead, please."))
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == []
    assert "Delete note b instead" in fake_openai.requests[-1].messages[-1]["content"]


async def test_edited_arguments_run_and_invalid_ones_are_explained(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Deleted b."))
    await approvals.submit(reply(request, 'Use this:\n```json\n{"name": 7}\n```\n'))
    assert await approvals.finish(run_id) == "waiting"
    approvals.runner.forget(run_id)
    explained = [m for _, m in await bot_mails(approvals.harness.mailbox) if m["X-Pizzamail-Approval"]][-1]
    assert "were not used" in plain(explained) and "not of type 'string'" in plain(explained)
    assert approvals.tool.calls == []
    await approvals.submit(reply(explained, '```json\n{"name": "b"}\n```'))
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == [{"name": "b"}]
    final = (await bot_mails(approvals.harness.mailbox))[-1][1]
    assert _decision(final)["sha256"] == _sha256({"name": "b"}) != _sha256({"name": "a"})


async def test_an_edited_call_interrupted_while_running_is_asked_about_as_edited(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, _ = await _held(approvals, fake_openai, text("Done."))
    [action] = await held_actions(approvals.harness.store)
    async with approvals.harness.store.write() as db:  # approved with edits, then a crash in the call
        await apply_decision(db, action, decide('```json\n{"name": "b"}\n```'), by=OWNER, via="test")
        await transition(db, action.id, "approved", "executing")
    approvals.runner.wake()
    assert await approvals.finish(run_id) == "waiting"
    asked = [m for _, m in await bot_mails(approvals.harness.mailbox) if m["X-Pizzamail-Approval"]][-1]
    body = plain(asked)
    assert "whether it happened is unknown" in body
    assert "**This call:** Delete the note 'b' for good." in body and '"name": "b"' in body
    assert "'a'" not in body and '"name": "a"' not in body
    assert approvals.tool.calls == []


async def test_approve_always_makes_a_rule_and_the_same_call_then_runs(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Done."))
    await approvals.submit(reply(request, "approve always"))
    assert await approvals.finish(run_id) == "done"
    [rule] = await rules(approvals.harness.store)
    assert (rule.tool, json.loads(rule.arguments)) == ("delete_note", {"name": "a"})
    fake_openai.script([tool_call("delete_note", {"name": "a"}), text("Done again.")])
    second = await approvals.harness.task("Again please")
    approvals.runner.wake()
    assert await approvals.finish(second) == "done"
    assert approvals.tool.calls == [{"name": "a"}, {"name": "a"}]
    # the call the rule released says so in the run's mail, with what ran and when
    final = (await bot_mails(approvals.harness.mailbox))[-1][1]
    released = _decision(final)
    assert {k: released[k] for k in ("approved-by-rule", "rule", "from-action", "tool", "sha256")} == {
        "approved-by-rule": "", "rule": str(rule.id), "from-action": "1", "tool": "builtin/delete_note",
        "sha256": _sha256({"name": "a"})}
    assert released["at"] >= rule.created_at


async def test_routing_by_plus_address_alone(approvals: Approvals, fake_openai: FakeOpenAI) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Done."))
    await approvals.submit(reply(request, "yes", address=str(request["Reply-To"]), in_reply_to=False))
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == [{"name": "a"}]


async def test_without_auth_nothing_is_decided(approvals: Approvals, fake_openai: FakeOpenAI) -> None:
    _, request = await _held(approvals, fake_openai)
    with pytest.raises(smtplib.SMTPException):
        await approvals.submit(reply(request, "approve"), login=False)
    [action] = await held_actions(approvals.harness.store)
    assert action.status == "held"


async def test_two_approvals_racing_run_the_action_once(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Done."))
    await asyncio.gather(*(approvals.submit(reply(request, "approve")) for _ in range(4)))
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == [{"name": "a"}]
    decided = await approvals.harness.store.fetchall("SELECT applied FROM decisions")
    assert sorted(r["applied"] for r in decided) == [0, 0, 0, 1]


async def test_deleting_the_request_from_action_tells_the_agent_it_was_ignored(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, _ = await _held(approvals, fake_openai, text("Fine, left alone."))
    mailbox = approvals.harness.mailbox
    folder = await mailbox.folder("Action")
    assert folder is not None
    await mailbox.expunge(folder, [row.uid for row in await mailbox.messages(folder)])
    await approvals.swept()
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == []
    assert "ignored" in fake_openai.requests[-1].messages[-1]["content"]


async def test_a_request_we_took_out_of_action_is_not_taken_for_a_deleted_one(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    # approved: Action no longer shows the request; the release then finds no relay (or invalid
    # edits) and puts the action back to held until the new request is committed. A look at Action
    # in that gap must not read our own removal as the user deleting the request.
    await _held(approvals, fake_openai)
    [action] = await held_actions(approvals.harness.store)
    async with approvals.harness.store.write() as db:
        assert await transition(db, action.id, "held", "approved")
    await approvals.swept()
    assert await _action_folder(approvals) == 0
    async with approvals.harness.store.write() as db:
        assert await transition(db, action.id, "approved", "held")
    await approvals.swept()
    [action] = await held_actions(approvals.harness.store)
    assert action.status == "held"
    assert await _action_folder(approvals) == 1


async def test_a_decision_from_a_non_approver_is_refused(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    _, request = await _held(approvals, fake_openai)
    assert approvals.harness.config.approvers == frozenset({"me@pizzamail.localhost"})
    with pytest.raises(smtplib.SMTPDataError) as refused:
        await approvals.submit(reply(request, "approve", sender="other@pizzamail.localhost"))
    assert refused.value.smtp_code == 550 and b"not an approver" in refused.value.smtp_error
    [action] = await held_actions(approvals.harness.store)
    assert action.status == "held"


@pytest.mark.parametrize("words", ["yes, but change the recipient first", "approve? what does this do",
                                   "Okay... actually no."])
async def test_a_reply_that_only_starts_like_an_approval_runs_nothing(
    approvals: Approvals, fake_openai: FakeOpenAI, words: str
) -> None:
    run_id, request = await _held(approvals, fake_openai, text("I'll ask again."))
    await approvals.submit(reply(request, words))
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == []
    told = fake_openai.requests[-1].messages[-1]["content"]
    assert "not a plain approval" in told and words in told
    [action] = await held_actions(approvals.harness.store)
    assert action.status == "feedback"


async def test_a_reply_with_nothing_to_read_keeps_the_action_waiting_and_says_so(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    _, request = await _held(approvals, fake_openai)
    await approvals.submit(reply(request, "> approve\n> yes\n"))
    await approvals.filed()
    [action] = await held_actions(approvals.harness.store)
    assert action.status == "held" and approvals.tool.calls == []
    mails = [plain(m) for _, m in await bot_mails(approvals.harness.mailbox)]
    notice = [body for body in mails if "Nothing changed" in body]
    assert notice and "no words of your own" in notice[0] and "`approve` on its own" in notice[0]


async def test_a_run_that_fails_after_its_approved_call_still_records_the_decision(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, request = await _held(approvals, fake_openai, error(400, "bad request"))
    await approvals.submit(reply(request, "approve"))
    assert await approvals.finish(run_id) == "failed"
    assert approvals.tool.calls == [{"name": "a"}]
    final = (await bot_mails(approvals.harness.mailbox))[-1][1]
    assert final["X-Pizzamail-Kind"] == "error"
    assert _decision(final)["sha256"] == _sha256({"name": "a"})


def _base_subject(subject: str) -> str:
    """RFC 5256 base subject (what subject-threading clients compare): without reply/forward
    prefixes and leading [blobs], repeated."""
    prefix = re.compile(r"^\s*((re|fwd?)\s*(\[[^\]]*\])?\s*:|\[[^\]]*\](?=\s*\S))\s*", re.IGNORECASE)
    while (found := prefix.match(subject)) is not None:
        subject = subject[found.end():]
    return subject.strip().lower()


async def test_the_request_subject_says_what_will_run_and_keeps_the_thread(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Deleted note a."))
    assert request["Subject"] == '[Approve? delete_note "a"] Re: Summarise issues'
    task = (await approvals.harness.store.fetchone("SELECT message_id, subject FROM messages"
                                                   " WHERE kind = 'task'"))
    assert _base_subject(str(request["Subject"])) == _base_subject(task["subject"]) == "summarise issues"
    assert f"<{task['message_id']}>" in str(request["References"])
    # a client's reply to it ("Re: [Approve? …] Re: …") still decides, and the answer is back on
    # the thread's own subject
    await approvals.submit(reply(request, "approve"))
    assert await approvals.finish(run_id) == "done"
    final = (await bot_mails(approvals.harness.mailbox))[-1][1]
    assert final["Subject"] == "Re: Summarise issues"


def test_the_subject_names_the_main_target_shortly() -> None:
    spec = {"type": "object", "properties": {"body": {"type": "string"}, "to": {"type": "string"}},
            "required": ["to", "body"]}
    assert request_tag("draft_email", {"body": "Hi", "to": "alice@example.org"}, spec) == (
        'Approve? draft_email "alice@example.org"')
    assert request_tag("x: y", {"n": 3, "path": "a]b [c]\n" + "z" * 80}, None, retry=True) == (
        'Retry? x: y "a)b (c) ' + "z" * 31 + '…"')
    assert request_tag("ping", {}, None) == "Approve? ping"


async def test_edited_arguments_in_an_html_only_reply_run_as_an_edit(
    approvals: Approvals, fake_openai: FakeOpenAI
) -> None:
    run_id, request = await _held(approvals, fake_openai, text("Deleted b."))
    answer = reply(request, "")
    # Thunderbird's HTML composer: the block without fences, indented with no-break spaces
    answer.set_content('<div>{<br>&nbsp; "name": "b"<br>}</div><div class="moz-cite-prefix">On Mon,'
                       ' Pizza Bot wrote:</div><blockquote type="cite">approve</blockquote>', subtype="html")
    await approvals.submit(answer)
    assert await approvals.finish(run_id) == "done"
    assert approvals.tool.calls == [{"name": "b"}]
