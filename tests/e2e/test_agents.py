"""Specialist agents against the real served process: routing by address over SMTP, each agent's
instructions, model, tools and policy in the model request, its mail From its own address."""

from __future__ import annotations

import smtplib
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest

from tests.e2e.harness import BOT, Served, serve_env, task_mail, write_config
from tests.e2e.test_roundtrip import fetch_all
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

RESEARCH = "research@pizzamail.localhost"
AGENTS_CONFIG = """
[tools.policy]
write_file = "ask"
[agents.research]
name = "Research"
description = "Finds sources and cites them"
instructions_file = "agents/research.md"
model = "openai:research-model"
tools = ["write_*", "recall", "remember"]
[agents.research.policy]
write_file = "auto"
remember = "deny"
[schedules.news]
when = "every day at 3am"
tz = "UTC"
prompt = "Summarise the news"
model = "openai:schedule-model"
"""


@pytest.fixture
def served(tmp_path: Path, fake_openai: FakeOpenAI) -> Iterator[Served]:
    home = tmp_path / "home"
    write_config(home, base_url=fake_openai.base_url)
    with (home / "config.toml").open("a") as config:
        config.write(AGENTS_CONFIG)
    (home / "agents").mkdir()
    (home / "agents" / "research.md").write_text("You are a careful researcher. Cite every source.\n")
    server = Served(home=home, env=serve_env(home))
    yield server
    if server.proc is not None:
        server.stop()


def _to(address: str, msg: EmailMessage) -> EmailMessage:
    del msg["To"]
    msg["To"] = address
    return msg


def _sender(msg: EmailMessage) -> tuple[str, str]:
    [address] = msg["From"].addresses
    return address.display_name, address.addr_spec


def _tool_names(request_tools: list[dict[str, object]]) -> set[str]:
    return {str(t["function"]["name"]) for t in request_tools}  # type: ignore[index]


def test_mail_to_a_specialist_runs_it_with_its_instructions_model_tools_and_policy(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([tool_call("write_file", {"name": "sources.md", "content": "- tides.org"}),
                        text("Three sources, in sources.md.")])
    served.start()
    served.send(_to(RESEARCH, task_mail("Find sources on tides.", subject="Tides")))
    # write_file: [tools.policy] asks, research's policy says auto: the stricter answer holds it
    served.wait_for("run 1 waiting")
    first = fake_openai.requests[0]
    assert first.body["model"] == "research-model"
    assert "Cite every source." in str(first.messages[0]["content"])
    assert "research@pizzamail.localhost" in str(first.messages[0]["content"])
    assert _tool_names(first.tools) == {"write_file", "recall"}  # remember denied, the rest not allowed
    [request] = [m for _, m in fetch_all(served) if m["X-Pizzamail-Approval"]]
    assert _sender(request) == ("Research", RESEARCH)
    assert str(request["Reply-To"]).startswith("research+")

    reply = task_mail("approve", subject="Re: " + str(request["Subject"]), reply_to=request)
    served.send(_to(str(request["Reply-To"]), reply))
    served.wait_for("run 1 done")
    final = fetch_all(served)[-1][1]
    assert _sender(final) == ("Research", RESEARCH)
    assert final["X-Pizzamail-Thread"] == "1"
    assert "Three sources" in str(final.get_body(("plain",)).get_content())  # type: ignore[union-attr]
    assert (served.home / "workspaces" / "1" / "sources.md").read_text() == "- tides.org"
    assert fake_openai.requests[1].body["model"] == "research-model"


def test_an_agent_only_in_cc_does_not_run_but_a_later_run_sees_the_mail(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("The bot's plan."), text("Research's sources.")])
    served.start()
    task = task_mail("Plan the offsite; research, keep an eye on this.")
    task["Cc"] = RESEARCH
    served.send(task)
    served.wait_for("run 1 done")
    bot_reply = fetch_all(served)[-1][1]
    assert _sender(bot_reply)[1] == BOT

    follow = _to(RESEARCH, task_mail("Research: find venues.", subject="Re: Plan the team offsite",
                                     reply_to=bot_reply))
    served.send(follow)
    served.wait_for("run 2 done")
    messages = [m for _, m in fetch_all(served)]
    assert [_sender(m)[1] for m in messages] == ["me@pizzamail.localhost", BOT, "me@pizzamail.localhost",
                                                 RESEARCH]
    assert {m["X-Pizzamail-Thread"] for m in messages[1::2]} == {"1"}
    assert len(fake_openai.requests) == 2  # research did not run on the mail it was only copied on
    seen = [str(m.get("content")) for m in fake_openai.requests[1].messages]
    assert any("keep an eye on this" in c for c in seen) and "find venues" in seen[-1]
    assert fake_openai.requests[1].body["model"] == "research-model"


def test_an_unknown_address_is_refused_with_the_agents_listed(served: Served) -> None:
    served.start()
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=10) as client:
        client.login("me", served.password)
        client.mail("me@pizzamail.localhost")
        code, why = client.rcpt("writer@pizzamail.localhost")
    assert code == 550 and b"5.1.1" in why
    assert f"{BOT}, {RESEARCH}".encode() in why


def test_a_schedules_model_is_the_one_its_runs_ask(served: Served, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([text("Today's news, in brief.")])
    served.start()
    assert "queued in thread 1" in served.cli("schedule", "run", "news")
    served.wait_for("run 1 done")
    [request] = fake_openai.requests
    assert request.body["model"] == "schedule-model"
    assert _sender(fetch_all(served)[-1][1])[1] == BOT
