"""A fake OpenAI-compatible Chat Completions server on 127.0.0.1, for tests.

It is a real HTTP server in a background thread, so the real provider code (httpx, retries, parsing)
runs against it, and another process (``pizzamail serve`` in an end-to-end test) can use it too via
``[providers.openai] base_url = fake.base_url``. Each test scripts the answers::

    fake_openai.script([tool_call("lookup", {"q": "x"}), text("done")])
    ...
    assert fake_openai.requests[1].messages[-1]["role"] == "tool"

Register the fixture for every test with ``pytest_plugins = ["tests.fakes.openai_server"]`` in
``tests/conftest.py``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# -- script items ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Scripted:
    """One scripted HTTP answer. ``payload`` is sent as JSON (``model`` filled from the request);
    ``raw`` is sent as it is; ``delay`` holds the answer back (woken early when the server stops)."""

    status: int = 200
    payload: dict[str, Any] | None = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    gate: threading.Event | None = None
    """if set, the answer waits until the test sets it (for concurrency tests)"""


def text(content: str, *, finish_reason: str = "stop", prompt_tokens: int = 11,
         completion_tokens: int = 7) -> Scripted:
    """A final answer."""
    return _completion({"role": "assistant", "content": content}, finish_reason,
                       prompt_tokens, completion_tokens)


def tool_call(name: str, arguments: dict[str, Any] | str, *, call_id: str = "call_1",
              content: str | None = None) -> Scripted:
    """One tool call; a str ``arguments`` is sent verbatim (for invalid-JSON tests)."""
    return tool_calls([(call_id, name, arguments)], content=content)


def tool_calls(calls: list[tuple[str, str, dict[str, Any] | str]], *,
               content: str | None = None) -> Scripted:
    wire = [{"id": cid, "type": "function", "function": {
        "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for cid, name, args in calls]
    return _completion({"role": "assistant", "content": content, "tool_calls": wire},
                       "tool_calls", 13, 5)


def error(status: int, message: str = "scripted failure", *, retry_after: str | None = None) -> Scripted:
    """An HTTP error in OpenAI's error shape, optionally with Retry-After (seconds)."""
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Scripted(status=status, headers=headers,
                    payload={"error": {"message": message, "type": "scripted", "code": None}})


def malformed(body: bytes = b'{"choices": [ {"message": ') -> Scripted:
    """A 200 whose body is not valid JSON."""
    return Scripted(raw=body)


def slow(item: Scripted, seconds: float) -> Scripted:
    return replace(item, delay=seconds)


def gated(item: Scripted, gate: threading.Event) -> Scripted:
    return replace(item, gate=gate)


def _completion(message: dict[str, Any], finish_reason: str, prompt: int, completion: int) -> Scripted:
    return Scripted(payload={
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": None,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    })


# -- the server --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """One request as the fake saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body["messages"])

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or [])


EXHAUSTED = error(599, "fake_openai: the test's script has no more answers")


class FakeOpenAI:
    """Start with ``with FakeOpenAI() as fake:`` (or the ``fake_openai`` fixture)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._script: deque[Scripted] = deque()
        self._then: Scripted = EXHAUSTED
        self._stopping = threading.Event()
        self.requests: list[Recorded] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai",
                                        kwargs={"poll_interval": 0.05})

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, items: list[Scripted], *, then: Scripted | None = None) -> None:
        """Queue answers in order; ``then`` answers every request after them (default: HTTP 599)."""
        with self._lock:
            self._script.extend(items)
            if then is not None:
                self._then = then

    def wait_requests(self, count: int, timeout: float = 10.0) -> list[Recorded]:
        """Block until ``count`` requests arrived (for use from another thread or process)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"fake_openai saw {len(self.requests)} requests, not {count}")
            return list(self.requests)

    def _next(self, request: Recorded) -> Scripted:
        with self._lock:
            self.requests.append(request)
            self._lock.notify_all()
            return self._script.popleft() if self._script else self._then

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()  # also joins the handler threads

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so no idle keep-alive thread outlives a test
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            """``GET /v1/models``, for ``pizzamail models --check``; not recorded, not scripted."""
            models = {"object": "list", "data": [{"id": "gpt-fake", "object": "model"}]}
            if self.path.rstrip("/") == "/v1/models":
                self._send(Scripted(payload=models), None)
            else:
                self._send(error(404, f"fake_openai: no route {self.path}"), None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            recorded = Recorded(method="POST", path=self.path, body=body,
                                headers={k.lower(): v for k, v in self.headers.items()})
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(error(404, f"fake_openai: no route {self.path}"), body)
                return
            self._send(fake._next(recorded), body)

        def _send(self, item: Scripted, request: Any) -> None:
            while item.gate is not None and not item.gate.wait(0.05) and not fake._stopping.is_set():
                pass  # held until the test opens the gate (or the server stops)
            if item.delay:
                fake._stopping.wait(item.delay)
            data = item.raw if item.raw is not None else _payload(item, request)
            try:
                self.send_response(item.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in item.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def _payload(item: Scripted, request: Any) -> bytes:
    payload = dict(item.payload or {})
    if "model" in payload and payload["model"] is None:
        payload["model"] = request.get("model") if isinstance(request, dict) else "fake"
    return json.dumps(payload).encode()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started fake Chat Completions server, stopped after the test."""
    with FakeOpenAI() as fake:
        yield fake
