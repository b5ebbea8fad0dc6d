"""Webhook abuse over real HTTP: the app served by uvicorn on loopback, httpx as sender and attacker.

Every refusal is a 4xx with a short JSON reason (never exception text) and starts nothing: no thread,
no run. Senders here sign with the standard library, as a sender's own code would, so a mistake in
pizzamail's signing helpers cannot hide a mistake in its checks.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import httpx
import pytest

from pizzamail.config import Config, parse_config
from pizzamail.home import Home
from pizzamail.secrets import secret_store
from pizzamail.store import Store
from pizzamail.store.blobs import FileBlobs
from pizzamail.store.threads import thread_messages
from pizzamail.web import Hooks, create_app, start_http_server

SECRET = "s3cret-for-abuse"
WHSEC = "whsec_" + base64.b64encode(b"k" * 32).decode()
HOOKS = {
    "gh": {"prompt": "Issue: {{ payload.title }}"},
    "std": {"auth": "standard", "prompt": "Issue: {{ payload.title }}"},
    "rawkey": {"auth": "standard"},
    "small": {"max_body": 100},
    "slow": {"rate": 2},
    "plain": {},
    "sum": {"prompt": "{{ payload.a + payload.b }}"},
    "loop": {"prompt": "{% for a in payload %}{% for b in payload %}{{ a }}{{ b }}{% endfor %}{% endfor %}"},
}
KEYS = {"std": WHSEC, "rawkey": "not-base64-at-all"}
#: Python exception class names or a traceback: internals that must never reach the wire
LEAK = re.compile(r"Traceback|\b\w+(Error|Exception)\b|File \"")


@dataclass(kw_only=True)
class Site:
    """pizzamail's web app over a real store, which can be stopped and started again (a restart)."""

    home: Home
    config: Config
    http: httpx.AsyncClient | None = None
    store: Store | None = None
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    async def start(self) -> Site:
        self._stack = AsyncExitStack()
        self.store = await self._stack.enter_async_context(Store(path=self.home.database))
        hooks = Hooks(store=self.store, blobs=FileBlobs(root=self.home.blobs), config=self.config,
                      secrets=secret_store(self.home))
        server = await start_http_server(create_app(hooks), host="127.0.0.1", port=0)
        self._stack.push_async_callback(server.close)
        self.http = await self._stack.enter_async_context(
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=30))
        return self

    async def restart(self) -> None:
        await self._stack.aclose()
        await self.start()

    async def post(self, hook: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        assert self.http is not None  # header values as UTF-8 bytes: what a careless sender puts there
        raw = {k: v.encode() for k, v in headers.items()}
        return await self.http.post(f"/hooks/{hook}", content=body, headers=raw)

    async def threads(self) -> int:
        assert self.store is not None
        row = await self.store.fetchone("SELECT count(*) FROM threads")
        return int(row[0]) if row else 0

    async def task_text(self, answer: httpx.Response) -> str:
        assert answer.status_code == 202, answer.text
        assert self.store is not None
        return (await thread_messages(self.store, answer.json()["thread"]))[-1].body


@pytest.fixture
async def site(home: Home) -> AsyncIterator[Site]:
    secrets = secret_store(home)
    for name in HOOKS:
        secrets.set(f"hook:{name}", KEYS.get(name, SECRET))
    running = await Site(home=home, config=parse_config({"hooks": HOOKS})).start()
    try:
        yield running
    finally:
        await running._stack.aclose()


def pizzamail_headers(body: bytes, delivery: str, *, at: int | None = None, secret: str = SECRET,
                      json_body: bool = True) -> dict[str, str]:
    """Today's scheme: X-Pizzamail-Signature is sha256=HEX over ``timestamp.body``."""
    stamp = str(int(time.time()) if at is None else at)
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Pizzamail-Timestamp": stamp, "X-Pizzamail-Delivery": delivery,
            "X-Pizzamail-Signature": f"sha256={digest}",
            **({"Content-Type": "application/json"} if json_body else {})}


def standard_signature(key: bytes, msg_id: str, stamp: str, body: bytes) -> str:
    digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def standard_headers(body: bytes, msg_id: str, *, at: int | None = None, secret: str = WHSEC,
                     signature: str | None = None) -> dict[str, str]:
    """Standard Webhooks: webhook-signature is ``v1,BASE64`` over ``id.timestamp.body``."""
    stamp = str(int(time.time()) if at is None else at)
    key = base64.b64decode(secret.removeprefix("whsec_")) if secret.startswith("whsec_") else secret.encode()
    return {"webhook-id": msg_id, "webhook-timestamp": stamp, "content-type": "application/json",
            "webhook-signature": signature or standard_signature(key, msg_id, stamp, body)}


async def refused(site: Site, answer: httpx.Response, status: int, words: str) -> None:
    """A 4xx with a clear reason and no internals, and nothing started."""
    assert answer.status_code == status, answer.text
    reason = answer.json()["error"]
    assert words in reason, reason
    assert not LEAK.search(answer.text), answer.text
    assert await site.threads() == 0


BODY = json.dumps({"title": "Crash on start"}).encode()


def test_the_standard_webhooks_test_vector() -> None:
    """The spec's own example (also in its Go, JS, C# and Java tests), through our sender helper."""
    from pizzamail.triggers.signatures import sign_standard

    assert sign_standard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                         "1614265330", b'{"test": 2432232314}'
                         ) == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


# --- signatures ------------------------------------------------------------------------------------

def _tampered() -> Iterator[tuple[str, dict[str, str], int, str]]:
    good = pizzamail_headers(BODY, "d1")
    yield "no headers", {}, 401, "missing"
    yield "no delivery id", {k: v for k, v in good.items() if k != "X-Pizzamail-Delivery"}, 401, "missing"
    yield "wrong secret", pizzamail_headers(BODY, "d1", secret="guess"), 401, "bad signature"
    yield "not sha256=", {**good, "X-Pizzamail-Signature": good["X-Pizzamail-Signature"][7:]}, 401, \
        "bad signature"
    yield "not hex", {**good, "X-Pizzamail-Signature": "sha256=" + "z" * 64}, 401, "bad signature"
    yield "latin-1", {**good, "X-Pizzamail-Signature": "sha256=\xe9"}, 401, "bad signature"
    yield "timestamp swapped", {**good, "X-Pizzamail-Timestamp": str(int(time.time()) + 1)}, 401, \
        "bad signature"
    # Arabic-Indic digits: Python's int() reads them, but a timestamp is ASCII digits
    yield "odd digits", {**good, "X-Pizzamail-Timestamp": "\u0661\u0667"}, 400, "Unix seconds"
    yield "words", {**good, "X-Pizzamail-Timestamp": "soon"}, 400, "Unix seconds"


@pytest.mark.parametrize(("case", "headers", "status", "words"), list(_tampered()),
                         ids=[c[0] for c in _tampered()])
async def test_a_missing_malformed_or_wrong_signature_is_refused(
    site: Site, case: str, headers: dict[str, str], status: int, words: str
) -> None:
    await refused(site, await site.post("gh", BODY, headers), status, words)


async def test_a_body_changed_after_signing_is_refused(site: Site) -> None:
    headers = pizzamail_headers(BODY, "d1")
    await refused(site, await site.post("gh", BODY + b" ", headers), 401, "bad signature")


@pytest.mark.parametrize("skew", [-3600, -301, 310, 3600])  # future: margin for a slow machine
async def test_stale_and_future_timestamps_are_refused(site: Site, skew: int) -> None:
    at = int(time.time()) + skew
    await refused(site, await site.post("gh", BODY, pizzamail_headers(BODY, "d1", at=at)), 409, "window")
    await refused(site, await site.post("std", BODY, standard_headers(BODY, "m1", at=at)), 409, "window")


# --- replays ---------------------------------------------------------------------------------------

async def test_a_replay_with_the_same_delivery_id_is_refused(site: Site) -> None:
    headers = pizzamail_headers(BODY, "d1")
    assert "Crash on start" in await site.task_text(await site.post("gh", BODY, headers))
    again = await site.post("gh", BODY, headers)
    assert again.status_code == 409 and "signature was used before" in again.json()["error"]
    assert await site.threads() == 1


async def test_a_retry_of_a_delivery_received_before_is_already_received(site: Site) -> None:
    """The sender's retry (same id, signed anew) gets a 2xx, so it stops retrying, and starts nothing."""
    first = await site.post("gh", BODY, pizzamail_headers(BODY, "d1"))
    assert first.status_code == 202
    retry = await site.post("gh", BODY, pizzamail_headers(BODY, "d1", at=int(time.time()) + 1))
    assert retry.status_code == 200, retry.text
    assert retry.json() == {"ok": True, "already_received": True, "run": first.json()["run"],
                            "thread": first.json()["thread"]}
    assert await site.threads() == 1


async def test_a_replay_with_a_new_delivery_id_is_refused(site: Site) -> None:
    """The id is not covered by today's signature: the signature itself must not be accepted twice."""
    headers = pizzamail_headers(BODY, "d1")
    assert (await site.post("gh", BODY, headers)).status_code == 202
    again = await site.post("gh", BODY, {**headers, "X-Pizzamail-Delivery": "d2"})
    assert again.status_code == 409, again.text
    assert "signature was used before" in again.json()["error"]
    assert await site.threads() == 1


async def test_a_standard_webhook_replayed_is_refused_and_retried_already_received(site: Site) -> None:
    headers = standard_headers(BODY, "msg_1")
    assert "Crash on start" in await site.task_text(await site.post("std", BODY, headers))
    assert (await site.post("std", BODY, headers)).status_code == 409
    retry = standard_headers(BODY, "msg_1", at=int(time.time()) + 1)  # the sender's retry: same id
    answer = await site.post("std", BODY, retry)
    assert answer.status_code == 200 and answer.json()["already_received"] is True
    moved = {**headers, "webhook-id": "msg_2"}  # the id is signed: a new one breaks the signature
    assert (await site.post("std", BODY, moved)).status_code == 401
    assert await site.threads() == 1


async def test_replays_are_refused_after_a_restart(site: Site) -> None:
    legacy, standard = pizzamail_headers(BODY, "d1"), standard_headers(BODY, "msg_1")
    assert (await site.post("gh", BODY, legacy)).status_code == 202
    assert (await site.post("std", BODY, standard)).status_code == 202
    await site.restart()
    assert (await site.post("gh", BODY, {**legacy, "X-Pizzamail-Delivery": "d2"})).status_code == 409
    assert (await site.post("gh", BODY, legacy)).status_code == 409
    assert (await site.post("std", BODY, standard)).status_code == 409
    assert await site.threads() == 2


async def test_remembered_signatures_older_than_the_window_are_pruned(site: Site) -> None:
    assert site.store is not None
    async with site.store.write() as db:
        await db.execute("INSERT INTO webhook_signatures(hook, digest, signed_at) VALUES ('gh', 'old', ?)",
                         (int(time.time()) - 3600,))
    assert (await site.post("gh", BODY, pizzamail_headers(BODY, "d1"))).status_code == 202
    kept = await site.store.fetchall("SELECT digest FROM webhook_signatures")
    assert [r["digest"] for r in kept] != [] and "old" not in [r["digest"] for r in kept]


# --- Standard Webhooks ----------------------------------------------------------------------------

async def test_standard_webhooks_accept_any_listed_v1_signature(site: Site) -> None:
    """Key rotation: the sender signs with the old and the new key; one match is enough."""
    stamp = str(int(time.time()))
    right = standard_signature(base64.b64decode(WHSEC[6:]), "msg_r", stamp, BODY)
    wrong = standard_signature(b"old-key", "msg_r", stamp, BODY)
    headers = standard_headers(BODY, "msg_r", signature=f"v1a,c2lnbg== {wrong} {right}")
    headers["webhook-timestamp"] = stamp
    assert "Crash on start" in await site.task_text(await site.post("std", BODY, headers))


async def test_a_secret_without_whsec_is_used_as_it_is_written(site: Site) -> None:
    headers = standard_headers(BODY, "msg_k", secret="not-base64-at-all")
    assert (await site.post("rawkey", BODY, headers)).status_code == 202


def _standard_tampered() -> Iterator[tuple[str, dict[str, str], int, str]]:
    good = standard_headers(BODY, "msg_1")
    yield "no headers", {}, 401, "missing"
    yield "no id", {k: v for k, v in good.items() if k != "webhook-id"}, 401, "missing"
    yield "wrong secret", standard_headers(BODY, "msg_1", secret="whsec_" + "A" * 40), 401, "no valid"
    yield "only v1a", {**good, "webhook-signature": "v1a," + good["webhook-signature"][3:]}, 401, "no valid"
    yield "garbage", {**good, "webhook-signature": "garbage  v1,!!!"}, 401, "no valid"
    yield "hex", {**good, "webhook-signature": "v1," + "ab" * 32}, 401, "no valid"
    yield "dotted id", standard_headers(BODY, "msg.1"), 400, "webhook-id"
    yield "long id", standard_headers(BODY, "m" * 300), 400, "webhook-id"
    yield "bad timestamp", {**good, "webhook-timestamp": "soon"}, 400, "Unix seconds"


@pytest.mark.parametrize(("case", "headers", "status", "words"), list(_standard_tampered()),
                         ids=[c[0] for c in _standard_tampered()])
async def test_a_bad_standard_webhook_is_refused(
    site: Site, case: str, headers: dict[str, str], status: int, words: str
) -> None:
    await refused(site, await site.post("std", BODY, headers), status, words)


async def test_each_hook_takes_only_its_own_scheme(site: Site) -> None:
    await refused(site, await site.post("gh", BODY, standard_headers(BODY, "m", secret=SECRET)), 401,
                  "missing")
    await refused(site, await site.post("std", BODY, pizzamail_headers(BODY, "d", secret=WHSEC)), 401,
                  "missing")


# --- bodies ----------------------------------------------------------------------------------------

async def test_oversized_bodies_are_refused_declared_or_streamed(site: Site) -> None:
    big = b'{"title": "' + b"x" * 200 + b'"}'
    await refused(site, await site.post("small", big, pizzamail_headers(big, "b1")), 413, "larger than 100")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit holds while reading
        for _ in range(10):
            yield b"x" * 50

    assert site.http is not None
    streamed = await site.http.post("/hooks/small", content=chunks(), headers=pizzamail_headers(big, "b2"))
    await refused(site, streamed, 413, "larger than 100")


@pytest.mark.parametrize("opener", ["[", '{"a":'])
async def test_json_nested_100000_deep_is_a_400(site: Site, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    deep = (opener * 100_000 + "1" + closer * 100_000).encode()
    await refused(site, await site.post("gh", deep, pizzamail_headers(deep, "deep")), 400, "nested deeper")


async def test_nesting_is_allowed_up_to_the_limit_and_brackets_in_strings_do_not_count(site: Site) -> None:
    from pizzamail.triggers.hooks import MAX_DEPTH

    fine = ("[" * MAX_DEPTH + '"[[[{{{\\"[["' + "]" * MAX_DEPTH).encode()
    assert (await site.post("gh", fine, pizzamail_headers(fine, "ok"))).status_code == 202
    over = ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).encode()
    answer = await site.post("gh", over, pizzamail_headers(over, "over"))
    assert answer.status_code == 400 and "nested deeper" in answer.json()["error"]


@pytest.mark.parametrize(("content_type", "body"), [
    ("application/json", b'{"title": "caf\xe9"}'),
    ("text/plain", b"\xff\xfe broken"),
    ("application/x-www-form-urlencoded", b"title=\xc3"),
])
async def test_invalid_utf8_is_a_400(site: Site, content_type: str, body: bytes) -> None:
    headers = {**pizzamail_headers(body, "u"), "Content-Type": content_type}
    await refused(site, await site.post("gh", body, headers), 400, "not UTF-8")


@pytest.mark.parametrize(("body", "words"), [
    (b"{not json", "malformed JSON"),
    (b'{"n": ' + b"9" * 5000 + b"}", "malformed JSON"),
    (b'\xef\xbb\xbf{"title": "bom"}', "malformed JSON"),
])
async def test_json_that_cannot_be_read_is_a_400(site: Site, body: bytes, words: str) -> None:
    await refused(site, await site.post("gh", body, pizzamail_headers(body, "j")), 400, words)


@pytest.mark.parametrize("body", [b"[1, 2]", b'"just text"', b"42", b"null", b"true", b"",
                                  b'{"title": "\\ud800 lone \\udfff"}', b'{"title": "nul \\u0000 char"}'])
async def test_any_json_value_becomes_a_task(site: Site, body: bytes) -> None:
    answer = await site.post("gh", body, pizzamail_headers(body, "v"))
    assert (await site.task_text(answer)).startswith("Issue: ")


async def test_a_form_or_text_sent_as_json_is_a_400_and_odd_content_types_are_text(site: Site) -> None:
    form = b"title=hello"
    await refused(site, await site.post("gh", form, pizzamail_headers(form, "f")), 400, "malformed JSON")
    odd = {**pizzamail_headers(form, "o"), "Content-Type": ";;; x/y; charset=nothing"}
    assert "Issue: " in await site.task_text(await site.post("gh", form, odd))


async def test_a_template_that_fails_on_a_payload_is_a_422_without_internals(site: Site) -> None:
    body = json.dumps({"a": 1, "b": "two"}).encode()  # int + str inside the owner's template
    await refused(site, await site.post("sum", body, pizzamail_headers(body, "t")), 422, "prompt template")
    assert site.store is not None  # the owner sees why (`pizzamail triggers`)
    row = await site.store.fetchone("SELECT last_outcome FROM hooks WHERE name = 'sum'")
    assert row is not None and "TypeError: unsupported operand" in row["last_outcome"]


async def test_a_bug_of_ours_is_a_500_without_internals(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("internal state at /home/me/.secret")

    monkeypatch.setattr("pizzamail.web.read_payload", broken)
    answer = await site.post("gh", BODY, pizzamail_headers(BODY, "bug"))
    assert answer.status_code == 500 and answer.json()["ok"] is False
    assert "secret" not in answer.text and not LEAK.search(answer.text)
    assert await site.threads() == 0


async def test_a_huge_rendering_is_refused_and_a_huge_payload_is_shown_compact(site: Site) -> None:
    items = json.dumps(list(range(20_000))).encode()  # the owner's loop squares it: 400 million items
    await refused(site, await site.post("loop", items, pizzamail_headers(items, "h")), 413, "prompt")
    # 100,000 zeros 60 levels deep: pretty-printed, each on its own indented line, that is 12 MB
    wide = ("[" * 60 + ",".join(["0"] * 100_000) + "]" * 60).encode()
    text = await site.task_text(await site.post("plain", wide, pizzamail_headers(wide, "w")))
    assert len(text) < 2 * len(wide) and "0,0,0" in text


# --- everything else a client can send ---------------------------------------------------------------

@pytest.mark.parametrize(("name", "words"), [
    ("nope", "no hook 'nope'"), ("x" * 5000, "no hook"), ("gh%00", "no hook"), ("%E9t%C3%A9", "no hook"),
    ("..%2F..%2Fetc", "Not Found"),  # no longer a name: no route at all
])
async def test_unknown_hook_names_are_a_404(site: Site, name: str, words: str) -> None:
    answer = await site.post(name, BODY, pizzamail_headers(BODY, "n"))
    await refused(site, answer, 404, words)
    assert len(answer.content) < 400


async def test_the_rate_limit_holds_for_signed_deliveries(site: Site) -> None:
    for n in range(2):
        body = json.dumps({"n": n}).encode()
        assert (await site.post("slow", body, pizzamail_headers(body, f"r{n}"))).status_code == 202
    body = b'{"n": 3}'
    answer = await site.post("slow", body, pizzamail_headers(body, "r3"))
    assert answer.status_code == 429 and "a minute" in answer.json()["error"]
    assert await site.threads() == 2


async def test_a_replay_does_not_use_up_the_rate_limit(site: Site) -> None:
    first = pizzamail_headers(BODY, "r0")
    assert (await site.post("slow", BODY, first)).status_code == 202
    for n in range(5):
        assert (await site.post("slow", BODY, {**first, "X-Pizzamail-Delivery": f"x{n}"})).status_code == 409
    body = b'{"n": 1}'
    assert (await site.post("slow", body, pizzamail_headers(body, "r1"))).status_code == 202


async def test_huge_headers_are_refused(site: Site) -> None:
    headers = {**pizzamail_headers(BODY, "hh"), "X-Padding": "p" * 100_000}
    answer = await site.post("gh", BODY, headers)
    assert answer.status_code in (400, 431) and not LEAK.search(answer.text)
    many = {**pizzamail_headers(BODY, "hm"), **{f"X-H{n}": "v" * 4 for n in range(3000)}}
    await refused(site, await site.post("gh", BODY, many), 431, "headers larger than")
    assert await site.threads() == 0


async def test_the_happy_path_still_works_for_both_schemes(site: Site) -> None:
    legacy = await site.post("gh", BODY, pizzamail_headers(BODY, "ok1"))
    standard = await site.post("std", BODY, standard_headers(BODY, "msg_ok"))
    assert await site.task_text(legacy) == await site.task_text(standard) == "Issue: Crash on start"
