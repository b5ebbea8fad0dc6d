"""Provider trouble: retries with the provider's waits, then a clear error mail; no key: a notice."""

from __future__ import annotations

import socket

from pizzamail.config import ProviderSettings
from pizzamail.store.threads import thread_messages
from tests.fakes.openai_server import FakeOpenAI, error, malformed, slow, text
from tests.runner.conftest import Harness, bot_mails, plain


def with_provider(harness: Harness, **settings: object) -> Harness:
    current = harness.config.providers["openai"]
    values = {"base_url": current.base_url, "key_env": "OPENAI_API_KEY", "max_retries": 2,
              "timeout": 5.0, **settings}
    return harness.with_config(providers={"openai": ProviderSettings(**values)})  # type: ignore[arg-type]


async def test_429_waits_as_long_as_retry_after_says(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([error(429, "slow down", retry_after="7"), text("Made it.")])
    run_id = await harness.task("Hurry")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert harness.sleeps == [7.0]
    assert len(fake_openai.requests) == 2
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "Made it." in plain(mail)


async def test_500_forever_fails_the_run_with_an_error_mail(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([], then=error(500, "upstream exploded"))
    run_id = await harness.task("Try")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "failed"
    assert len(fake_openai.requests) == 3  # the first try and max_retries = 2
    assert len(harness.sleeps) == 2
    assert 0.5 <= harness.sleeps[0] <= 1.0 and 1.0 <= harness.sleeps[1] <= 2.0  # backoff with jitter
    [(flags, mail)] = await bot_mails(harness.mailbox)
    assert "\\Seen" not in flags
    assert mail["X-Pizzamail-Kind"] == "error" and mail["Subject"] == "Re: Summarise issues"
    body = plain(mail)
    assert "I could not finish this task." in body
    assert "failed 3 times in a row: HTTP 500: upstream exploded" in body
    run = await harness.store.fetchone("SELECT status, error FROM runs WHERE id = ?", (run_id,))
    thread = await harness.store.fetchone("SELECT status FROM threads WHERE id = 1")
    assert run is not None and thread is not None
    assert run["status"] == "failed" and "HTTP 500" in run["error"] and thread["status"] == "failed"
    error_row = (await thread_messages(harness.store, 1))[-1]
    assert (error_row.kind, error_row.run_id) == ("error", run_id)


async def test_malformed_json_is_a_provider_error(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([malformed()])
    run_id = await harness.task("Try")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "failed"
    assert len(fake_openai.requests) == 1  # not retried: trying again would not help
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "not valid Chat Completions JSON" in plain(mail)


async def test_json_without_choices_is_a_provider_error(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([malformed(b'{"object": "chat.completion"}')])
    run_id = await harness.task("Try")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "failed"
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert "not valid Chat Completions JSON" in plain(mail)


async def test_a_refused_key_names_the_command_that_fixes_it(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([error(401, "Incorrect API key provided")])
    run_id = await harness.task("Try")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "failed"
    assert len(fake_openai.requests) == 1
    body = plain((await bot_mails(harness.mailbox))[0][1])
    assert "HTTP 401: Incorrect API key provided" in body
    assert "`pizzamail keys set openai`" in body
    assert "sk-test-123" not in body


async def test_a_slow_provider_times_out_and_is_retried(harness: Harness, fake_openai: FakeOpenAI) -> None:
    # the retry must answer within the limit: 0.2 s was too short for a loaded 2-core machine
    harness = with_provider(harness, base_url=fake_openai.base_url, timeout=2)
    fake_openai.script([slow(text("too late"), 30), text("On time.")])
    run_id = await harness.task("Try")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert len(harness.sleeps) == 1
    assert "On time." in plain((await bot_mails(harness.mailbox))[0][1])


async def test_an_unreachable_provider_fails_after_its_retries(harness: Harness) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    harness = with_provider(harness, base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    run_id = await harness.task("Try")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "failed"
    assert len(harness.sleeps) == 1
    assert f"could not reach http://127.0.0.1:{port}/v1" in plain((await bot_mails(harness.mailbox))[0][1])


async def test_no_key_sends_a_notice_that_explains_the_setup(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    harness.secrets.delete("openai")
    fake_openai.script([text("Now I can work.")])
    first = await harness.task("Do something")
    async with harness.running() as runner:
        assert await harness.finish(runner, first) == "failed"
        assert fake_openai.requests == []
        [(_, notice)] = await bot_mails(harness.mailbox)
        assert notice["X-Pizzamail-Kind"] == "notice"
        body = plain(notice)
        for needed in ("no model is set up", "`pizzamail keys set openai`", "$OPENAI_API_KEY",
                       "`[agent] model`", "`[providers.openai] base_url`"):
            assert needed in body
        run = await harness.store.fetchone("SELECT status, error FROM runs WHERE id = ?", (first,))
        assert run is not None and run["status"] == "failed" and "no API key" in run["error"]

        # the key is stored while serving: the next run uses it without a restart
        harness.secrets.set("openai", "sk-later")
        second = await harness.task("Try again", reply_to=notice["Message-ID"].strip("<>"))
        assert await harness.finish(runner, second) == "done"
        assert runner.running
    assert fake_openai.requests[0].headers["authorization"] == "Bearer sk-later"


async def test_an_unknown_provider_name_is_a_notice(harness: Harness, fake_openai: FakeOpenAI) -> None:
    from pizzamail.config import AgentSettings

    harness = harness.with_config(agent=AgentSettings(model="nowhere:some-model"))
    run_id = await harness.task("Try")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "failed"
    body = plain((await bot_mails(harness.mailbox))[0][1])
    assert "no provider named 'nowhere'" in body and "`[providers.nowhere]`" in body
