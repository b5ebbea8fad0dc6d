"""``pizzamail worker``: a process that runs only the runner, beside the front (``serve``), on any
machine that reaches the PostgreSQL store; or, on a SQLite home with ``[runner] separate``, the
runner process ``serve`` starts beside itself (:mod:`pizzamail.runner.apart`), joined to it by a
socket that carries the commit events both ways (:mod:`pizzamail.store.relay`).

A worker starts the store, the MCP servers, skills and model providers as ``serve`` does for its
runner, and nothing else: no SMTP, IMAP or HTTP listener, no Maildir, no lock on the home (several
workers may share one home folder, or each have its own). Its runs write their mail as rows (and
blobs); the front files them as their commit events arrive by NOTIFY, and keeps the ``Action``
folder. Stopping (SIGTERM, Ctrl-C) puts the runs in flight back in the queue.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace

from pizzamail.approvals.service import Approvals
from pizzamail.composer import Composer
from pizzamail.config import Config
from pizzamail.errors import PizzamailError
from pizzamail.home import Home
from pizzamail.runner import Runner
from pizzamail.secrets import SecretStore
from pizzamail.service import agent_tools, log_mcp_servers, mcp_hub
from pizzamail.store.location import blobs_for, store_for, workspaces_for
from pizzamail.store.relay import Relay

log = logging.getLogger("pizzamail.worker")


def worker_config(config: Config, concurrency: int | None, *, beside_serve: bool = False) -> Config:
    """``config`` as a worker runs it (``concurrency`` overrides ``[runner] concurrency``), or the
    one line that says why a worker cannot run on it. ``beside_serve``: serve's own runner process,
    on the home's SQLite file too."""
    if not config.store.url and not beside_serve:
        raise PizzamailError(
            "workers share a PostgreSQL store: set [store] url in config.toml (postgresql://USER@HOST/DB);"
            " with SQLite, `pizzamail serve` runs the runner itself")
    runner = replace(config.runner, concurrency=concurrency or config.runner.concurrency)
    if runner.concurrency == 0:
        raise PizzamailError("this worker would work on no run: [runner] concurrency is 0 in config.toml;"
                             " pass `--concurrency N`")
    return replace(config, runner=runner)


@dataclass(kw_only=True)
class Worker:
    home: Home
    config: Config
    """as :func:`worker_config` made it"""
    secrets: SecretStore
    events_fd: int | None = None
    """serve's runner process: the socket to serve that carries the commit events (when it closes,
    serve is gone, and so is this process at once, as if killed with it: serve's next start, or its
    next runner process, resumes the runs from their checkpoints)"""

    async def run(self, stop: asyncio.Event, ready: Callable[[], None]) -> None:
        async with AsyncExitStack() as stack:
            await self._start(stack)
            ready()
            await stop.wait()
            log.info("stopping")

    async def _start(self, stack: AsyncExitStack) -> None:
        """The store (and serve's relay), then the MCP servers, then the runner (they stop in reverse)."""
        config, home = self.config, self.home
        store = await stack.enter_async_context(store_for(home, config, self.secrets))
        if self.events_fd is not None:
            serve = socket.socket(fileno=self.events_fd)
            await stack.enter_async_context(Relay(events=store.events, sock=serve, closed=_serve_gone))
        blobs = blobs_for(home, store)  # PostgreSQL: in the database, no shared disk between machines
        composer = Composer(config=config)
        hub = await stack.enter_async_context(mcp_hub(home, config, self.secrets))
        # no mailbox: the front files the mail and keeps Action, following the commit events
        approvals = Approvals(store=store, blobs=blobs, config=config, composer=composer,
                              secrets=self.secrets)
        await stack.enter_async_context(Runner(
            store=store, blobs=blobs, config=config, secrets=self.secrets, composer=composer,
            tools=agent_tools(home, config, store, blobs, composer, hub),
            workspaces=workspaces_for(home, store), approvals=approvals,
        ))
        log_mcp_servers(hub)


def _serve_gone() -> None:
    log.warning("serve is gone; its runner process ends with it")
    logging.shutdown()
    os._exit(1)
