"""A fake Anthropic Messages server on 127.0.0.1, for tests (the pattern of :mod:`openai_server`).

A real HTTP server in a background thread: the real provider code (httpx, retries, parsing) runs
against it. Each test scripts the answers and reads the recorded requests::

    fake_anthropic.script([tool_use("add", {"a": 2}), text("done")])
    ...
    assert fake_anthropic.requests[1].body["messages"][-1]["content"][0]["type"] == "tool_result"

``GET /v1/models`` answers a fixed list (for ``pizzamail models --check``).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# -- script items ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Scripted:
    """One scripted HTTP answer, sent as JSON (``model`` filled from the request when None)."""

    status: int = 200
    payload: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def text(content: str, *, input_tokens: int = 11, output_tokens: int = 7) -> Scripted:
    """A final answer."""
    return _message([{"type": "text", "text": content}], "end_turn", input_tokens, output_tokens)


def tool_use(name: str, arguments: dict[str, Any], *, call_id: str = "toolu_1",
             content: str | None = None) -> Scripted:
    """One tool call, optionally after some text."""
    lead = [{"type": "text", "text": content}] if content else []
    return _message([*lead, {"type": "tool_use", "id": call_id, "name": name, "input": arguments}],
                    "tool_use", 13, 5)


def error(status: int, message: str = "scripted failure", *, kind: str = "api_error",
          retry_after: str | None = None) -> Scripted:
    """An HTTP error in Anthropic's error shape, optionally with Retry-After (seconds)."""
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Scripted(status=status, headers=headers,
                    payload={"type": "error", "error": {"type": kind, "message": message}})


def _message(content: list[dict[str, Any]], stop_reason: str, input_tokens: int,
             output_tokens: int) -> Scripted:
    return Scripted(payload={
        "id": "msg_fake", "type": "message", "role": "assistant", "model": None, "content": content,
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
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


EXHAUSTED = error(599, "fake_anthropic: the test's script has no more answers")
MODELS = {"data": [{"type": "model", "id": "claude-fake-1", "display_name": "Claude Fake"}],
          "has_more": False}


class FakeAnthropic:
    """Start with ``with FakeAnthropic() as fake:`` (or the ``fake_anthropic`` fixture)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: deque[Scripted] = deque()
        self.requests: list[Recorded] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-anthropic",
                                        kwargs={"poll_interval": 0.05})

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, items: list[Scripted]) -> None:
        with self._lock:
            self._script.extend(items)

    def record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)

    def _next(self, request: Recorded) -> Scripted:
        with self._lock:
            self.requests.append(request)
            return self._script.popleft() if self._script else EXHAUSTED

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()


def _handler(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: no idle thread outlives a test

        def do_GET(self) -> None:
            fake.record(Recorded(method="GET", path=self.path, body=None, headers=self._headers()))
            if self.path.rstrip("/") == "/v1/models":
                self._send(Scripted(payload=MODELS), None)
            else:
                self._send(error(404, f"fake_anthropic: no route {self.path}", kind="not_found_error"), None)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body: Any = json.loads(raw)
            recorded = Recorded(method="POST", path=self.path, body=body, headers=self._headers())
            if self.path.rstrip("/") != "/v1/messages":
                self._send(error(404, f"fake_anthropic: no route {self.path}", kind="not_found_error"), body)
                return
            self._send(fake._next(recorded), body)

        def _headers(self) -> dict[str, str]:
            return {k.lower(): v for k, v in self.headers.items()}

        def _send(self, item: Scripted, request: Any) -> None:
            payload = dict(item.payload)
            if "model" in payload and payload["model"] is None:
                payload["model"] = request.get("model") if isinstance(request, dict) else "fake"
            data = json.dumps(payload).encode()
            self.send_response(item.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in item.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A started fake Messages server, stopped after the test."""
    with FakeAnthropic() as fake:
        yield fake
