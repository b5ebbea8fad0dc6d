"""Approvals against the real served process: SMTP decisions, an MCP tool counted on its own side,
and ``kill -9`` at the steps of the release."""

from __future__ import annotations

import signal
import sqlite3
from email.message import EmailMessage
from pathlib import Path

from click.testing import CliRunner

from pizzamail.cli import cli
from tests.e2e.harness import Served, task_mail
from tests.e2e.test_roundtrip import fetch_all
from tests.fakes.openai_server import FakeOpenAI, text, tool_call


def _request(served: Served) -> EmailMessage:
    found = [m for _, m in fetch_all(served) if m["X-Pizzamail-Approval"]]
    assert found, "no approval request in INBOX"
    return found[-1]


def _reply(request: EmailMessage, body: str) -> EmailMessage:
    return task_mail(body, subject="Re: " + str(request["Subject"]), reply_to=request)


def _lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def _action_status(served: Served) -> str:
    with sqlite3.connect(served.home / "state.db") as db:
        row = db.execute("SELECT status FROM held_actions").fetchone()
    return str(row[0])


def test_approve_by_mail_runs_once_even_across_a_kill(
    served_ledger: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    fake_openai.script([tool_call("ledger__pay", {"payee": "bob", "amount": 5}), text("Paid Bob 5.")])
    served = served_ledger.start()
    served.send(task_mail("Pay Bob 5"))
    served.wait_for("run 1 waiting")
    request = _request(served)
    assert "ledger" in str(request.get_body(("plain",)).get_content())  # type: ignore[union-attr]
    served.send(_reply(request, "approve"))
    served.wait_for("run 1 done")
    assert _lines(ledger) == ["bob 5"]
    final = [m for _, m in fetch_all(served) if m["X-Pizzamail-Decision"]]
    assert final and "via=<" in str(final[-1]["X-Pizzamail-Decision"])
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL
    served.start()
    served.send(_reply(request, "approve"))  # a replay after the restart
    assert _lines(ledger) == ["bob 5"]
    assert _action_status(served) == "done"


def test_kill_during_a_non_idempotent_call_asks_instead_of_repeating(
    served_ledger: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    fake_openai.script([tool_call("ledger__pay", {"payee": "block", "amount": 9}), text("Skipped it.")])
    served = served_ledger.start()
    served.send(task_mail("Pay block 9"))
    served.wait_for("run 1 waiting")
    served.send(_reply(_request(served), "yes"))
    served.wait_for("approved: running it")
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL

    served.start()
    served.wait_for("run 1 waiting")
    assert _action_status(served) == "unknown"
    asked = _request(served)
    body = asked.get_body(("plain",))
    assert body is not None and "whether it happened is unknown" in str(body.get_content())
    served.send(_reply(asked, "skip"))
    served.wait_for("run 1 done")
    # the kill came after "executing" was committed; whether the call had reached the tool is
    # exactly what nobody knows, but it was never made a second time
    assert _lines(ledger) in ([], ["block 9"])
    assert "chose not to retry" in fake_openai.requests[-1].messages[-1]["content"]


def test_a_decision_committed_while_stopped_runs_once_at_start(
    served_ledger: Served, fake_openai: FakeOpenAI, ledger: Path
) -> None:
    fake_openai.script([tool_call("ledger__pay", {"payee": "eve", "amount": 1}), text("Paid Eve.")])
    served = served_ledger.start()
    served.send(task_mail("Pay Eve 1"))
    served.wait_for("run 1 waiting")
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL
    runner = CliRunner()
    listed = runner.invoke(cli, ["--home", str(served.home), "approvals", "--json"])
    assert listed.exit_code == 0 and '"payee": "eve"' in listed.output
    decided = runner.invoke(cli, ["--home", str(served.home), "approve", "1"])
    assert decided.exit_code == 0, decided.output
    assert _lines(ledger) == []
    served.start()
    served.wait_for("run 1 done")
    assert _lines(ledger) == ["eve 1"]
