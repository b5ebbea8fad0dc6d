"""Webhooks over real HTTP: the app served by uvicorn on an ephemeral port, httpx as the sender."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from pizzamail.config import parse_config
from pizzamail.home import Home
from pizzamail.secrets import secret_store
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.threads import thread_messages
from pizzamail.triggers.signatures import sign
from pizzamail.web import Hooks, create_app, start_http_server

SECRET = "s3cret-for-tests"


@pytest.fixture
async def client(home: Home, store: Store, blobs: BlobStore) -> AsyncIterator[httpx.AsyncClient]:
    config = parse_config({"hooks": {
        "gh": {"prompt": "New issue: {{ payload.title }} by {{ payload.user.login }}", "max_body": 2000},
        "raw": {"thread": "one"},
        "simple": {"auth": "bearer", "rate": 2},
    }})
    secrets = secret_store(home)
    for name in ("gh", "raw", "simple"):
        secrets.set(f"hook:{name}", SECRET)
    server = await start_http_server(create_app(Hooks(store=store, blobs=blobs, config=config,
                                                      secrets=secrets)), host="127.0.0.1", port=0)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as http:
            yield http
    finally:
        await server.close()


def signed(
    body: bytes, delivery: str, *, timestamp: int | None = None, secret: str = SECRET
) -> dict[str, str]:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    return {"X-Pizzamail-Timestamp": stamp, "X-Pizzamail-Delivery": delivery,
            "X-Pizzamail-Signature": sign(secret, stamp, body)}


async def task_text(store: Store, answer: httpx.Response) -> str:
    assert answer.status_code == 202, answer.text
    messages = await thread_messages(store, answer.json()["thread"])
    return messages[-1].body


async def test_good_signature_json_reaches_the_prompt(client: httpx.AsyncClient, store: Store) -> None:
    body = json.dumps({"title": "Crash on start", "user": {"login": "ada"}}).encode()
    answer = await client.post("/hooks/gh", content=body,
                               headers={**signed(body, "d1"), "Content-Type": "application/json"})
    assert await task_text(store, answer) == "New issue: Crash on start by ada"


async def test_form_and_text_payloads_whole(client: httpx.AsyncClient, store: Store) -> None:
    form = b"status=failed&job=build&job=test"
    answer = await client.post("/hooks/raw", content=form, headers={
        **signed(form, "f1"), "Content-Type": "application/x-www-form-urlencoded"})
    text = await task_text(store, answer)
    assert '"status": "failed"' in text and '"build"' in text and '"test"' in text
    plain = b"disk almost full on host7"
    again = await client.post("/hooks/raw", content=plain, headers={**signed(plain, "t1"),
                                                                    "Content-Type": "text/plain"})
    assert "disk almost full on host7" in await task_text(store, again)
    assert again.json()["thread"] == answer.json()["thread"]  # thread = "one"


async def test_bad_or_missing_signature_401(client: httpx.AsyncClient) -> None:
    body = b'{"title": "x"}'
    forged = await client.post("/hooks/gh", content=body, headers=signed(body, "d2", secret="wrong"))
    assert forged.status_code == 401
    assert (await client.post("/hooks/gh", content=body)).status_code == 401


async def test_replayed_delivery_409(client: httpx.AsyncClient) -> None:
    body = b'{"title": "x", "user": {"login": "y"}}'
    headers = {**signed(body, "same"), "Content-Type": "application/json"}
    assert (await client.post("/hooks/gh", content=body, headers=headers)).status_code == 202
    assert (await client.post("/hooks/gh", content=body, headers=headers)).status_code == 409
    old = signed(body, "old", timestamp=int(time.time()) - 3600)
    assert (await client.post("/hooks/gh", content=body, headers=old)).status_code == 409


async def test_oversized_413_malformed_400_unknown_404(client: httpx.AsyncClient) -> None:
    big = b'{"title": "' + b"x" * 5000 + b'"}'
    assert (await client.post("/hooks/gh", content=big, headers=signed(big, "b"))).status_code == 413
    bad = b"{not json"
    answer = await client.post("/hooks/gh", content=bad,
                               headers={**signed(bad, "m"), "Content-Type": "application/json"})
    assert answer.status_code == 400 and "malformed JSON" in answer.json()["error"]
    assert (await client.post("/hooks/nope", content=b"")).status_code == 404


async def test_bearer_and_rate_limit(client: httpx.AsyncClient, store: Store) -> None:
    auth = {"Authorization": f"Bearer {SECRET}"}
    assert (await client.post("/hooks/simple", content=b"hi", headers={"Authorization": "Bearer no"})
            ).status_code == 401
    first = await client.post("/hooks/simple", content=b"hello", headers=auth)
    assert "hello" in await task_text(store, first)
    assert (await client.post("/hooks/simple", content=b"hi", headers=auth)).status_code == 202
    assert (await client.post("/hooks/simple", content=b"hi", headers=auth)).status_code == 429


async def test_health(client: httpx.AsyncClient) -> None:
    health = (await client.get("/health")).json()
    assert health["ok"] is True and health["queued_runs"] == 0 and health["version"]
