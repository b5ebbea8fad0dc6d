"""The small HTTP app (Starlette on uvicorn, loopback by default): webhooks, health, and
Thunderbird's autoconfig XML (:mod:`pizzamail.onboard`).

uvicorn runs inside the service's own loop: :func:`start_http_server` calls its startup and
shutdown directly (not ``Server.serve``, which would take over SIGINT/SIGTERM from ``serve``).

Every HTTP connection waits at the gate (shared with SMTP and IMAP) for as long as it is open:
nobody logs in over HTTP, and uvicorn itself lets a client send its headers a byte a minute for
ever, so a thousand such connections took every descriptor of the process, IMAP's and SMTP's too.
At the gate they share its room and its deadline (a webhook is sent in well under a minute).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from pizzamail import __version__
from pizzamail.config import Config, HookSettings
from pizzamail.errors import HttpRefusal, PizzamailError, Unavailable, transient
from pizzamail.guard import Gate, TokenBucket, Visitor
from pizzamail.onboard import (
    AUTOCONFIG_BY_DOMAIN,
    AUTOCONFIG_PATHS,
    Account,
    Listeners,
    autoconfig_xml,
    client_host,
)
from pizzamail.secrets import SecretStore
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.deliveries import earlier_run, link_run, remember, seen_before
from pizzamail.store.hooks import hook_thread, record_outcome, record_run
from pizzamail.store.runs import count_queued
from pizzamail.triggers.hooks import read_payload, render_prompt
from pizzamail.triggers.post import TriggerMail, post_task
from pizzamail.triggers.signatures import WINDOW, Delivery, check

log = logging.getLogger("pizzamail.web")

#: the most header bytes a request may carry (h11, under uvicorn, caps only headers still arriving)
MAX_HEADER_BYTES = 16 * 1024
#: what a replay refused as such says, by what gave it away
_REPLAYED = {"delivery": "delivery {id!r} was received before",
             "signature": "this signature was used before: a replayed delivery is not run again"}


@dataclass(frozen=True, kw_only=True)
class Again:
    """A delivery id received before (authenticated again): the run its first attempt started."""

    run: int
    thread: int


@dataclass(kw_only=True)
class Hooks:
    """Receives deliveries: authenticate, limit, read, render, record (a task in one transaction)."""

    store: Store
    blobs: BlobStore
    config: Config
    secrets: SecretStore
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)

    async def receive(self, request: Request) -> JSONResponse:
        name = request.path_params["name"]
        try:
            received = await self._receive(name, request)
        except HttpRefusal as exc:
            if exc.detail:
                log.warning("hook %s: %s", name, exc.detail)
            await self._outcome(name, f"refused {exc.status}: {exc.detail or exc.message}")
            return _answer(exc)
        if isinstance(received, Again):
            # a 2xx, or the sender would retry for days: its earlier attempt (perhaps cut off by a
            # crash before the answer went out) made the one task this delivery makes
            return JSONResponse({"ok": True, "already_received": True, "run": received.run,
                                 "thread": received.thread}, status_code=200)
        run_id, thread_id = received
        return JSONResponse({"ok": True, "run": run_id, "thread": thread_id}, status_code=202)

    async def _receive(self, name: str, request: Request) -> tuple[int, int] | Again:
        if sum(len(k) + len(v) for k, v in request.scope["headers"]) > MAX_HEADER_BYTES:
            raise HttpRefusal(431, f"request headers larger than {MAX_HEADER_BYTES} bytes")
        settings = self.config.hooks.get(name)
        if settings is None:
            raise HttpRefusal(404, f"no hook {name[:40]!r} (add [hooks.NAME] to config.toml)")
        body = await _body(request, settings.max_body)
        delivery = self._authenticate(name, settings, request, body)
        # before the rate limit: replays use up no tokens
        if (again := await self._replayed(name, delivery)) is not None:
            return again
        if not self._buckets.setdefault(name, TokenBucket(rate=settings.rate)).take():
            raise HttpRefusal(429, f"more than {settings.rate} deliveries a minute")
        payload = read_payload(request.headers.get("content-type", ""), body)
        # a template or a pretty-printed payload may grow well past the body; twice max_body is room
        text = render_prompt(settings.prompt, payload, hook=name, limit=2 * settings.max_body + 65536)
        return await self._record(name, settings, delivery, text)

    def _authenticate(self, name: str, settings: HookSettings, request: Request, body: bytes) -> Delivery:
        secret = self.secrets.get(f"hook:{name}")
        if not secret:
            raise HttpRefusal(401, f"hook {name!r} has no secret yet (`pizzamail keys set hook:{name}`)")
        return check(settings.auth, secret, request.headers, body)

    async def _replayed(self, name: str, delivery: Delivery) -> Again | None:
        """The earlier run of a delivery id received before (a retry, signed anew); a signature
        seen before (a replayed request) is refused."""
        seen = await seen_before(self.store, name, delivery.id, delivery.digest)
        if seen == "delivery" and (run := await earlier_run(self.store, name, delivery.id)) is not None:
            return Again(run=run[0], thread=run[1])
        if seen:
            raise HttpRefusal(409, _REPLAYED[seen].format(id=delivery.id))
        return None

    async def _record(
        self, name: str, settings: HookSettings, delivery: Delivery, text: str
    ) -> tuple[int, int]:
        config = self.config
        mail = TriggerMail(subject=f"Webhook: {name}", text=text, source=f"hook:{name}",
                           sender=config.account.address, agent=config.agent.address, domain=config.domain,
                           model=settings.model)
        async with self.store.write() as db:
            # kept twice the window: a clock set back a little must not revive a forgotten signature
            seen = await remember(db, name, delivery.id, delivery.digest, signed_at=delivery.signed_at,
                                  forget_before=int(time.time()) - 2 * WINDOW)
            if seen:
                raise HttpRefusal(409, _REPLAYED[seen].format(id=delivery.id))
            thread_id = await hook_thread(db, name) if settings.thread == "one" else None
            posted = await post_task(db, self.blobs, mail, thread_id=thread_id)
            await record_run(db, name, thread_id=posted.thread_id, run_id=posted.run_id)
            await link_run(db, name, delivery.id, posted.run_id)
        return posted.run_id, posted.thread_id

    async def _outcome(self, name: str, outcome: str) -> None:
        if name not in self.config.hooks:
            return
        await record_outcome(self.store, name, outcome)


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HttpRefusal(413, f"body larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HttpRefusal(413, f"body larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    """Starlette's own refusals (no such route, wrong method) in the same JSON shape as ours."""
    assert isinstance(exc, HTTPException)
    return JSONResponse({"ok": False, "error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _server_error(_: Request, exc: Exception) -> JSONResponse:
    # Starlette logs the traceback after this answer; the client learns only that it was our fault,
    # or, for a failure that may pass (the database held by another process), when to try again
    if isinstance(exc, PizzamailError):
        return _answer(exc)
    return _answer(Unavailable() if transient(exc) else PizzamailError(str(exc)))


def _answer(error: PizzamailError) -> JSONResponse:
    answer = error.http_response()
    return JSONResponse(answer.body(), status_code=answer.status, headers=answer.headers)


def autoconfig(config: Config, listeners: Listeners) -> Callable[[Request], Awaitable[Response]]:
    """Thunderbird's account config for the owner's address. A server bound to every address is
    named as the client named it; ``/autoconfig/v1.1/DOMAIN`` answers only for the owner's domain."""
    async def answer(request: Request) -> Response:
        address = config.account.address
        asked = request.path_params.get("domain")
        if asked is not None and asked.lower() != address.rpartition("@")[2].lower():
            raise HTTPException(404, f"no mail account here for {asked[:80]!r}")
        host = client_host(listeners.host, request.url.hostname or socket.gethostname())
        account = Account(user=config.account.user, address=address,
                          listeners=replace(listeners, host=host))
        return Response(autoconfig_xml(account), media_type="application/xml")

    return answer


def create_app(hooks: Hooks, listeners: Listeners | None = None) -> Starlette:
    """The app; with ``listeners`` (the mail servers as they run) it serves the autoconfig XML too."""
    async def health(_: Request) -> JSONResponse:
        queued = await count_queued(hooks.store)
        return JSONResponse({"ok": True, "version": __version__, "queued_runs": queued})

    routes = [Route("/health", health, methods=["GET"]),
              Route("/hooks/{name}", hooks.receive, methods=["POST"])]
    if listeners is not None:
        xml = autoconfig(hooks.config, listeners)
        routes += [Route(path, xml, methods=["GET"]) for path in AUTOCONFIG_PATHS]
        routes.append(Route(AUTOCONFIG_BY_DOMAIN + "{domain}", xml, methods=["GET"]))
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error, Exception: _server_error})


@dataclass(kw_only=True)
class HttpServer:
    server: uvicorn.Server
    port: int

    async def close(self) -> None:
        await self.server.shutdown()


def _gated(gate: Gate) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with each connection at ``gate`` from its first byte to its last."""

    class Gated(H11Protocol):
        visitor: Visitor | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.visitor = gate.admit(lambda why: transport.close())

        def connection_lost(self, exc: Exception | None) -> None:
            if self.visitor is not None:
                gate.leave(self.visitor)
            super().connection_lost(exc)

    return Gated


async def start_http_server(
    app: Starlette, *, host: str = "127.0.0.1", port: int = 0, sock: socket.socket | None = None,
    gate: Gate | None = None,
) -> HttpServer:
    """Serve ``app`` on ``host:port`` (0 picks a free port) or on ``sock``, bound beforehand;
    ``serve`` shares its ``gate`` with SMTP and IMAP."""
    config = uvicorn.Config(app, host=host, port=port, lifespan="off", log_config=None,
                            http=_gated(gate or Gate()), access_log=False, date_header=False,
                            server_header=False)
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock] if sock else None)
    bound = int(server.servers[0].sockets[0].getsockname()[1])
    return HttpServer(server=server, port=bound)
