"""The providers' connections: httpx's requests sent over aiohttp, against a raw server on loopback."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from pizzamail.providers.http import JsonEndpoint, new_client

Answer = Callable[[bytes], bytes | None]
"""the bytes to send back for a request's head and body; None closes the connection unanswered"""


def ok(body: bytes, *headers: str) -> bytes:
    head = "".join(f"{line}\r\n" for line in ("HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *headers))
    return head.encode() + b"\r\n" + body


@dataclass
class Raw:
    """A server that reads one HTTP/1.1 request at a time and answers as told."""

    answer: Answer
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    port: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                reply = self.answer(request)
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def raw(answer: Answer) -> AsyncIterator[Raw]:
    server = Raw(answer)
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    server.port = listening.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listening.close()


@asynccontextmanager
async def client() -> AsyncIterator[httpx.AsyncClient]:
    http = new_client()
    try:
        yield http
    finally:
        await http.aclose()


async def test_the_path_goes_out_as_httpx_built_it_and_a_gzipped_answer_is_decoded() -> None:
    # Bedrock signs model/…v1%3A0/converse: the %3A must not become ":" on the way
    async with raw(lambda request: ok(gzip.compress(b'{"ok": true}'), "Content-Encoding: gzip")) as server, \
            client() as http:
        reply = await http.post(f"http://127.0.0.1:{server.port}/model/a.b-v1%3A0/converse", json={"x": 1})
    assert reply.json() == {"ok": True}
    assert server.requests[0].startswith(b"POST /model/a.b-v1%3A0/converse HTTP/1.1\r\n")
    assert server.requests[0].endswith(b'{"x":1}')


async def test_a_large_body_arrives_whole_and_connections_are_reused() -> None:
    big = {"picture": "A" * (3 << 20)}
    async with raw(lambda request: ok(b"{}")) as server, client() as http:
        for _ in range(2):
            assert (await http.post(f"http://127.0.0.1:{server.port}/v1/x", json=big)).status_code == 200
    sent = json.dumps(big, separators=(",", ":")).encode()
    assert [request.split(b"\r\n\r\n", 1)[1] for request in server.requests] == [sent, sent]
    assert server.connections == 1


@pytest.mark.parametrize(("answer", "error"), [
    (lambda request: None, httpx.ReadError),
    (lambda request: b"HTTP/1.1 two hundred\r\n\r\n", httpx.RemoteProtocolError),
    (lambda request: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", httpx.TransportError),
])
async def test_a_broken_answer_is_one_of_httpxs_transport_errors(answer: Answer,
                                                                 error: type[Exception]) -> None:
    async with raw(answer) as server, client() as http:
        with pytest.raises(error):
            await http.post(f"http://127.0.0.1:{server.port}/v1/x", json={})


async def test_no_answer_in_time_is_a_read_timeout() -> None:
    async with raw(lambda request: b"") as server, client() as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(f"http://127.0.0.1:{server.port}/v1/x", json={}, timeout=0.2)


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with raw(lambda request: None) as server:
        port = server.port
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(f"http://127.0.0.1:{port}/v1/x", json={})


async def test_an_endpoint_retries_a_malformed_answer_then_says_what_happened() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with raw(lambda request: b"not http at all\r\n\r\n") as server:
        endpoint = JsonEndpoint(name="openai", base_url=f"http://127.0.0.1:{server.port}/v1", model="m",
                                max_retries=2, sleep=sleep)
        try:
            with pytest.raises(Exception) as failed:
                await endpoint.post("chat/completions", {})
        finally:
            await endpoint.aclose()
    assert len(server.requests) == 3 and len(waits) == 2
    assert "failed 3 times in a row: could not reach" in str(failed.value)
    assert "RemoteProtocolError" in str(failed.value)


async def test_a_proxy_from_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    async with raw(lambda request: ok(b"{}")) as proxy:
        for name in ("HTTP_PROXY", "http_proxy"):  # the lower-case one wins where both are set
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with client() as http:
            assert (await http.post("http://models.invalid/v1/x", json={})).status_code == 200
    assert proxy.requests[0].startswith(b"POST http://models.invalid/v1/x HTTP/1.1\r\n")
