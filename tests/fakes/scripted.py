"""A scripted HTTP server on 127.0.0.1, the base of every fake model provider.

It is a real HTTP server in a background thread, so the real provider code (httpx, retries,
parsing) runs against it, and another process (``pizzamail serve`` in an end-to-end test) can use
it too. A fake names the POST route its script answers, fixed answers for GET routes, and how a
missing route or an exhausted script is reported in its provider's error shape.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self


@dataclass(frozen=True, kw_only=True)
class Scripted:
    """One scripted HTTP answer. ``payload`` is sent as JSON (a ``model`` of None is filled from
    the request); ``raw`` is sent as it is; ``delay`` holds the answer back (woken early when the
    server stops); ``gate``, if set, holds it until the test sets it."""

    status: int = 200
    payload: dict[str, Any] | None = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    gate: threading.Event | None = None


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


#: makes the answer to one request
Answerer = Callable[[Recorded], Scripted]


class _Server(ThreadingHTTPServer):
    # a real provider takes a burst of connections: a runner starting 32 runs at once opens 32, and
    # the default backlog of 5 resets some of them (ReadError), which no real provider would do
    request_queue_size = 256


class ScriptedServer:
    """Start with ``with Fake() as fake:``; subclasses set the class attributes below. Every
    request is recorded in ``requests``, GETs included."""

    #: thread and message prefix, e.g. ``fake_openai``
    name = "fake"
    #: the POST path the script answers (a regular expression, matched in full)
    route = ""
    #: path suffix of ``base_url`` (``/v1`` for OpenAI-compatible clients)
    url_suffix = ""
    #: fixed answers to GET paths (not recorded, not scripted)
    gets: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, *, keep_alive: bool = False) -> None:
        """``keep_alive``: answer HTTP/1.1 and keep each connection open, as real providers do (the
        benchmarks); tests close each connection after its answer, so that no idle connection's
        thread outlives a test."""
        self._lock = threading.Condition()
        self._script: deque[Scripted] = deque()
        self._then: Scripted | Answerer = self.error(
            599, f"{self.name}: the test's script has no more answers")
        self._stopping = threading.Event()
        self.requests: list[Recorded] = []
        self._server = _Server(("127.0.0.1", 0), _handler(self, keep_alive))
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.name,
                                        kwargs={"poll_interval": 0.05})

    def error(self, status: int, message: str) -> Scripted:
        """An error in the provider's shape (missing route, exhausted script)."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.url_suffix}"

    def script(self, items: list[Scripted], *, then: Scripted | Answerer | None = None) -> None:
        """Queue answers in order; ``then`` answers every request after them (default: HTTP 599),
        or makes each answer from its request (for tests whose requests come in no fixed order)."""
        with self._lock:
            self._script.extend(items)
            if then is not None:
                self._then = then

    def wait_requests(self, count: int, timeout: float = 10.0) -> list[Recorded]:
        """Block until ``count`` requests arrived (for use from another thread or process)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"{self.name} saw {len(self.requests)} requests, not {count}")
            return list(self.requests)

    def record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)
            self._lock.notify_all()

    def next_answer(self, request: Recorded) -> Scripted:
        with self._lock:
            self.requests.append(request)
            self._lock.notify_all()
            if self._script:
                return self._script.popleft()
            then = self._then
        return then(request) if callable(then) else then

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()  # also joins the handler threads

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(fake: ScriptedServer, keep_alive: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
        # the headers and the body are two writes: on a kept-alive connection Nagle held the body
        # until the client's delayed ACK of the headers, 40 ms a request (real servers set it too)
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            fake.record(Recorded(method="GET", path=self.path, body=None, headers=self._headers()))
            answer = fake.gets.get(self.path.rstrip("/"))
            found = Scripted(payload=answer) if answer is not None else None
            self._send(found or fake.error(404, f"{fake.name}: no route {self.path}"), None)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            recorded = Recorded(method="POST", path=self.path, body=body, headers=self._headers())
            if not re.fullmatch(fake.route, self.path.rstrip("/")):
                self._send(fake.error(404, f"{fake.name}: no route {self.path}"), body)
                return
            self._send(fake.next_answer(recorded), body)

        def _headers(self) -> dict[str, str]:
            return {k.lower(): v for k, v in self.headers.items()}

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

