"""A server killed between the 250 and the reply loses nothing and replies exactly once."""

from __future__ import annotations

import signal
import sqlite3
import threading

from tests.e2e.harness import Served, task_mail
from tests.e2e.test_roundtrip import connect, fetch_all, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, gated, text


async def test_sigkill_after_250_resumes_and_replies_once(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    never = threading.Event()
    fake_openai.script([gated(text("lost answer"), never), text("The answer, after the crash.")])
    served.start()
    served.send(task_mail("Count the open issues."))
    fake_openai.wait_requests(1)  # the run is in flight: the model call is held
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL

    served.start()
    client = await connect(served)
    await idle_until_exists(client, 2)
    await client.logout()
    fake_openai.wait_requests(2)

    replies = [m for _, m in fetch_all(served) if m["X-Pizzamail-Run"]]
    assert len(replies) == 1
    body = replies[0].get_body(("plain",))
    assert body is not None and "after the crash" in body.get_content()
    with sqlite3.connect(served.home / "state.db") as db:
        runs = db.execute("SELECT status, attempts FROM runs").fetchall()
        outgoing = db.execute("SELECT count(*) FROM messages WHERE direction = 'out'").fetchone()
    assert runs == [("done", 2)]
    assert outgoing == (1,)
