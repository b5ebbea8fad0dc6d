"""The running service: every long-lived part in one lifecycle.

Parts start in order inside an ``AsyncExitStack`` (store, mailbox, filing, the Action folder's sync,
the Activity board, MCP servers, scheduler, runner, approvals sweep, SMTP/IMAP/HTTP, watches, and in
IMAP mode the reader of the user's INBOX) and stop in reverse when the stack is left, so a signal or
an error leaves nothing running and no file half written. With ``[mailbox] mode = "imap"`` the
mailbox is the user's own IMAP account (:class:`~pizzamail.remote.box.RemoteMailbox`) and no SMTP
or IMAP port is opened: only HTTP.
Parts never call each other back: they follow the store's commit events (a message added is filed,
a queued run wakes the runner, a changed schedule wakes the scheduler, a decided action updates the
Action folder, a run that moves updates the Activity board). Every port is bound first: a port
taken by another program stops the start before the store is opened or a run resumed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import socket
import ssl
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field

from pizzamail.activity.board import Board
from pizzamail.activity.live import LiveBoard
from pizzamail.approvals.service import Approvals, Sweep
from pizzamail.auth import Accounts, accounts_for, password_command, without_password
from pizzamail.composer import Composer
from pizzamail.config import Config
from pizzamail.demo import add_demo_data
from pizzamail.errors import ConfigError, PortUnavailable, database_refusal
from pizzamail.guard import Gate
from pizzamail.home import Home, usable, write_private
from pizzamail.imap import cache as imap_cache
from pizzamail.imap import start_imap_server
from pizzamail.intake.pace import Intake
from pizzamail.intake.reader import inbox_reader
from pizzamail.intake.smtp import IntakeHandler, start_smtp_server
from pizzamail.lanes import hold_while
from pizzamail.mailbox import Mailbox
from pizzamail.mailbox.filing import Filer
from pizzamail.onboard import Listeners
from pizzamail.remote.account import mailbox_password
from pizzamail.remote.box import RemoteMailbox
from pizzamail.runner import Runner
from pizzamail.runner.apart import RunnerProcess
from pizzamail.secrets import SecretStore
from pizzamail.skills.tools import SkillSource
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.events import ActionDecided, Follow, MessageAdded, Resync, RunChanged
from pizzamail.store.leader import Leadership, hold_for
from pizzamail.store.location import blobs_for, store_for, workspaces_for
from pizzamail.store.sql import SQLITE
from pizzamail.tools import ToolRegistry
from pizzamail.tools.builtins import Builtins
from pizzamail.tools.hub import McpHub
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
    """The listening sockets of the ``[server]`` ports, bound before any part starts; no SMTP or
    IMAP ones in IMAP mode (the user's own account is the mailbox)."""

    smtp: socket.socket | None
    imap: socket.socket | None
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

    @property
    def local(self) -> bool:
        """pizzamail's own SMTP and IMAP servers hold the mail (``[mailbox] mode = "local"``)."""
        return self.config.mailbox.mode == "local"

    def _bind(self, stack: AsyncExitStack) -> Sockets:
        local = self.local
        return Sockets(smtp=self._listen(stack, "smtp_port") if local else None,
                       imap=self._listen(stack, "imap_port") if local else None,
                       imaps=self._listen(stack, "imaps_port") if local and self.tls else None,
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
        store = await stack.enter_async_context(store_for(self.home, self.config, self.secrets))
        leadership = await stack.enter_async_context(Leadership(hold=hold_for(store)))
        blobs = blobs_for(self.home, store)
        # the index is in the database: a standby leaves it to the leader (its Maildir may lack files)
        local = (await Mailbox(root=self.home.maildir, store=store, describe=imap_cache.describe)
                 .open(reconcile=leadership.leading)
                 if self.local else None)
        mailbox = local or await self._remote(stack, store)
        # the mail index is in the database, shared by every serve: only the leader writes the mail;
        # mail being handed over by SMTP goes first
        taking = Intake()
        stack.callback(hold_while(taking.hold))  # runs wait while mail is being handed over
        filer = Filer(mailbox=mailbox, blobs=blobs, files=lambda: leadership.leading, pace=taking.paused)
        filed = await filer.run()
        if filed:
            log.info("filed %d message(s) left unfiled by the last run", filed)
        if self.demo_data and local is not None:  # the tour is for pizzamail's own mailbox, not yours
            log.info("demo data: %d thread(s) added", await add_demo_data(store, blobs, self.config))
            await filer.run()
        composer = Composer(config=self.config)
        approvals = Approvals(store=store, blobs=blobs, mailbox=mailbox, config=self.config,
                              composer=composer, file_mail=filer.run, secrets=self.secrets,
                              keeps_action=lambda: leadership.leading)
        hub = None if self._runner_apart(store) else mcp_hub(self.home, self.config, self.secrets)
        runner: AbstractAsyncContextManager[object] = RunnerProcess(home=self.home, store=store) \
            if hub is None else Runner(
                store=store, mailbox=mailbox, blobs=blobs, config=self.config, secrets=self.secrets,
                filer=filer, composer=composer,
                tools=agent_tools(self.home, self.config, store, blobs, composer, hub),
                workspaces=workspaces_for(self.home, store), approvals=approvals,
            )
        # before IMAP serves: a request copy a crash left unrecorded is recorded before the user
        # can delete it (a deletion means "ignore" only for a copy known to have been delivered)
        if leadership.leading:
            await approvals.sweep()
        served = None if local is None else LocalMail(
            mailbox=local, accounts=self.accounts(), intake=self._intake(store, blobs, approvals, taking))
        servers = Servers(config=self.config, tls=self.tls, sockets=sockets, gate=self._gate, local=served,
                          hooks=Hooks(store=store, blobs=blobs, config=self.config, secrets=self.secrets))
        led = leadership.led
        board = Board(store=store, mailbox=mailbox, blobs=blobs, composer=composer, config=self.config,
                      file_mail=filer.run)
        parts: tuple[AbstractAsyncContextManager[object], ...] = (
            *(led(name, make) for name, make in mail_follows(store, filer, approvals).items()),
            # one status mail per run in Activity; reconciled before the runner resumes runs
            led("the Activity board", lambda: LiveBoard(board=board, events=store.events)),
            *((hub,) if hub else ()),  # MCP servers: stopped after the runner (a runner process has its own)
            # before the runner resumes runs
            led("the scheduler", lambda: Scheduler(store=store, blobs=blobs, config=self.config)),
            runner,
            # expiry, reminders, deleted requests: on its own timer
            led("the approvals sweep", lambda: Sweep(approvals=approvals)),
            servers,
            # remote mailboxes: stopped (logged out) before anything above
            led("the watches", lambda: Watchers(store=store, blobs=blobs, config=self.config,
                                                secrets=self.secrets)),
        )
        for part in parts:
            await stack.enter_async_context(part)
        if not self.local:  # the user's INBOX, read the way SMTP intake takes mail; stopped first
            await stack.enter_async_context(led("the INBOX reader", lambda: inbox_reader(
                self.config, store=store, blobs=blobs, approvals=approvals, secrets=self.secrets)))
        leadership.announce()
        if hub is not None:
            log_mcp_servers(hub)
        assert servers.listening is not None
        return servers.listening

    def _runner_apart(self, store: Store) -> bool:
        """Runs work in a process of their own (:mod:`pizzamail.runner.apart`): asked for, on a SQLite
        home (PostgreSQL has ``pizzamail worker``s for that), unless serve works on no runs."""
        runner = self.config.runner
        if runner.separate and store.dialect != SQLITE:
            log.warning("[runner] separate is for a SQLite home; with [store] url, runs work in this serve"
                        " (and in the `pizzamail worker`s you start)")
        return runner.separate and store.dialect == SQLITE and runner.concurrency != 0

    async def _remote(self, stack: AsyncExitStack, store: Store) -> RemoteMailbox:
        """The user's own account, logged in (a problem stops the start, naming its fix)."""
        remote = RemoteMailbox(store=store, settings=self.config.mailbox.imap,
                               password=mailbox_password(self.secrets))
        return await stack.enter_async_context(await remote.open())

    def _intake(self, store: Store, blobs: BlobStore, approvals: Approvals, taking: Intake) -> IntakeHandler:
        for name in without_password(self.config, self.secrets):
            log.warning("sender %s has no password and cannot log in; run `%s`", name, password_command(name))
        return IntakeHandler(
            store=store, blobs=blobs, accounts=self.accounts(),
            agents=frozenset(a.address for a in self.config.all_agents()), domain=self.config.domain,
            approvals=approvals, intake=taking,
        )

    def accounts(self) -> Accounts:
        """The owner (SMTP and IMAP) and the enabled senders with a password (SMTP only)."""
        return accounts_for(self.config, self.secrets)

    def _write_state(self, listening: Listening) -> None:
        state = {"pid": os.getpid(), "host": listening.host, "smtp_port": listening.smtp,
                 "imap_port": listening.imap, "imaps_port": listening.imaps, "http_port": listening.http}
        write_private(self.home.state_file, json.dumps(state).encode())


def mail_follows(store: Store, filer: Filer, approvals: Approvals) -> dict[str, Callable[[], Follow]]:
    """The mailbox kept up with the commits of this process and (PostgreSQL) of any other, such as a
    ``pizzamail worker``: new mail filed, ``Action`` = the waiting requests (a decision takes one
    out; a run put ``waiting`` brings one in, at once: a worker has no mailbox to sync). By name,
    each made anew whenever this serve becomes the leader."""
    return {
        "filing": lambda: Follow(events=store.events, kinds=(MessageAdded, Resync), work=filer.run,
                                 name="filing"),
        "the Action folder's sync": lambda: Follow(events=store.events, kinds=(ActionDecided, Resync),
                                                   work=approvals.sync, name="the Action folder's sync"),
        "requests to Action": lambda: Follow(
            events=store.events, kinds=(RunChanged,), work=approvals.sync, name="requests to Action",
            only=lambda event: event.status == "waiting"),
    }


def mcp_hub(home: Home, config: Config, secrets: SecretStore) -> McpHub:
    """The MCP servers of ``[mcp]``, not yet started (a part of the lifecycle)."""
    return McpHub(settings=config.mcp, secrets=secrets, log_dir=home.logs, cwd=home.root,
                  rules=config.tools.policy)


def log_mcp_servers(hub: McpHub) -> None:
    """One line a started MCP server: its status, and what went wrong."""
    for name, connection in hub.connections.items():
        log.info("MCP server %s: %s%s", name, connection.status,
                 f" ({connection.error})" if connection.error else "")


def agent_tools(home: Home, config: Config, store: Store, blobs: BlobStore, composer: Composer,
                hub: McpHub) -> ToolRegistry:
    """What a runner offers its agents: built-ins, skills, then MCP servers."""
    tools = ToolRegistry(rules=config.tools.policy, max_result_chars=config.tools.max_result_chars)
    tools.add_source(Builtins(
        store=store, blobs=blobs, composer=composer, sender=config.agent.address,
        memory_file=home.root / "memory.md", max_file_bytes=config.tools.max_file_bytes,
    ))
    if config.skills.enabled:
        tools.add_source(SkillSource(home_skills=home.skills, paths=config.skills.paths))
    tools.add_source(hub)
    return tools


@dataclass(frozen=True, kw_only=True)
class LocalMail:
    """What pizzamail's own SMTP and IMAP servers serve (``[mailbox] mode = "local"``)."""

    mailbox: Mailbox
    accounts: Accounts
    intake: IntakeHandler


@dataclass(kw_only=True)
class Servers:
    """SMTP, IMAP and HTTP: serving their sockets (bound before any part starts) from entering the
    part to leaving it. Without ``local`` mail (IMAP mode), HTTP only."""

    config: Config
    tls: ssl.SSLContext | None
    sockets: Sockets
    gate: Gate
    local: LocalMail | None
    hooks: Hooks
    listening: Listening | None = None
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    async def __aenter__(self) -> Servers:
        try:
            self.listening = await self._listen()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _listen(self) -> Listening:
        host = self.config.server.host
        mail = await self._mail_servers()
        http = await start_http_server(create_app(self.hooks, mail), sock=self.sockets.http, gate=self.gate)
        self._stack.push_async_callback(http.close)
        if mail is None:
            return Listening(host=host, smtp=0, imap=0, imaps=0, http=http.port)
        return Listening(host=host, smtp=mail.smtp, imap=mail.imap, imaps=mail.imaps, http=http.port)

    async def _mail_servers(self) -> Listeners | None:
        """SMTP and IMAP over the local mailbox; None in IMAP mode, where there is none."""
        sockets, settings, tls, local = self.sockets, self.config.server, self.tls, self.local
        if local is None or sockets.smtp is None or sockets.imap is None:
            return None
        smtp = await start_smtp_server(
            sock=sockets.smtp, handler=local.intake, max_size=settings.max_message_size, tls=tls,
            require_tls=not is_loopback(settings.host), gate=self.gate,
        )
        self._stack.push_async_callback(_close_server, smtp)
        imap = await start_imap_server(
            sock=sockets.imap, tls_sock=sockets.imaps, mailbox=local.mailbox,
            accounts=local.accounts, tls=tls, gate=self.gate,
        )
        self._stack.push_async_callback(imap.close)
        return Listeners(host=settings.host, smtp=int(smtp.sockets[0].getsockname()[1]), imap=imap.port,
                         imaps=imap.tls_port or 0, tls=tls is not None)


async def _close_server(server: asyncio.Server) -> None:
    server.close()
    await server.wait_closed()
