"""The running service: every long-lived part in one lifecycle.

Parts start in order inside an ``AsyncExitStack`` (store, mailbox, scheduler, runner, SMTP, IMAP,
HTTP) and stop in reverse when the stack is left, so a signal or an error leaves nothing running
and no file half written. Every port is bound first: a port taken by another program stops the
start before the store is opened or a run resumed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import socket
import ssl
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from pizzamail.auth import Accounts, accounts_for, approvers, password_command, without_password
from pizzamail.composer import Composer
from pizzamail.config import Config
from pizzamail.errors import ConfigError, PortUnavailable, database_refusal
from pizzamail.guard import Gate
from pizzamail.home import Home, usable, write_private
from pizzamail.imap import start_imap_server
from pizzamail.intake.smtp import IntakeHandler, start_smtp_server
from pizzamail.intake.tasks import Stored
from pizzamail.mailbox import Mailbox
from pizzamail.mailbox.demo import seed_demo_data
from pizzamail.mailbox.filing import Filer
from pizzamail.runner import Runner
from pizzamail.secrets import SecretStore
from pizzamail.skills.tools import SkillSource
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.tools import ToolRegistry
from pizzamail.tools.builtins import Builtins
from pizzamail.tools.mcp import McpHub
from pizzamail.triggers.scheduler import Scheduler
from pizzamail.triggers.watch import Watchers
from pizzamail.web import Hooks, create_app, start_http_server

log = logging.getLogger("pizzamail.service")


@dataclass(frozen=True, kw_only=True)
class Listening:
    """Where the servers actually listen (a configured port 0 becomes a real one)."""

    host: str
    smtp: int
    imap: int
    imaps: int
    http: int = 0


@dataclass(frozen=True, kw_only=True)
class Sockets:
    """The listening sockets of the ``[server]`` ports, bound before any part starts."""

    smtp: socket.socket
    imap: socket.socket
    imaps: socket.socket | None
    http: socket.socket


def is_loopback(host: str) -> bool:
    return ipaddress.ip_address(host).is_loopback


def check_bind(config: Config, tls: ssl.SSLContext | None) -> None:
    """Passwords must never cross a network in clear text: beyond loopback, TLS is required."""
    if tls is None and not is_loopback(config.server.host):
        raise ConfigError(
            "server.host", config.server.host, "a loopback address such as 127.0.0.1 without TLS",
            hint="run `pizzamail init` to create a certificate, or set [server] tls_cert and tls_key",
        )


@dataclass(kw_only=True)
class Service:
    home: Home
    config: Config
    secrets: SecretStore
    tls: ssl.SSLContext | None = None
    demo_data: bool = False
    _tasks: set[asyncio.Task[object]] = field(default_factory=set)
    _poke_scheduler: Callable[[], None] = lambda: None
    """set once the scheduler exists (the tools are made before it): schedule_task pokes it"""
    _gate: Gate = field(default_factory=Gate)
    """SMTP and IMAP connections before login, and every password check, in one place: guessing
    is limited across both protocols, and nobody without the password can lock the owner out"""

    async def run(self, stop: asyncio.Event, ready: Callable[[Listening], None]) -> None:
        check_bind(self.config, self.tls)
        async with AsyncExitStack() as stack:
            listening = await self._started(stack)
            self._write_state(listening)
            stack.callback(self.home.state_file.unlink, missing_ok=True)
            ready(listening)
            await stop.wait()
            log.info("stopping")

    async def _started(self, stack: AsyncExitStack) -> Listening:
        """Every part started, or one line that says what in the home stands in the way: a file
        pizzamail cannot open or write, or a database another program holds."""
        try:
            with usable(self.home):
                return await self._start(stack, self._bind(stack))
        except Exception as exc:
            refusal = database_refusal(exc, self.home.database)
            if refusal is None:
                raise
            raise refusal from None

    def _bind(self, stack: AsyncExitStack) -> Sockets:
        return Sockets(smtp=self._listen(stack, "smtp_port"), imap=self._listen(stack, "imap_port"),
                       imaps=self._listen(stack, "imaps_port") if self.tls else None,
                       http=self._listen(stack, "http_port"))

    def _listen(self, stack: AsyncExitStack, key: str) -> socket.socket:
        """A socket listening on the port of ``[server] key`` (closed by the stack if the start fails;
        once a server serves it, the server closes it)."""
        host, port = self.config.server.host, int(getattr(self.config.server, key))
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        try:
            listener = socket.create_server((host, port), family=family)
        except OSError as exc:
            raise PortUnavailable(key, host, port, exc) from None
        return stack.enter_context(listener)

    async def _start(self, stack: AsyncExitStack, sockets: Sockets) -> Listening:
        store = await stack.enter_async_context(Store(path=self.home.database))
        blobs = BlobStore(root=self.home.blobs)
        mailbox = await Mailbox(root=self.home.maildir, store=store).open()
        filer = Filer(mailbox=mailbox, blobs=blobs)
        filed = await filer.run()
        if filed:
            log.info("filed %d message(s) left unfiled by the last run", filed)
        if self.demo_data:
            log.info("demo data: %d sample message(s) added", await seed_demo_data(mailbox))
        composer = Composer(config=self.config)
        tools = await self._start_tools(stack, store, blobs, composer, filer)
        runner = Runner(
            store=store, mailbox=mailbox, blobs=blobs, config=self.config, secrets=self.secrets,
            filer=filer.run, composer=composer, tools=tools, workspaces=self.home.root / "workspaces",
        )
        # before IMAP serves: a request copy a crash left unrecorded is recorded before the user
        # can delete it (a deletion means "ignore" only for a copy known to have been delivered)
        await runner.sync_approvals()
        scheduler = Scheduler(store=store, blobs=blobs, config=self.config, on_fired=runner.wake)
        self._poke_scheduler = scheduler.poke
        await scheduler.prepare()  # before the runner resumes interrupted runs
        await runner.start()
        stack.push_async_callback(runner.stop)
        await scheduler.start()
        stack.push_async_callback(scheduler.stop)
        stack.push_async_callback(self._drain)
        smtp_port = await self._start_smtp(stack, store, blobs, filer, runner, composer, sockets.smtp)
        server = self.config.server
        imap = await start_imap_server(
            sock=sockets.imap, tls_sock=sockets.imaps, mailbox=mailbox, accounts=self.accounts(),
            tls=self.tls, gate=self._gate,
        )
        stack.push_async_callback(imap.close)
        hooks = Hooks(store=store, blobs=blobs, config=self.config, secrets=self.secrets,
                      on_stored=runner.wake)
        http = await start_http_server(create_app(hooks), sock=sockets.http, gate=self._gate)
        stack.push_async_callback(http.close)
        watchers = Watchers(store=store, blobs=blobs, config=self.config, secrets=self.secrets,
                            on_posted=runner.wake)
        await watchers.start()  # remote mailboxes: stopped (logged out) before anything above
        stack.push_async_callback(watchers.stop)
        return Listening(host=server.host, smtp=smtp_port, imap=imap.port, imaps=imap.tls_port or 0,
                         http=http.port)

    async def _start_tools(
        self, stack: AsyncExitStack, store: Store, blobs: BlobStore, composer: Composer, filer: Filer
    ) -> ToolRegistry:
        """Built-ins, skills, then MCP servers (started now, stopped after the runner)."""
        config = self.config
        tools = ToolRegistry(rules=config.tools.policy, max_result_chars=config.tools.max_result_chars)
        tools.add_source(Builtins(
            store=store, blobs=blobs, composer=composer, sender=config.agent.address, file_mail=filer.run,
            memory_file=self.home.root / "memory.md", max_file_bytes=config.tools.max_file_bytes,
            schedules_changed=lambda: self._poke_scheduler(),
        ))
        if config.skills.enabled:
            tools.add_source(SkillSource(home_skills=self.home.skills, paths=config.skills.paths))
        hub = McpHub(settings=config.mcp, secrets=self.secrets, log_dir=self.home.logs, cwd=self.home.root,
                     rules=config.tools.policy)
        await stack.enter_async_context(hub)
        for name, connection in hub.connections.items():
            log.info("MCP server %s: %s%s", name, connection.status,
                     f" ({connection.error})" if connection.error else "")
        tools.add_source(hub)
        return tools

    async def _start_smtp(
        self, stack: AsyncExitStack, store: Store, blobs: BlobStore, filer: Filer, runner: Runner,
        composer: Composer, sock: socket.socket,
    ) -> int:
        async def file_and_sync() -> None:
            await filer.run()
            await runner.sync_approvals()  # a decided request leaves the Action folder

        def stored(_: Stored) -> None:
            runner.wake()
            self._spawn(file_and_sync())

        for name in without_password(self.config, self.secrets):
            log.warning("sender %s has no password and cannot log in; run `%s`", name, password_command(name))
        handler = IntakeHandler(
            store=store, blobs=blobs, accounts=self.accounts(),
            agents=frozenset({self.config.agent.address.lower()}), domain=self.config.domain,
            on_stored=stored, composer=composer, approvers=approvers(self.config),
        )
        settings = self.config.server
        server = await start_smtp_server(
            sock=sock, handler=handler,
            max_size=settings.max_message_size, tls=self.tls,
            require_tls=not is_loopback(settings.host), gate=self._gate,
        )
        stack.push_async_callback(_close_server, server)
        return int(server.sockets[0].getsockname()[1])

    def accounts(self) -> Accounts:
        """The owner (SMTP and IMAP) and the enabled senders with a password (SMTP only)."""
        return accounts_for(self.config, self.secrets)

    def _spawn(self, work: Coroutine[object, object, object]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Filing is retried at the next delivery and at start-up; nothing is lost.
            log.error("background work failed", exc_info=task.exception())

    async def _drain(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _write_state(self, listening: Listening) -> None:
        state = {"pid": os.getpid(), "host": listening.host, "smtp_port": listening.smtp,
                 "imap_port": listening.imap, "imaps_port": listening.imaps, "http_port": listening.http}
        write_private(self.home.state_file, json.dumps(state).encode())


async def _close_server(server: asyncio.Server) -> None:
    server.close()
    await server.wait_closed()
