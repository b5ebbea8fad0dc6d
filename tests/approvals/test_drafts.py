"""draft_email: a real draft in Drafts; sending it (edited) or replying approve relays it through a
real local SMTP relay (an aiosmtpd server on loopback: the outside world), exactly once."""

from __future__ import annotations

import asyncio
import hashlib
import smtplib
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import make_msgid

import pytest
from aiosmtpd.smtp import SMTP, Envelope, Session

from pizzamail.approvals.outbox import strip_for_relay
from pizzamail.config import RelaySettings, parse_config
from pizzamail.errors import ConfigError
from pizzamail.store.actions import held_actions
from tests.approvals.conftest import OWNER, PASSWORD, Approvals, open_approvals, reply
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import Harness, bot_mails, plain

DRAFT = {"to": "alice@example.org", "subject": "Lunch", "body": "Shall we meet at noon?"}

@dataclass
class Relay:
    """Records every mail it receives: (envelope sender, recipients, bytes)."""

    port: int = 0
    received: list[tuple[str, list[str], bytes]] = field(default_factory=list)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.received.append((str(envelope.mail_from), list(envelope.rcpt_tos),
                              bytes(envelope.original_content or b"")))
        return "250 2.0.0 relayed"

@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    recorder = Relay()

    def factory() -> SMTP:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return SMTP(recorder, hostname="relay.test")

    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    recorder.port = int(server.sockets[0].getsockname()[1])
    try:
        yield recorder
    finally:
        server.close()
        await server.wait_closed()

def _with_relay(harness: Harness, relay: Relay) -> Harness:
    return harness.with_config(relay=RelaySettings(host="127.0.0.1", port=relay.port, security="none"))

async def _held_draft(approvals: Approvals, fake_openai: FakeOpenAI) -> tuple[int, EmailMessage, bytes]:
    """A run that drafts a mail to alice; returns the run, its request and the draft's bytes."""
    fake_openai.script([tool_call("draft_email", DRAFT), text("Done: the mail went out.")])
    run_id = await approvals.harness.task("Ask Alice about lunch")
    approvals.runner.wake()
    assert await approvals.finish(run_id) == "waiting"
    approvals.runner.forget(run_id)
    request = [m for _, m in await bot_mails(approvals.harness.mailbox) if m["X-Pizzamail-Approval"]][-1]
    drafts = await _drafts(approvals)
    assert len(drafts) == 1
    return run_id, request, drafts[0]

async def _drafts(approvals: Approvals) -> list[bytes]:
    mailbox = approvals.harness.mailbox
    folder = await mailbox.folder("Drafts")
    if folder is None:
        return []
    rows = await mailbox.messages(folder)
    assert all("\\Draft" in row.flags for row in rows)
    return [await mailbox.read(folder, row) or b"" for row in rows]

def _sendmail(approvals: Approvals, recipients: list[str], raw: bytes) -> None:
    with smtplib.SMTP("127.0.0.1", approvals.port, timeout=10) as client:
        client.login("me", PASSWORD)
        client.sendmail(OWNER, recipients, raw)

def _edited(draft: bytes) -> bytes:
    """What a mail client sends after the user edited the draft: new text, a Bcc, a new Message-ID."""
    msg = message_from_bytes(draft, policy=SMTP_POLICY)
    assert isinstance(msg, EmailMessage)
    msg.replace_header("Message-ID", make_msgid(domain="client.example"))
    msg["Bcc"] = "carol@example.org"
    msg.set_content("Shall we meet at one instead?\n")
    return msg.as_bytes()

async def test_the_held_draft_is_a_real_draft(harness: Harness, fake_openai: FakeOpenAI) -> None:
    async with open_approvals(harness) as approvals:
        _, request, draft = await _held_draft(approvals, fake_openai)
    msg = message_from_bytes(draft, policy=SMTP_POLICY)
    assert msg["From"] == OWNER and msg["To"] == "alice@example.org" and msg["Subject"] == "Lunch"
    assert msg["X-Pizzamail-Approval"] == request["X-Pizzamail-Approval"]
    assert "Shall we meet at noon?" in str(msg.get_body(("plain",)).get_content())  # type: ignore[union-attr]
    assert "Drafts folder" in plain(request)

async def test_sending_the_edited_draft_approves_and_relays_it_once(
    harness: Harness, fake_openai: FakeOpenAI, relay: Relay
) -> None:
    async with open_approvals(_with_relay(harness, relay)) as approvals:
        run_id, _, draft = await _held_draft(approvals, fake_openai)
        sent = _edited(draft)
        await asyncio.to_thread(_sendmail, approvals, ["alice@example.org", "carol@example.org"], sent)
        assert await approvals.finish(run_id) == "done"
        # sent again (a client retrying, a second click): the action is done, nothing is relayed
        with pytest.raises(smtplib.SMTPDataError) as again:
            await asyncio.to_thread(_sendmail, approvals, ["alice@example.org"], _edited(draft))
        assert again.value.smtp_code == 550
        final = (await bot_mails(approvals.harness.mailbox))[-1][1]
    [(sender, rcpts, data)] = relay.received
    assert sender == OWNER and rcpts == ["alice@example.org", "carol@example.org"]
    expected = b"".join(line for line in sent.splitlines(keepends=True)
                        if not line.startswith((b"Bcc:", b"X-Pizzamail-Approval:")))
    assert data == expected == strip_for_relay(sent)
    assert b"at one instead" in data
    [action] = await held_actions(harness.store)
    assert action.status == "done" and "at one instead" in (action.approved_arguments or "")
    assert str(final["X-Pizzamail-Decision"]).startswith("approved-edited; action=1;")
    # the header proves which bytes went out: the relayed mail's own SHA-256
    assert f"; sent-sha256={hashlib.sha256(data).hexdigest()}" in str(final["X-Pizzamail-Decision"])
    assert "at one instead" in fake_openai.requests[-1].messages[-1]["content"]

async def test_a_draft_sent_under_its_own_message_id_is_relayed_once(
    harness: Harness, fake_openai: FakeOpenAI, relay: Relay
) -> None:
    """A client may keep the draft's Message-ID when it sends the draft: that is the user's send
    all the same, not a retry of a mail seen before (which would be dropped with a 250)."""
    async with open_approvals(_with_relay(harness, relay)) as approvals:
        run_id, _, draft = await _held_draft(approvals, fake_openai)
        sent = draft.replace(b"Shall we meet at noon?", b"Shall we meet at one?")
        await asyncio.to_thread(_sendmail, approvals, ["alice@example.org"], sent)
        assert await approvals.finish(run_id) == "done"
        with pytest.raises(smtplib.SMTPDataError) as again:  # the same send again relays nothing
            await asyncio.to_thread(_sendmail, approvals, ["alice@example.org"], sent)
        assert again.value.smtp_code == 550
    [(_, rcpts, data)] = relay.received
    assert rcpts == ["alice@example.org"] and b"at one?" in data

async def test_approve_reply_sends_the_original_draft(
    harness: Harness, fake_openai: FakeOpenAI, relay: Relay
) -> None:
    async with open_approvals(_with_relay(harness, relay)) as approvals:
        run_id, request, _ = await _held_draft(approvals, fake_openai)
        await approvals.submit(reply(request, "approve"))
        assert await approvals.finish(run_id) == "done"
    [(sender, rcpts, data)] = relay.received
    assert (sender, rcpts) == (OWNER, ["alice@example.org"])
    assert b"Shall we meet at noon?" in data and b"X-Pizzamail-Approval" not in data

async def test_without_a_relay_nothing_is_sent_and_the_reply_says_how(
    harness: Harness, fake_openai: FakeOpenAI, relay: Relay
) -> None:
    async with open_approvals(harness) as approvals:  # the relay runs, but is not configured
        run_id, request, _ = await _held_draft(approvals, fake_openai)
        await approvals.submit(reply(request, "approve"))
        assert await approvals.finish(run_id) == "waiting"
        explained = plain((await bot_mails(approvals.harness.mailbox))[-1][1])
        assert len(await _drafts(approvals)) == 1  # the draft stays a draft
    assert relay.received == []
    assert "[relay]" in explained and "pizzamail keys set relay" in explained
    [action] = await held_actions(harness.store)
    assert action.status == "held"

async def test_a_task_copied_to_an_outsider_is_refused(
    approvals: Approvals, relay: Relay
) -> None:
    msg = EmailMessage(policy=SMTP_POLICY)
    msg["From"], msg["To"], msg["Cc"] = OWNER, "bot@pizzamail.localhost", "bob@example.org"
    msg["Subject"], msg["Message-ID"] = "Summarise", make_msgid(domain="client.example")
    msg.set_content("Please summarise and tell Bob.")
    with pytest.raises(smtplib.SMTPDataError) as refused:
        await approvals.submit(msg)
    assert refused.value.smtp_code == 550 and b"<bob@example.org>" in refused.value.smtp_error
    assert await approvals.harness.store.fetchall("SELECT id FROM messages") == []
    # someone who may not decide is refused at RCPT already
    code, said = await asyncio.to_thread(_rcpt_as, approvals, "other@pizzamail.localhost", "bob@example.org")
    assert code == 550 and b"<bob@example.org>" in said
    assert relay.received == []


def _rcpt_as(approvals: Approvals, sender: str, recipient: str) -> tuple[int, bytes]:
    with smtplib.SMTP("127.0.0.1", approvals.port, timeout=10) as client:
        client.login("me", PASSWORD)
        client.mail(sender)
        return client.rcpt(recipient)


def test_strip_for_relay_removes_folded_bcc_and_routing_only() -> None:
    raw = (b"From: me@pizzamail.localhost\r\nBcc: a@example.org,\r\n b@example.org\r\n"
           b"X-Pizzamail-Approval: 1; nonce=abc\r\nSubject: Hi\r\n\r\nBcc: stays in the body\r\n")
    assert strip_for_relay(raw) == (b"From: me@pizzamail.localhost\r\nSubject: Hi\r\n\r\n"
                                    b"Bcc: stays in the body\r\n")


def test_relay_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match=r"relay\.security"):
        parse_config({"relay": {"host": "smtp.example.com", "security": "none"}})
    with pytest.raises(ConfigError, match=r"relay\.security"):
        parse_config({"relay": {"host": "smtp.example.com", "security": "tls"}})
    ssl_relay = {"host": "smtp.example.com", "port": 465, "security": "ssl"}
    assert parse_config({"relay": ssl_relay}).relay.configured
