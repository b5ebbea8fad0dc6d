"""Email a task, get the agent's reply in the same thread over IMAP (pushed by IDLE)."""

from __future__ import annotations

import asyncio
import email
import email.policy
import imaplib
import ssl
from email.message import EmailMessage

import aioimaplib

from tests.e2e.harness import BOT, Served, task_mail
from tests.fakes.openai_server import FakeOpenAI, text


async def idle_until_exists(client: aioimaplib.IMAP4, count: int, within: float = 60) -> None:
    """Stay in IDLE until the server pushes ``* N EXISTS`` with N >= count."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    idle = await client.idle_start(timeout=within)
    try:
        while True:
            push = await client.wait_server_push(timeout=max(0.1, deadline - loop.time()))
            lines = push if isinstance(push, list) else [push]
            for line in lines:
                words = line.decode().split() if isinstance(line, bytes) else str(line).split()
                if len(words) == 2 and words[1] == "EXISTS" and int(words[0]) >= count:
                    return
    finally:
        client.idle_done()
        await asyncio.wait_for(idle, 30)


#: sessions opened by connect(): a test that fails midway (a timed-out IDLE) leaves its own open
_SESSIONS: list[aioimaplib.IMAP4] = []


async def close_sessions() -> None:
    """Close what a failed test left open while its loop still runs: left to the garbage collector,
    the open transport warns (an error here) in whichever later test collects it."""
    while _SESSIONS:
        transport = _SESSIONS.pop().protocol.transport
        if transport is not None and not transport.is_closing():
            transport.close()
    await asyncio.sleep(0)  # one turn of the loop: the transports let go of their sockets


async def connect(served: Served) -> aioimaplib.IMAP4:
    client = aioimaplib.IMAP4(host="127.0.0.1", port=served.imap, timeout=10)
    _SESSIONS.append(client)
    await client.wait_hello_from_server()
    assert (await client.login("me", served.password)).result == "OK"
    assert (await client.select("INBOX")).result == "OK"
    return client


def fetch_all(served: Served, folder: str = "INBOX") -> list[tuple[bytes, EmailMessage]]:
    """(flags, message) for every message in ``folder``, read with imaplib."""
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        imap.login("me", served.password)
        _, count = imap.select(folder, readonly=True)
        if int(count[0] or 0) == 0:
            return []
        _, data = imap.fetch("1:*", "(FLAGS BODY.PEEK[])")
        result = []
        for item in data:
            if isinstance(item, tuple):
                msg = email.message_from_bytes(item[1], policy=email.policy.default)
                assert isinstance(msg, EmailMessage)
                result.append((item[0], msg))
        return result


async def test_task_reply_arrives_in_the_thread_pushed_by_idle(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Here is the **plan**:\n\n- Day 1: hike\n- Day 2: workshop")])
    served.start()
    client = await connect(served)
    task = task_mail("Plan a two-day offsite for six people.")
    await asyncio.to_thread(served.send, task)
    await idle_until_exists(client, 2)
    await client.logout()

    [(task_flags, filed_task), (reply_flags, reply)] = fetch_all(served)
    assert filed_task["Message-ID"] == task["Message-ID"] and b"\\Seen" in task_flags
    assert b"\\Seen" not in reply_flags
    assert reply["From"].addresses[0].addr_spec == BOT
    assert reply["In-Reply-To"] == task["Message-ID"]
    assert task["Message-ID"] in reply["References"]
    assert reply["Subject"] == "Re: Plan the team offsite"
    assert reply["X-Pizzamail-Thread"] == "1" and reply["X-Pizzamail-Run"] == "1"
    plain = reply.get_body(("plain",))
    html = reply.get_body(("html",))
    assert plain is not None and "Day 1: hike" in plain.get_content()
    assert html is not None and "<strong>plan</strong>" in html.get_content()
    [request] = fake_openai.requests
    assert "Plan a two-day offsite" in str(request.messages[-1]["content"])


async def test_follow_up_continues_the_thread_and_the_model_sees_history(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Two options: the lake or the hills."), text("The lake, then.")])
    served.start()
    client = await connect(served)
    task = task_mail("Where should the offsite be?")
    await asyncio.to_thread(served.send, task)
    await idle_until_exists(client, 2)
    reply = fetch_all(served)[1][1]
    follow = task_mail("Which one is closer?", subject="Re: Plan the team offsite", reply_to=reply)
    await asyncio.to_thread(served.send, follow)
    await idle_until_exists(client, 4)
    await client.logout()

    messages = [m for _, m in fetch_all(served)]
    assert {m["X-Pizzamail-Thread"] for m in messages if m["From"].addresses[0].addr_spec == BOT} == {"1"}
    assert messages[3]["In-Reply-To"] == follow["Message-ID"]
    seen = fake_openai.requests[1].messages
    contents = [str(m.get("content")) for m in seen]
    assert any("Where should the offsite be?" in c for c in contents)
    assert any(m["role"] == "assistant" and "lake or the hills" in str(m["content"]) for m in seen)
    assert "Which one is closer?" in contents[-1]


async def test_without_a_model_key_the_reply_explains_how_to_configure_one(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    del served.env["OPENAI_API_KEY"]
    # the notice itself, not the embedded offline model (when installed) answering with it: that
    # model reads its prompt for tens of seconds on a busy machine (tests/providers/test_local.py)
    config = served.home / "config.toml"
    config.write_text(config.read_text().replace("[agent]\n", "[agent]\noffline_model = false\n"))
    served.start()
    client = await connect(served)
    await asyncio.to_thread(served.send, task_mail("Hello?"))
    await idle_until_exists(client, 2)
    await client.logout()
    notice = fetch_all(served)[1][1]
    body = notice.get_body(("plain",))
    assert body is not None and "pizzamail keys set openai" in body.get_content()
    assert "offline demo model" not in body.get_content()
    assert fake_openai.requests == []


async def test_imap_without_login_sees_nothing(served: Served, fake_openai: FakeOpenAI) -> None:
    served.start()
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        status, _ = imap.noop()
        assert status == "OK"
        try:
            imap.select("INBOX")
        except imaplib.IMAP4.error as exc:
            assert "SELECT" in str(exc) or "authenticated" in str(exc).lower() or "state" in str(exc)
        else:
            raise AssertionError("SELECT worked without LOGIN")
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        try:
            imap.login("me", "wrong-password")
        except imaplib.IMAP4.error as exc:
            assert "AUTHENTICATIONFAILED" in str(exc) or "failed" in str(exc).lower()
        else:
            raise AssertionError("a wrong password logged in")


def test_sigterm_stops_cleanly(served: Served, fake_openai: FakeOpenAI) -> None:
    served.start()
    assert (served.home / "serve.json").exists()
    assert served.stop() == 0
    assert served.output[-1] == "pizzamail stopped."
    assert not (served.home / "serve.json").exists()
    assert list((served.home / "Maildir" / "tmp").iterdir()) == []


def test_imaps_port_serves_the_home_certificate(served: Served, fake_openai: FakeOpenAI) -> None:
    served.start()
    context = ssl.create_default_context(cafile=str(served.home / "tls" / "cert.pem"))
    with imaplib.IMAP4_SSL("localhost", served.imaps, ssl_context=context) as imap:
        assert imap.login("me", served.password)[0] == "OK"
        assert imap.select("INBOX", readonly=True)[0] == "OK"
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        assert "STARTTLS" in imap.capabilities
        imap.starttls(context)
        assert imap.login("me", served.password)[0] == "OK"
