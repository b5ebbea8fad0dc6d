"""A fake Amazon Bedrock Converse server on 127.0.0.1, for tests (the pattern of :mod:`anthropic_server`).

A real HTTP server in a background thread: the real provider code (httpx, retries, parsing) runs
against it. Each test scripts the answers and reads the recorded requests::

    fake_bedrock.script([tool_use("add", {"a": 2}), text("done")])
    ...
    assert "toolResult" in fake_bedrock.requests[1].messages[-1]["content"][0]

Only ``POST /model/{modelId}/converse`` is served.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CONVERSE = re.compile(r"^/model/(?P<model>[^/]+)/converse$")

# -- script items ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Scripted:
    """One scripted HTTP answer, sent as JSON."""

    status: int = 200
    payload: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def text(content: str, *, input_tokens: int = 11, output_tokens: int = 7) -> Scripted:
    """A final answer."""
    return _message([{"text": content}], "end_turn", input_tokens, output_tokens)


def tool_use(name: str, arguments: dict[str, Any], *, call_id: str = "tooluse_1",
             content: str | None = None) -> Scripted:
    """One tool call, optionally after some text."""
    lead = [{"text": content}] if content else []
    return _message([*lead, {"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}}],
                    "tool_use", 13, 5)


def error(status: int, message: str = "scripted failure", *, kind: str = "InternalServerException",
          retry_after: str | None = None) -> Scripted:
    """An HTTP error in Bedrock's shape (``x-amzn-ErrorType`` + ``{"message"}``)."""
    headers = {"x-amzn-ErrorType": kind}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return Scripted(status=status, headers=headers, payload={"message": message})


def _message(content: list[dict[str, Any]], stop_reason: str, input_tokens: int,
             output_tokens: int) -> Scripted:
    return Scripted(payload={
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": input_tokens, "outputTokens": output_tokens,
                  "totalTokens": input_tokens + output_tokens},
        "metrics": {"latencyMs": 12},
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


EXHAUSTED = error(599, "fake_bedrock: the test's script has no more answers")


class FakeBedrock:
    """Start with ``with FakeBedrock() as fake:`` (or the ``fake_bedrock`` fixture)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: deque[Scripted] = deque()
        self.requests: list[Recorded] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-bedrock",
                                        kwargs={"poll_interval": 0.05})

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, items: list[Scripted]) -> None:
        with self._lock:
            self._script.extend(items)

    def _next(self, request: Recorded) -> Scripted:
        with self._lock:
            self.requests.append(request)
            return self._script.popleft() if self._script else EXHAUSTED

    def __enter__(self) -> FakeBedrock:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()


def _handler(fake: FakeBedrock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: no idle thread outlives a test

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body: Any = json.loads(raw)
            headers = {k.lower(): v for k, v in self.headers.items()}
            if not CONVERSE.match(self.path):
                missing = error(404, f"fake_bedrock: no route {self.path}", kind="ResourceNotFoundException")
                self._send(missing)
                return
            self._send(fake._next(Recorded(method="POST", path=self.path, body=body, headers=headers)))

        def _send(self, item: Scripted) -> None:
            data = json.dumps(item.payload).encode()
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
def fake_bedrock() -> Iterator[FakeBedrock]:
    """A started fake Converse server, stopped after the test."""
    with FakeBedrock() as fake:
        yield fake
