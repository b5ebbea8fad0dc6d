"""Approvals, crashed at exact moments (:mod:`tests.e2e.crash`): the Action copy of a request, the
release of a decided call (before the tool, after it, after its result) and a call a standing rule
released. Whatever the moment, a held action runs at most once, and only once it was approved."""

from __future__ import annotations

import imaplib
import smtplib
import socket
from collections.abc import Iterator
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import make_msgid
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import Envelope

from tests.e2e.crash import CRASHED
from tests.e2e.harness import OWNER, Served, task_mail
from tests.e2e.test_approvals import _action_status, _lines, _reply, _request
from tests.e2e.test_roundtrip import fetch_all
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

#: several restarts of serve each, 10-20 s a test
pytestmark = pytest.mark.slow


def _count(served: Served, folder: str) -> int:
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        imap.login("me", served.password)
        _, data = imap.select(folder, readonly=True)
        return int(data[0] or 0)


def _delete_from_action(served: Served) -> None:
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        imap.login("me", served.password)
        imap.select("Action")
        imap.store("1:*", "+FLAGS", "(\\Deleted)")
        imap.expunge()


def test_an_action_copy_filed_but_unrecorded_before_a_crash_still_means_ignore_when_deleted(
    served_ledger: Served, fake_openai: FakeOpenAI, ledger: object
) -> None:
    fake_openai.script([tool_call("ledger__pay", {"payee": "bob", "amount": 5}), text("Did not pay Bob.")])
    served = served_ledger.start(crash_after="pizzamail.mailbox:Mailbox.deliver~name='Action'")
    served.send(task_mail("Pay Bob 5"))
    assert served.stop(None) == CRASHED

    served.start()
    assert _count(served, "Action") == 1
    _delete_from_action(served)
    served.wait_for("run 1 done")
    assert _action_status(served) == "ignored"
    assert "ignored this request" in str(fake_openai.requests[-1].messages[-1]["content"])
    assert _count(served, "Action") == 0


def _replies(served: Served) -> list[str]:
    """The plain text of every bot mail in INBOX that is not an approval request."""
    return [str(m.get_body(("plain",)).get_content())  # type: ignore[union-attr]
            for _, m in fetch_all(served) if m["X-Pizzamail-Run"] and not m["X-Pizzamail-Approval"]]


def _waiting(served: Served, fake_openai: FakeOpenAI, call: dict[str, object], answer: str,
             *, tool: str = "ledger__pay") -> Served:
    """A served run waiting for the approval of ``call``; the model then answers ``answer``."""
    fake_openai.script([tool_call(tool, call), text(answer)])
    served.start()
    served.send(task_mail("Go ahead"))
    served.wait_for("run 1 waiting")
    return served


def _approve_and_crash(served: Served, *, after: str) -> None:
    """Restart ``served`` to crash right after ``after`` returns, approve its request, and see it crash."""
    served.stop()
    served.start(crash_after=after)
    served.send(_reply(_request(served), "approve"))
    assert served.stop(None) == CRASHED


def test_a_decision_committed_before_its_250_runs_once_and_its_retry_changes_nothing(
    served_ledger: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    served = _waiting(served_ledger, fake_openai, {"payee": "bob", "amount": 5}, "Paid Bob 5.")
    served.stop()
    served.start(crash_after="pizzamail.approvals.service:Approvals.decide")
    approval = _reply(_request(served), "approve")
    with pytest.raises(smtplib.SMTPServerDisconnected):
        served.send(approval)
    assert served.stop(None) == CRASHED
    assert _lines(ledger) == []

    served.start()
    served.wait_for("run 1 done")
    served.send(approval)  # the client sends again what got no answer: the same Message-ID
    assert _lines(ledger) == ["bob 5"]
    [reply] = _replies(served)
    assert "Paid Bob 5." in reply


def test_a_crash_after_a_non_idempotent_call_asks_and_never_repeats_it(
    served_ledger: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    served = _waiting(served_ledger, fake_openai, {"payee": "bob", "amount": 5}, "Paid Bob 5.")
    _approve_and_crash(served, after="pizzamail.tools:Toolbox.call")
    assert _lines(ledger) == ["bob 5"]

    served.start()
    served.wait_for("run 1 waiting")
    assert _action_status(served) == "unknown"
    served.send(_reply(_request(served), "skip"))
    served.wait_for("run 1 done")
    assert _lines(ledger) == ["bob 5"]
    assert len(_replies(served)) == 1


def test_a_crash_after_an_idempotent_call_runs_it_again_and_finishes(
    served_ledger: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    served = _waiting(served_ledger, fake_openai, {"amount": 50}, "Limit set.", tool="ledger__set_limit")
    _approve_and_crash(served, after="pizzamail.tools:Toolbox.call")

    served.start()
    served.wait_for("run 1 done")
    assert _lines(ledger) == ["limit 50", "limit 50"]  # idempotent: a second call changes nothing
    assert _action_status(served) == "done"
    assert len(_replies(served)) == 1


def test_a_crash_after_the_result_is_recorded_replies_once_without_calling_again(
    served_ledger: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    served = _waiting(served_ledger, fake_openai, {"payee": "bob", "amount": 5}, "Paid Bob 5.")
    _approve_and_crash(served, after="pizzamail.approvals.release:_record")
    assert _action_status(served) == "done"

    served.start()
    served.wait_for("run 1 done")
    assert _lines(ledger) == ["bob 5"]
    [reply] = [m for _, m in fetch_all(served) if m["X-Pizzamail-Decision"] and not m["X-Pizzamail-Approval"]]
    assert "Paid Bob 5." in str(reply.get_body(("plain",)).get_content())  # type: ignore[union-attr]


def test_a_call_a_standing_rule_released_is_not_repeated_after_a_crash_mid_call(
    served_ledger: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    pay = {"payee": "bob", "amount": 5}
    served = _waiting(served_ledger, fake_openai, pay, "Paid Bob 5.")
    served.send(_reply(_request(served), "approve always"))
    served.wait_for("run 1 done")
    served.stop()
    fake_openai.script([tool_call("ledger__pay", pay)], then=text("Done with Bob."))
    served.start(crash_after="pizzamail.tools:Toolbox.call")
    served.send(task_mail("Pay Bob 5 again"))  # the rule lets it run without asking
    assert served.stop(None) == CRASHED
    assert _lines(ledger) == ["bob 5", "bob 5"]

    served.start()
    served.wait_for("run 2 waiting")  # whether the payment happened is unknown: asked, not repeated
    asked = _request(served)
    assert "whether it happened is unknown" in str(asked.get_body(("plain",)).get_content())  # type: ignore[union-attr]
    served.send(_reply(asked, "skip"))
    served.wait_for("run 2 done")
    assert _lines(ledger) == ["bob 5", "bob 5"]
    final = [m for _, m in fetch_all(served) if m["X-Pizzamail-Run"] and "Done with Bob." in str(
        m.get_body(("plain",)).get_content())]  # type: ignore[union-attr]
    assert len(final) == 1
    assert "approved-by-rule" in " ".join(final[0].get_all("X-Pizzamail-Decision") or [])


class _Relay:
    """The outside world's SMTP relay: records every mail it is given."""

    def __init__(self) -> None:
        self.received: list[bytes] = []

    async def handle_DATA(self, server: object, session: object, envelope: Envelope) -> str:
        self.received.append(bytes(envelope.original_content or b""))
        return "250 2.0.0 relayed"


@pytest.fixture
def relay() -> Iterator[tuple[_Relay, int]]:
    with socket.socket() as probe:  # the Controller needs its port up front
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    recorder = _Relay()
    controller = Controller(recorder, hostname="127.0.0.1", port=port)
    controller.start()
    yield recorder, port
    controller.stop()


def _draft(served: Served) -> bytes:
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        imap.login("me", served.password)
        imap.select("Drafts", readonly=True)
        _, data = imap.fetch("1", "(BODY.PEEK[])")
        return bytes(data[0][1])  # type: ignore[index]


def _edited(draft: bytes) -> bytes:
    """The draft as a mail client sends it once the user changed it: new text, a new Message-ID."""
    msg = message_from_bytes(draft, policy=SMTP_POLICY)
    assert isinstance(msg, EmailMessage)
    msg.replace_header("Message-ID", make_msgid(domain="client.example"))
    msg.set_content("One?\n")
    return msg.as_bytes()


def test_a_draft_relayed_just_before_a_crash_is_asked_about_not_sent_twice(
    served: Served, fake_openai: FakeOpenAI, relay: tuple[_Relay, int]
) -> None:
    recorder, port = relay
    with (served.home / "config.toml").open("a") as config:
        config.write(f'\n[relay]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n')
    fake_openai.script([tool_call("draft_email", {"to": "alice@example.org", "subject": "Lunch",
                                                  "body": "Noon?"}), text("Sent or not, done.")])
    served.start()
    served.send(task_mail("Ask Alice about lunch"))
    served.wait_for("run 1 waiting")
    draft = _draft(served)
    served.stop()
    served.start(crash_after="pizzamail.approvals.outbox:Outbox.send")
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=10) as client:  # sending the draft approves it
        client.login("me", served.password)
        client.sendmail(OWNER, ["alice@example.org"], _edited(draft))
    assert served.stop(None) == CRASHED
    assert len(recorder.received) == 1 and b"One?" in recorder.received[0]

    served.start()
    served.wait_for("run 1 waiting")
    assert _action_status(served) == "unknown"
    served.send(_reply(_request(served), "skip"))
    served.wait_for("run 1 done")
    assert len(recorder.received) == 1


@pytest.mark.parametrize("moment", [
    "pizzamail.mailbox.maildir:write_all~.Drafts')",  # the held draft's file is in Drafts, not indexed
    "pizzamail.mailbox.maildir:write_all~.Action')",  # the request's copy is in Action, not indexed
])
def test_a_draft_and_a_request_copy_cut_off_before_their_index_are_filed_once(
    served: Served, fake_openai: FakeOpenAI, moment: str
) -> None:
    fake_openai.script([tool_call("draft_email", {"to": "alice@example.org", "subject": "Lunch",
                                                  "body": "Noon?"}), text("Not sent, then.")])
    served.start(crash_after=moment)
    served.send(task_mail("Ask Alice about lunch"))
    assert served.stop(None) == CRASHED

    served.start()
    assert (_count(served, "INBOX"), _count(served, "Drafts"), _count(served, "Action")) == (2, 1, 1)
    _delete_from_action(served)  # the copy counts as delivered: deleting it ignores the draft
    served.wait_for("run 1 done")
    assert _action_status(served) == "ignored"
    served.stop()
    served.start()
    assert (_count(served, "INBOX"), _count(served, "Drafts"), _count(served, "Action")) == (3, 1, 0)
