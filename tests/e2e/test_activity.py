"""The Activity folder over real IMAP: an IDLE client sees a working run's status mail, and sees it
replaced (one mail per run) as the run moves on. The scripted model holds its second answer until
the test has seen the first state, so no sleep orders anything."""

from __future__ import annotations

import asyncio
import email
import email.policy
import imaplib
import json
import threading
from collections.abc import Callable

import aioimaplib

from tests.e2e.harness import Served, task_mail
from tests.e2e.test_roundtrip import _SESSIONS
from tests.fakes.openai_server import FakeOpenAI, gated, text, tool_call


def activity_subjects(served: Served) -> list[str]:
    """The subjects in Activity, sorted, read by a session of its own."""
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        imap.login("me", served.password)
        imap.select("Activity", readonly=True)
        _, data = imap.fetch("1:*", "(BODY.PEEK[HEADER])")
        return sorted(str(email.message_from_bytes(item[1], policy=email.policy.default)["Subject"])
                      for item in data if isinstance(item, tuple))


async def idle_until(client: aioimaplib.IMAP4, served: Served, wanted: Callable[[list[str]], bool],
                     within: float = 60) -> list[str]:
    """Wait in IDLE for pushes until Activity's subjects are ``wanted``; returns them."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        idle = await client.idle_start(timeout=within)
        found = await asyncio.to_thread(activity_subjects, served)  # after IDLE began: no push is missed
        if not wanted(found):
            await client.wait_server_push(timeout=max(0.1, deadline - loop.time()))
        client.idle_done()
        await asyncio.wait_for(idle, 30)
        if wanted(found):
            return found
        assert loop.time() < deadline, f"Activity shows {found}"


async def test_an_idle_client_in_activity_sees_the_run_status_mail_change(
        served: Served, fake_openai: FakeOpenAI) -> None:
    gate = threading.Event()
    fake_openai.script([tool_call("post_progress", {"text": "Found three venues."}),
                        gated(text("The lake house it is."), gate)])
    served.start()
    client = aioimaplib.IMAP4(host="127.0.0.1", port=served.imap, timeout=10)
    _SESSIONS.append(client)
    await client.wait_hello_from_server()
    assert (await client.login("me", served.password)).result == "OK"
    assert (await client.select("Activity")).result == "OK"
    try:
        await asyncio.to_thread(served.send, task_mail("Find a venue for the offsite."))
        # the status mail and the copy of the progress note (the run's queued mail replaced)
        working = ["Re: Plan the team offsite", "[working] Plan the team offsite — step 1, post_progress"]
        await idle_until(client, served, lambda found: found == working)
        rows = json.loads(await asyncio.to_thread(served.cli, "activity", "--json"))
        assert [(r["state"], r["steps"], r["last_tool"]) for r in rows] == [("working", 1, "post_progress")]
    finally:
        gate.set()
    done = ["Re: Plan the team offsite", "[done] Plan the team offsite — 2 steps"]
    await idle_until(client, served, lambda found: found == done)
    await client.logout()
