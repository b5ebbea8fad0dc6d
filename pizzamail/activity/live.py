"""The board as a long-lived part: it follows the runs' commit events and keeps ``Activity`` current."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pizzamail.activity.board import Board
from pizzamail.lanes import background
from pizzamail.store.events import Events, MessageAdded, RunChanged

log = logging.getLogger("pizzamail.activity")

#: seconds the board lets a burst of changes settle before it shows them: a run answered in less shows
#: only its end, and its own writes (the reply, its filing, the IDLE push) do not queue behind a
#: "working" mail that would be stale by the time it is filed
SETTLE = 0.25

#: seconds the board rests after a pass for each status mail it delivered, and the longest rest: a
#: burst of 100 runs changing at once is shown about every 2 s, each run in the state it has reached
#: by then, rather than in a mail for every state it passed through. Every mail shown costs a
#: rendering, a file, an index row and later an expunge on the loop the SMTP clients wait on: with
#: 200 runs at once (``bench/agent.py`` (d)) the board wrote 400 mails in 3 s, and one client's mails
#: took 19 % longer than with no board at all
PER_MAIL, LONGEST_REST = 0.02, 2.0


@dataclass(kw_only=True)
class LiveBoard:
    """``async with``: reconciles ``Activity`` on entry (what a crash left is put right before IMAP
    serves), then syncs after each burst of run changes and progress notes, when a held-back
    replacement is due, and every ``poll`` seconds (runs another process queued; finished runs whose
    time is up)."""

    board: Board
    events: Events
    poll: float = 30.0
    settle: Callable[[], Awaitable[None]] = lambda: asyncio.sleep(SETTLE)
    """waited after the first change of a burst, before the pass that shows it"""
    rest: Callable[[float], Awaitable[None]] | None = None
    """waits the given seconds after a pass that delivered mail (default: :data:`PER_MAIL` a mail,
    ended early by leaving)"""
    _kick: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _left: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _leaving: bool = field(default=False, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _unsubscribe: list[Callable[[], None]] = field(default_factory=list, init=False)

    async def __aenter__(self) -> LiveBoard:
        self._leaving = False
        self._left.clear()
        # listening first: a change during the first pass is shown by the pass after it
        self._unsubscribe = [self.events.subscribe(RunChanged, self._changed),
                             self.events.subscribe(MessageAdded, self._added)]
        try:
            await self.board.sync()
        except BaseException:
            self._deaf()
            raise
        self._task = asyncio.create_task(self._loop(), name="pizzamail-activity")
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Not cancelled: a pass under way finishes its delivery and expunge."""
        self._deaf()
        self._leaving = True
        self._left.set()
        self._kick.set()
        if self._task is not None:
            await self._task
            self._task = None

    def _deaf(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    def _changed(self, _: RunChanged) -> None:
        self._kick.set()

    def _added(self, event: MessageAdded) -> None:
        if event.kind == "progress":
            self._kick.set()

    async def _loop(self) -> None:
        background()  # nobody waits for the board this millisecond; it files and writes in the foreground
        wait = self.poll
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._kick.wait()
            if self._leaving:
                return
            await self.settle()
            self._kick.clear()
            try:
                due, delivered = await self.board.sync()
            except Exception:  # the next event or tick tries again; the folder is re-read each pass
                log.exception("could not update the Activity folder")
                due, delivered = None, 0
            if self._leaving:  # asked to leave while the burst settled: it is shown, nothing is left
                return
            if delivered:
                await (self.rest or self._rest)(min(LONGEST_REST, PER_MAIL * delivered))
            wait = self.poll if due is None else min(self.poll, due)

    async def _rest(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._left.wait()
