"""The runner runs a run's own agent: a specialist's limits and name, and a run whose agent is gone."""

from __future__ import annotations

from pizzamail.config import SpecialistSettings
from pizzamail.intake.tasks import store_task
from pizzamail.mail.parse import parse_mail
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import Harness, bot_mails, plain, task_mail

RESEARCH = "research@pizzamail.localhost"


async def _task_for(harness: Harness, agent: str) -> int:
    raw = task_mail("Find sources on tides", subject="Tides", reply_to=None, refs=[])
    stored = await store_task(harness.store, harness.blobs, raw, parse_mail(raw), agent=agent,
                              domain=harness.config.domain)
    assert stored.run_id is not None
    return stored.run_id


async def test_a_specialists_own_limit_stops_its_run_and_its_reply_names_its_section(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    research = SpecialistSettings(address=RESEARCH, name="Research", max_steps=1)
    harness = harness.with_config(agents={"research": research})
    fake_openai.script([tool_call("recall", {}), text("What I found so far.")])
    run_id = await _task_for(harness, RESEARCH)
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "done"
    assert fake_openai.requests[1].tools == []  # its one step was used: the summary call
    [(_, reply)] = await bot_mails(harness.mailbox)
    assert reply["From"].addresses[0].display_name == "Research"
    assert "`[agents.research] max_steps`" in plain(reply)


async def test_a_run_of_an_agent_no_longer_configured_fails_saying_how_to_fix_it(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    run_id = await _task_for(harness, "gone@pizzamail.localhost")
    async with harness.running() as runner:
        assert await harness.finish(runner, run_id) == "failed"
    assert fake_openai.requests == []
    [(_, mail)] = await bot_mails(harness.mailbox)
    assert mail["From"].addresses[0].addr_spec == harness.config.agent.address
    assert "gone@pizzamail.localhost, which is no longer an agent here" in plain(mail)
