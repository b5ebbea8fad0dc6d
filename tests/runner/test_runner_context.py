"""A context-length error from an OpenAI-compatible server: old history trimmed, asked once more."""

from __future__ import annotations

import pytest

from pizzamail.errors import ProviderError
from pizzamail.providers import Message
from tests.fakes.openai_server import FakeOpenAI, error, text
from tests.runner.conftest import Harness

OLD = [Message(role="user" if i % 2 == 0 else "assistant", content=f"old {i} " + "x" * 3000)
       for i in range(10)]
MESSAGES = [Message(role="system", content="You are Pizza Bot."), *OLD, Message(role="user", content="Task.")]


async def test_a_context_length_error_is_trimmed_and_retried(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([error(400, "This model's maximum context length is 8192 tokens"), text("Done.")])
    provider = harness.provider()
    answer = await provider.complete(MESSAGES, [])
    await provider.aclose()
    assert answer.text == "Done."
    first, second = fake_openai.requests
    assert len(second.messages) < len(first.messages)
    assert second.messages[0] == {"role": "system", "content": "You are Pizza Bot."}
    assert second.messages[-1] == {"role": "user", "content": "Task."}
    assert harness.sleeps == []


async def test_still_too_long_after_trimming_is_an_error(harness: Harness, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([error(400, "context length exceeded")] * 2)
    provider = harness.provider()
    with pytest.raises(ProviderError, match="context length"):
        await provider.complete(MESSAGES, [])
    await provider.aclose()
    assert len(fake_openai.requests) == 2
