"""Control by reply against the served process: ``stop`` by mail and by ``pizzamail stop``, an
outsider's ``stop``, and a follow-up that waits for the working run and reaches the model without
the mail it quotes."""

from __future__ import annotations

import json
import smtplib
import threading
from collections.abc import Iterator
from email.message import EmailMessage

import pytest

from tests.e2e.harness import BOT, OWNER, Served, task_mail
from tests.e2e.test_roundtrip import connect, fetch_all, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, gated, text, tool_call

CRON = "cron@localhost"


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds the model's first answer: the run would work until the test ends (or is stopped)."""
    held = threading.Event()
    yield held
    held.set()


def _reply(to: EmailMessage, body: str) -> EmailMessage:
    return task_mail(body, subject="Re: " + str(to["Subject"]), reply_to=to)


def _kinds(served: Served) -> list[tuple[str, str]]:
    """(kind, plain text) of each bot mail in INBOX."""
    found = []
    for _, msg in fetch_all(served):
        if msg["X-Pizzamail-Kind"]:
            body = msg.get_body(("plain",))
            assert body is not None
            found.append((str(msg["X-Pizzamail-Kind"]), str(body.get_content())))
    return found


def _said_to_model(fake: FakeOpenAI) -> str:
    return json.dumps([r.messages for r in fake.requests])


def _run_status(served: Served, thread: int = 1) -> str:
    [found] = [t for t in json.loads(served.cli("threads", "--json")) if t["id"] == thread]
    return str(found["status"])


async def test_stop_by_reply_ends_the_working_run_and_never_reaches_the_model(
    served: Served, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    fake_openai.script([gated(text("A plan that took twenty seconds."), gate)], then=text("Restarted."))
    served.start()
    task = task_mail("Plan the offsite in detail")
    served.send(task)
    fake_openai.wait_requests(1)  # the run waits on the model now
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=10) as client:
        client.login("me", served.password)
        stop = _reply(task, "Stop\n\nSent from my iPhone")
        client.mail(OWNER)
        client.rcpt(BOT)
        assert client.data(stop.as_bytes()) == (250, b"2.0.0 stop recorded in thread 1")
    served.wait_for("run 1 stopped (stopped mail)", timeout=20)  # the model's answer never came
    assert _run_status(served) == "stopped"
    assert [k for k, _ in _kinds(served)] == ["stopped"]
    assert "Stopped." in _kinds(served)[0][1] and "reply to start again" in _kinds(served)[0][1]
    assert len(fake_openai.requests) == 1 and "Stop" not in _said_to_model(fake_openai)

    client = await connect(served)
    served.send(_reply(task, "stop"))  # nothing runs now: a short answer, nothing changes
    await idle_until_exists(client, 5)  # the task, the stop, "Stopped", this stop and its answer
    assert [k for k, _ in _kinds(served)] == ["stopped", "notice"]
    assert "Nothing is running" in _kinds(served)[1][1]
    assert _run_status(served) == "stopped" and len(fake_openai.requests) == 1


def test_pizzamail_stop_from_another_process(
    served: Served, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    fake_openai.script([gated(text("Never sent."), gate)])
    served.start()
    served.send(task_mail("Plan the offsite in detail"))
    fake_openai.wait_requests(1)
    assert "run 1 asked to stop" in served.cli("stop", "1")
    served.wait_for("run 1 stopped (stopped mail)", timeout=20)
    [(kind, said)] = _kinds(served)
    assert kind == "stopped" and "`pizzamail stop`" in said
    assert "nothing is running" in served.cli("stop", "1")


def test_an_outsiders_stop_is_an_ordinary_mail(
    served: Served, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    config = served.home / "config.toml"
    config.write_text(config.read_text() + f'[senders.cron]\naddress = "{CRON}"\n')
    password = served.cli("account", "password", "--sender", "cron").strip()
    fake_openai.script([gated(text("The plan."), gate), text("Stop what?")])
    served.start()
    task = task_mail("Plan the offsite in detail")
    served.send(task)
    fake_openai.wait_requests(1)
    stop = _reply(task, "stop")
    stop.replace_header("From", CRON)
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=10) as client:
        client.login("cron", password)
        assert client.send_message(stop, to_addrs=[BOT]) == {}
    gate.set()
    served.wait_for("run 2 done")
    assert [k for k, _ in _kinds(served)] == ["reply", "reply"]
    assert fake_openai.requests[1].messages[-1] == {"role": "user", "content": "stop"}


def test_a_follow_up_waits_for_the_run_and_reaches_the_model_without_the_quote(
    served: Served, fake_openai: FakeOpenAI, gate: threading.Event
) -> None:
    fake_openai.script([gated(text("Day 1: hike. Day 2: workshop."), gate), text("Added a dinner.")])
    served.start()
    task = task_mail("Plan the offsite in detail")
    served.send(task)
    fake_openai.wait_requests(1)
    quoted = "\n".join("> " + line for line in str(task.get_content()).splitlines())
    served.send(_reply(task, f"Add a team dinner on day 1.\n\nOn Mon, Me wrote:\n{quoted}\n\n-- \nMe\n"
                             "Head of Offsites"))
    gate.set()
    served.wait_for("run 2 done")
    started, done = (next(i for i, line in enumerate(served.output) if needle in line)
                     for needle in ("run 2 started", "run 1 done"))
    assert started > done  # queued behind run 1, not beside it
    follow_up = fake_openai.requests[1].messages
    assert follow_up[-1] == {"role": "user", "content": "Add a team dinner on day 1."}
    # the task is in the history once (the quote is not read again), and run 1's answer too
    assert sum("Plan the offsite" in str(m["content"]) for m in follow_up) == 1
    assert {"role": "assistant", "content": "Day 1: hike. Day 2: workshop."} in follow_up
    assert "Head of Offsites" not in json.dumps(follow_up)


def test_stop_cancels_an_mcp_call_in_flight(served_ledger: Served, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([tool_call("ledger__pay", {"payee": "block", "amount": 9}), text("Never.")])
    served = served_ledger.start()
    task = task_mail("Pay block 9")
    served.send(task)
    served.wait_for("run 1 waiting")
    [request] = [m for _, m in fetch_all(served) if m["X-Pizzamail-Approval"]]
    served.send(_reply(request, "approve"))
    served.wait_for("approved: running it")  # the MCP server's pay never returns
    served.send(_reply(task, "stop"))
    served.wait_for("run 1 stopped (stopped mail)", timeout=20)
    assert len(fake_openai.requests) == 1 and _run_status(served) == "stopped"
