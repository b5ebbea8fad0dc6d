"""A burst of mail from several connections at once: every mail is taken first (the runs and the
filing of copies wait for it, ``intake/pace.py``), then every task is answered and filed."""

from __future__ import annotations

import asyncio
import smtplib

from tests.e2e.harness import Served, task_mail
from tests.e2e.test_roundtrip import connect, fetch_all, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, text

CLIENTS, MAILS = 3, 5


async def test_a_burst_from_several_clients_is_taken_and_then_every_task_answered(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([], then=text("Done."))
    served.start()
    inbox = await connect(served)

    def send(client: int) -> None:
        with smtplib.SMTP("127.0.0.1", served.smtp, timeout=30) as smtp:
            smtp.login("me", served.password)
            for n in range(MAILS):
                smtp.send_message(task_mail(f"Task {n} of client {client}.", subject=f"Task {client}-{n}"))

    await asyncio.gather(*(asyncio.to_thread(send, client) for client in range(CLIENTS)))
    tasks = [f"Task {client}-{n}" for client in range(CLIENTS) for n in range(MAILS)]
    await idle_until_exists(inbox, 2 * len(tasks))  # each task's copy and its reply
    subjects = sorted(str(msg["Subject"]) for _, msg in fetch_all(served))
    assert subjects == sorted(tasks + [f"Re: {task}" for task in tasks])
    assert len(fake_openai.requests) == len(tasks)
