"""A trigger's task mail is in INBOX while its run works, not only once some run finishes.

The model holds its answer until the test opens the gate, so the run is still working while the
IMAP client waits for the task mail."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import aioimaplib
import httpx

from pizzamail.triggers.signatures import sign
from tests.e2e.harness import SECRET, Served
from tests.e2e.test_roundtrip import connect, fetch_all, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, gated, text


def _post(served: Served, body: bytes) -> httpx.Response:
    stamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "X-Pizzamail-Timestamp": stamp,
               "X-Pizzamail-Delivery": "d1", "X-Pizzamail-Signature": sign(SECRET, stamp, body)}
    return httpx.post(f"http://127.0.0.1:{served.http}/hooks/deploys", content=body, headers=headers,
                      timeout=10)


async def _task_alone_then_reply(served: Served, client: aioimaplib.IMAP4, gate: threading.Event,
                                 source: str) -> None:
    """The task mail arrives while the model holds its answer; the reply once it gives it."""
    try:
        await idle_until_exists(client, 1)
        await asyncio.to_thread(served.wait_for, "run 1 started")
        [(_, task)] = await asyncio.to_thread(fetch_all, served)  # no reply: the model is held
        assert task["X-Pizzamail-Source"] == source
    finally:
        gate.set()
    await idle_until_exists(client, 2)
    await client.logout()


async def test_a_webhook_task_is_in_inbox_while_its_run_works(
    served_hook: Served, fake_openai: FakeOpenAI
) -> None:
    gate = threading.Event()
    fake_openai.script([gated(text("Deploy 3.0 looks healthy."), gate)])
    served = served_hook.start()
    client = await connect(served)
    accepted = await asyncio.to_thread(_post, served, json.dumps({"version": "3.0"}).encode())
    assert accepted.status_code == 202, accepted.text
    await _task_alone_then_reply(served, client, gate, "hook:deploys")


async def test_a_schedule_task_run_by_another_process_is_in_inbox_while_its_run_works(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    gate = threading.Event()
    fake_openai.script([gated(text("The news, summarised."), gate)])
    served.start()
    client = await connect(served)
    await asyncio.to_thread(served.cli, "schedule", "add", "news", "--when", "every day at 3am",
                            "--tz", "UTC", "--prompt", "Summarise the news")
    await asyncio.to_thread(served.cli, "schedule", "run", "news")
    await _task_alone_then_reply(served, client, gate, "schedule:news (by hand)")
