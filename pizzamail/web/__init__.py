"""The small HTTP app (Starlette on uvicorn, loopback by default): webhooks and health.

uvicorn runs inside the service's own loop: :func:`start_http_server` calls its startup and
shutdown directly (not ``Server.serve``, which would take over SIGINT/SIGTERM from ``serve``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pizzamail import __version__
from pizzamail.config import Config, HookSettings
from pizzamail.guard import TokenBucket
from pizzamail.secrets import SecretStore
from pizzamail.store import Store, now
from pizzamail.store.blobs import BlobStore
from pizzamail.triggers.hooks import (
    Rejected,
    check_bearer,
    check_hmac,
    read_payload,
    render_prompt,
)
from pizzamail.triggers.post import TriggerMail, post_task

log = logging.getLogger("pizzamail.web")


@dataclass(kw_only=True)
class Hooks:
    """Receives deliveries: authenticate, limit, read, render, record (a task in one transaction)."""

    store: Store
    blobs: BlobStore
    config: Config
    secrets: SecretStore
    on_stored: Callable[[], None] = lambda: None
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)

    async def receive(self, request: Request) -> JSONResponse:
        name = request.path_params["name"]
        try:
            run_id, thread_id = await self._receive(name, request)
        except Rejected as exc:
            await self._outcome(name, f"rejected {exc.status}: {exc.reason}")
            return JSONResponse({"ok": False, "error": exc.reason}, status_code=exc.status)
        self.on_stored()
        return JSONResponse({"ok": True, "run": run_id, "thread": thread_id}, status_code=202)

    async def _receive(self, name: str, request: Request) -> tuple[int, int]:
        settings = self.config.hooks.get(name)
        if settings is None:
            raise Rejected(404, f"no hook {name!r} (add [hooks.{name}] to config.toml)")
        body = await _body(request, settings.max_body)
        delivery = self._authenticate(name, settings, request, body)
        if not self._buckets.setdefault(name, TokenBucket(rate=settings.rate)).take():
            raise Rejected(429, f"more than {settings.rate} deliveries a minute")
        payload = read_payload(request.headers.get("content-type", ""), body)
        text = render_prompt(settings.prompt, payload, hook=name)
        return await self._record(name, settings, delivery, text)

    def _authenticate(self, name: str, settings: HookSettings, request: Request, body: bytes) -> str:
        secret = self.secrets.get(f"hook:{name}")
        if not secret:
            raise Rejected(401, f"hook {name!r} has no secret yet (`pizzamail keys set hook:{name}`)")
        if settings.auth == "bearer":
            check_bearer(secret, request.headers)
            return request.headers.get("x-pizzamail-delivery", "")
        return check_hmac(secret, request.headers, body)

    async def _record(self, name: str, settings: HookSettings, delivery: str, text: str) -> tuple[int, int]:
        config = self.config
        mail = TriggerMail(subject=f"Webhook: {name}", text=text, source=f"hook:{name}",
                           sender=config.account.address, agent=config.agent.address, domain=config.domain)
        async with self.store.write() as db:
            if delivery:
                cursor = await db.execute(
                    "INSERT INTO deliveries(hook, delivery_id, received_at) VALUES (?, ?, ?)"
                    " ON CONFLICT(hook, delivery_id) DO NOTHING", (name, delivery, now()))
                if cursor.rowcount == 0:
                    raise Rejected(409, f"delivery {delivery!r} was received before")
            async with db.execute("SELECT thread_id FROM hooks WHERE name = ?", (name,)) as rows:
                row = await rows.fetchone()
            thread_id = row["thread_id"] if row is not None and settings.thread == "one" else None
            posted = await post_task(db, self.blobs, mail, thread_id=thread_id)
            await db.execute(
                "INSERT INTO hooks(name, thread_id, last_at, last_outcome) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(name) DO UPDATE SET thread_id = excluded.thread_id, last_at = excluded.last_at,"
                " last_outcome = excluded.last_outcome",
                (name, posted.thread_id, now(), f"run {posted.run_id}"))
            if delivery:
                await db.execute("UPDATE deliveries SET run_id = ? WHERE hook = ? AND delivery_id = ?",
                                 (posted.run_id, name, delivery))
        return posted.run_id, posted.thread_id

    async def _outcome(self, name: str, outcome: str) -> None:
        if name not in self.config.hooks:
            return
        async with self.store.write() as db:
            await db.execute(
                "INSERT INTO hooks(name, last_at, last_outcome) VALUES (?, ?, ?) ON CONFLICT(name)"
                " DO UPDATE SET last_at = excluded.last_at, last_outcome = excluded.last_outcome",
                (name, now(), outcome))


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise Rejected(413, f"body larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Rejected(413, f"body larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(hooks: Hooks) -> Starlette:
    async def health(_: Request) -> JSONResponse:
        row = await hooks.store.fetchone("SELECT count(*) FROM runs WHERE status = 'queued'")
        return JSONResponse({"ok": True, "version": __version__, "queued_runs": int(row[0]) if row else 0})

    return Starlette(routes=[
        Route("/health", health, methods=["GET"]),
        Route("/hooks/{name}", hooks.receive, methods=["POST"]),
    ])


@dataclass(kw_only=True)
class HttpServer:
    server: uvicorn.Server
    port: int

    async def close(self) -> None:
        await self.server.shutdown()


async def start_http_server(app: Starlette, *, host: str, port: int) -> HttpServer:
    config = uvicorn.Config(app, host=host, port=port, lifespan="off", log_config=None,
                            access_log=False, date_header=False, server_header=False)
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup()
    bound = int(server.servers[0].sockets[0].getsockname()[1])
    return HttpServer(server=server, port=bound)
