"""The runner in a process of its own beside ``serve`` on a SQLite home (``[runner] separate``).

Intake, IMAP and filing keep ``serve``'s process (and its interpreter lock) to themselves, and the
runs work on another core. The runner process is ``pizzamail worker`` started by serve, at a lower
CPU priority (``nice``), so mail taken and served goes first when the cores are busy. Commit events
travel between the two over a socket pair (:mod:`pizzamail.store.relay`); the runner process has no
mailbox, and serve files its runs' mail as it files a PostgreSQL worker's.

serve keeps it running: one that ends without being asked is started again (after 1 s, longer
while it keeps ending within a minute), and its new runner takes back the runs the old one left
``running``, from their checkpoints. One that loses serve ends at once (:class:`~pizzamail.worker.Worker`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import time
from dataclasses import dataclass, field

from pizzamail.home import Home
from pizzamail.store import Store
from pizzamail.store.relay import Relay

log = logging.getLogger("pizzamail.runner")

#: CPU priority of the runner process, below serve's (0): on busy cores intake and IMAP go first
NICENESS = 10

#: seconds a stopping runner process is given to put its runs back in the queue before it is killed
STOP_SECONDS = 30.0


@dataclass(kw_only=True)
class RunnerProcess:
    """``async with``: the runner process, started and kept running until left."""

    home: Home
    store: Store
    first_delay: float = 1.0
    """seconds before a runner process that ended is started again (doubled, up to a minute, while
    each one ends within a minute of its start)"""
    _keeping: asyncio.Task[None] | None = field(default=None, init=False)
    _leaving: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    async def __aenter__(self) -> RunnerProcess:
        self._keeping = asyncio.create_task(self._keep(), name="pizzamail-runner-process")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._leaving.set()
        if self._keeping is not None:
            await self._keeping

    async def _keep(self) -> None:
        delay = self.first_delay
        while not self._leaving.is_set():
            began = time.monotonic()
            code = await self._one()
            if self._leaving.is_set():
                return
            if time.monotonic() - began > 60:
                delay = self.first_delay
            log.warning("the runner process ended (exit status %s); starting it again in %.0f s;"
                        " its runs resume from their checkpoints", code, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._leaving.wait(), delay)
            delay = min(delay * 2, 60.0)

    async def _one(self) -> int | None:
        """One runner process, from its start to its end; its exit status."""
        ours, theirs = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "pizzamail", "--home", str(self.home.root), "worker",
                "--beside-serve", str(theirs.fileno()), *(["-v"] if log.isEnabledFor(logging.DEBUG) else []),
                pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        log.info("runner process %d started", process.pid)
        async with Relay(events=self.store.events, sock=ours):
            return await self._ended(process)

    async def _ended(self, process: asyncio.subprocess.Process) -> int | None:
        """Waits for ``process`` to end; once serve is leaving, stops it (the worker's SIGTERM: its
        runs go back in the queue) and waits for at most :data:`STOP_SECONDS`."""
        ended = asyncio.ensure_future(process.wait())
        leaving = asyncio.ensure_future(self._leaving.wait())
        try:
            await asyncio.wait((ended, leaving), return_when=asyncio.FIRST_COMPLETED)
            if not ended.done():
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
                done, _ = await asyncio.wait((ended,), timeout=STOP_SECONDS)
                if not done:
                    log.warning("the runner process did not stop within %.0f s; killed", STOP_SECONDS)
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
            return await ended
        finally:
            leaving.cancel()
