"""Built-in tools and skills in real runs with the scripted model."""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import SMTP
from email.utils import make_msgid
from pathlib import Path

from pizzamail.intake.tasks import store_task
from pizzamail.mail.parse import parse_mail
from pizzamail.store.actions import held_actions
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.mailcorpus import deep_rfc822, multipart, text_part
from tests.runner.conftest import Harness, bot_mails, plain
from tests.tools.conftest import with_tools


async def task_with_attachment(harness: Harness, body: str, name: str, data: bytes, kind: str) -> int:
    msg = EmailMessage(policy=SMTP)
    msg["From"], msg["To"], msg["Subject"] = "me@pizzamail.localhost", "bot@pizzamail.localhost", "Read it"
    msg["Message-ID"] = make_msgid(domain="client.example")
    msg.set_content(body)
    maintype, subtype = kind.split("/")
    msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    raw = msg.as_bytes()
    stored = await store_task(harness.store, harness.blobs, raw, parse_mail(raw),
                              agent=harness.config.agent.address, domain=harness.config.domain)
    assert stored.run_id is not None
    return stored.run_id


async def test_attachments_are_listed_and_read_as_text(harness: Harness, fake_openai: FakeOpenAI) -> None:
    run_id = await task_with_attachment(harness, "Summarise the attached file", "minutes.txt",
                                        b"Decided: ship on Friday.\n", "text/plain")
    fake_openai.script([tool_call("read_attachment", {}),
                        tool_call("read_attachment", {"name": "minutes.txt"}, call_id="call_2"),
                        text("You decided to ship on Friday.")])
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    listing = fake_openai.requests[1].messages[-1]["content"]
    assert "1. minutes.txt (text/plain, 25 bytes)" in listing
    assert fake_openai.requests[2].messages[-1]["content"] == "Decided: ship on Friday.\n"


async def test_a_mail_attached_950_levels_deep_is_read_not_crashed_on(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    attached = b'Content-Type: message/rfc822\r\nContent-Disposition: attachment; filename="deep.eml"\r\n\r\n'
    raw = multipart("zqouter", text_part("zqouter"), attached + deep_rfc822("zqinner", 950))
    stored = await store_task(harness.store, harness.blobs, raw, parse_mail(raw),
                              agent=harness.config.agent.address, domain=harness.config.domain)
    assert stored.run_id is not None
    fake_openai.script([tool_call("read_attachment", {"name": "deep.eml"}), text("Read it.")])
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, stored.run_id) == "done"
    result = fake_openai.requests[1].messages[-1]["content"]
    assert "Subject: deep zqinner" in result and "more than 100 levels deep" in result


async def test_a_written_file_is_attached_to_the_reply(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([tool_call("write_file", {"name": "report.md", "content": "# Report\nAll good.\n"}),
                        text("The report is attached.")])
    run_id = await harness.task("Write a report")
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    [(_, mail)] = await bot_mails(harness.mailbox)
    [attachment] = list(mail.iter_attachments())
    assert attachment.get_filename() == "report.md"
    # text parts travel with CRLF line ends
    assert attachment.get_content().replace("\r\n", "\n") == "# Report\nAll good.\n"
    assert "The report is attached." in plain(mail)


async def test_write_file_refuses_paths_outside_the_workspace(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([tool_call("write_file", {"name": "../escape.txt", "content": "x"}),
                        text("Could not.")])
    run_id = await harness.task("Escape")
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert "not a plain file name" in fake_openai.requests[1].messages[-1]["content"]
    assert not (harness.home.root / "workspaces" / "escape.txt").exists()


async def test_post_progress_sends_a_progress_mail_in_the_thread(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([tool_call("post_progress", {"text": "Half way there."}), text("Finished.")])
    run_id = await harness.task("A long task")
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    mails = await bot_mails(harness.mailbox)
    assert [m["X-Pizzamail-Kind"] for _, m in mails] == ["progress", "reply"]
    progress, reply = mails[0][1], mails[1][1]
    assert "Half way there." in plain(progress)
    assert progress["In-Reply-To"] == reply["In-Reply-To"]  # both in the task's thread


async def test_draft_email_is_always_held_even_when_a_rule_says_auto(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    args = {"to": "boss@example.com", "subject": "Late", "body": "I will be late."}
    fake_openai.script([tool_call("draft_email", args)])
    run_id = await harness.task("Tell my boss I'm late")
    async with harness.running(**with_tools(harness, rules={"*": "auto"})) as runner:
        assert await harness.finish(runner, run_id) == "waiting"
    [action] = await held_actions(harness.store, run_id=run_id)
    assert (action.tool, action.server, action.parsed_arguments) == ("draft_email", "builtin", args)
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "draft_email" in plain(mail) and "boss@example.com" in plain(mail)


async def test_remember_and_recall_across_threads(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([tool_call("remember", {"text": "The user prefers metric units."}), text("Noted."),
                        tool_call("recall", {"query": "units"}, call_id="call_2"), text("Metric.")])
    first = await harness.task("Remember: metric units", subject="Prefs")
    async with harness.running(**with_tools(harness)) as runner:
        assert await harness.finish(runner, first) == "done"
        second = await harness.task("Which units do I like?", subject="Another thread")
        assert await harness.finish(runner, second) == "done"
    assert "The user prefers metric units." in fake_openai.requests[3].messages[-1]["content"]
    memory = (harness.home.root / "memory.md").read_text()
    assert "The user prefers metric units." in memory


async def test_a_skill_is_in_the_catalog_and_its_body_is_delivered(
    harness: Harness, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    skills = tmp_path / "skills"
    folder = skills / "release-notes"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Write release notes. Use when asked for a changelog.\n---\n"
        "# Release notes\nGroup changes under Added, Fixed, Removed. See references/style.md.\n")
    (folder / "references" / "style.md").write_text("Past tense, no emoji.\n")
    fake_openai.script([tool_call("activate_skill", {"name": "release-notes"}),
                        tool_call("read_skill_file", {"name": "release-notes", "path": "references/style.md"},
                                  call_id="call_2"),
                        tool_call("read_skill_file", {"name": "release-notes", "path": "../../secret"},
                                  call_id="call_3"),
                        text("Here are the notes.")])
    run_id = await harness.task("Write a changelog")
    async with harness.running(**with_tools(harness, skills=skills)) as runner:
        assert await harness.finish(runner, run_id) == "done"
    system = fake_openai.requests[0].messages[0]["content"]
    assert "<name>release-notes</name>" in system and "Use when asked for a changelog." in system
    assert "Group changes under" not in system  # the body only comes on activation
    body = fake_openai.requests[1].messages[-1]["content"]
    assert body.startswith('<skill_content name="release-notes">')
    assert "Group changes under Added, Fixed, Removed." in body and "references/style.md" in body
    assert "---" not in body.split("</skill_content>")[0]  # front matter stripped
    assert fake_openai.requests[2].messages[-1]["content"] == "Past tense, no emoji.\n"
    assert "inside the skill's folder" in fake_openai.requests[3].messages[-1]["content"]
