"""Triggers against the real served process: a signed webhook, `schedule add` + `schedule run` from
other processes, and a schedule the agent sets up once the owner approves it by mail."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from email.message import EmailMessage

import httpx

from pizzamail.triggers.signatures import sign, sign_standard
from tests.e2e.harness import SECRET, WHSEC, Served, task_mail
from tests.e2e.test_roundtrip import connect, fetch_all, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, text, tool_call


def _post(served: Served, body: bytes, *, secret: str, delivery: str) -> httpx.Response:
    stamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "X-Pizzamail-Timestamp": stamp,
               "X-Pizzamail-Delivery": delivery, "X-Pizzamail-Signature": sign(secret, stamp, body)}
    return httpx.post(f"http://127.0.0.1:{served.http}/hooks/deploys", content=body, headers=headers,
                      timeout=10)


def _post_standard(served: Served, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{served.http}/hooks/billing", content=body, headers=headers,
                      timeout=10)


def _post_legacy(served: Served, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{served.http}/hooks/deploys", content=body, headers=headers,
                      timeout=10)


def _threads(served: Served) -> int:
    with sqlite3.connect(served.home / "state.db") as db:
        return int(db.execute("SELECT count(*) FROM threads").fetchone()[0])


def _plain(msg: EmailMessage) -> str:
    body = msg.get_body(("plain",))
    assert body is not None
    return str(body.get_content())


async def test_a_signed_webhook_gets_a_reply_in_inbox_and_a_bad_signature_nothing(
    served_hook: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Deploy 1.2 looks healthy.")])
    served = served_hook.start()
    body = json.dumps({"version": "1.2"}).encode()
    forged = await asyncio.to_thread(_post, served, body, secret="not-the-secret", delivery="d0")
    assert forged.status_code == 401
    assert _threads(served) == 0
    client = await connect(served)
    accepted = await asyncio.to_thread(_post, served, body, secret=SECRET, delivery="d1")
    assert accepted.status_code == 202, accepted.text
    await idle_until_exists(client, 2)
    await client.logout()
    [(_, task), (_, reply)] = fetch_all(served)
    assert task["X-Pizzamail-Source"] == "hook:deploys"
    assert reply["X-Pizzamail-Thread"] == str(accepted.json()["thread"])
    assert reply["In-Reply-To"] == task["Message-ID"]
    assert "Deploy 1.2 looks healthy." in _plain(reply)
    assert "Deploy 1.2 finished: check it" in str(fake_openai.requests[0].messages[-1]["content"])
    assert _threads(served) == 1


async def test_a_standard_webhook_gets_a_reply_and_no_replay_runs_after_a_restart(
    served_hook: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Invoice 7 is paid: nothing to do."), text("Deploy 2.0 looks healthy.")])
    served = served_hook.start()
    body = json.dumps({"type": "invoice.paid", "data": {"id": 7}}).encode()
    stamp = str(int(time.time()))
    standard = {"Content-Type": "application/json", "webhook-id": "msg_7", "webhook-timestamp": stamp,
                "webhook-signature": sign_standard(WHSEC, "msg_7", stamp, body)}
    client = await connect(served)
    accepted = await asyncio.to_thread(_post_standard, served, body, standard)
    assert accepted.status_code == 202, accepted.text
    await idle_until_exists(client, 2)
    await client.logout()
    [(_, task), (_, reply)] = fetch_all(served)
    assert task["X-Pizzamail-Source"] == "hook:billing" and reply["In-Reply-To"] == task["Message-ID"]
    assert "Invoice 7 is paid" in _plain(reply)
    assert "invoice.paid: 7" in str(fake_openai.requests[0].messages[-1]["content"])
    deploy, stamp = json.dumps({"version": "2.0"}).encode(), str(int(time.time()))
    legacy = {"Content-Type": "application/json", "X-Pizzamail-Timestamp": stamp,
              "X-Pizzamail-Delivery": "d1", "X-Pizzamail-Signature": sign(SECRET, stamp, deploy)}
    assert (await asyncio.to_thread(_post_legacy, served, deploy, legacy)).status_code == 202
    served.wait_for("run 2 done")

    served.stop()
    served.start()
    again = await asyncio.to_thread(_post_standard, served, body, standard)
    assert again.status_code == 409 and "signature was used before" in again.json()["error"]
    # today's scheme does not sign the delivery id: the signature is what may not come twice
    renamed = await asyncio.to_thread(_post_legacy, served, deploy, {**legacy, "X-Pizzamail-Delivery": "d2"})
    assert renamed.status_code == 409 and "signature was used before" in renamed.json()["error"]
    assert _threads(served) == 2


def test_schedule_run_twice_from_the_cli_replies_in_one_thread(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("First summary."), text("Second summary.")])
    served.start()
    added = served.cli("schedule", "add", "news", "--when", "every day at 3am", "--tz", "UTC",
                       "--prompt", "Summarise the news")
    assert "every day at 03:00 (UTC), next " in added
    assert "queued in thread 1" in served.cli("schedule", "run", "news")
    served.wait_for("run 1 done")
    served.cli("schedule", "run", "news")
    served.wait_for("run 2 done")

    messages = [m for _, m in fetch_all(served)]
    replies = [m for m in messages if m["X-Pizzamail-Run"]]
    assert [_plain(r).splitlines()[0] for r in replies] == ["First summary.", "Second summary."]
    assert {r["X-Pizzamail-Thread"] for r in replies} == {"1"}
    tasks = [m for m in messages if m["X-Pizzamail-Source"]]
    assert [t["X-Pizzamail-Source"] for t in tasks] == ["schedule:news (by hand)"] * 2
    assert tasks[1]["In-Reply-To"] == replies[0]["Message-ID"]
    assert tasks[0]["Message-ID"] in replies[1]["References"]
    assert replies[0]["Message-ID"] in replies[1]["References"]
    [shown] = json.loads(served.cli("schedule", "list", "--json"))
    assert (shown["thread_id"], shown["last_fired_at"]) == (1, None)  # the cron times are untouched


def test_the_agent_schedules_a_task_once_the_owner_approves(served: Served, fake_openai: FakeOpenAI) -> None:
    served.env["TZ"] = "Europe/Berlin"  # the machine's zone is the schedule's default
    asked = {"name": "x-summary", "when": "every Monday at 9", "prompt": "Summarise X"}
    fake_openai.script([
        tool_call("schedule_task", asked),
        text("Done: every Monday at 9 I will summarise X here."),
    ])
    served.start()
    served.send(task_mail("Every Monday at 9, summarise X", subject="Weekly X"))
    served.wait_for("run 1 waiting")
    [request] = [m for _, m in fetch_all(served) if m["X-Pizzamail-Approval"]]
    assert "schedule_task" in _plain(request)
    assert json.loads(served.cli("schedule", "list", "--json")) == []
    served.send(task_mail("approve", subject="Re: " + str(request["Subject"]), reply_to=request))
    served.wait_for("run 1 done")

    [schedule] = json.loads(served.cli("schedule", "list", "--json"))
    assert (schedule["name"], schedule["source"], schedule["cron"], schedule["tz"]) == (
        "x-summary", "agent", "0 9 * * 1", "Europe/Berlin")
    assert schedule["thread_id"] == int(request["X-Pizzamail-Thread"])
    assert "scheduled x-summary: next occurrence" in str(fake_openai.requests[-1].messages[-1]["content"])
