"""Two lanes on ``serve``'s event loop: work someone is waiting for, and the runs behind it.

asyncio runs ready callbacks first come, first served. With many runs at work, an SMTP command
that arrived waited for every run step queued before it, and four clients sending mail while the
runner answered them got a ninth of what they got alone (``bench/agent.py`` (e)). A run's step
is background: nobody waits for it this millisecond, and its model takes seconds anyway.

Background steps (those of tasks started in :func:`background`, and of every task they start) wait
in a lane of their own. After each turn of the loop they run for at most :data:`SLICE` seconds,
then the loop looks for I/O again, so a command waits for one slice at most, not for every run.
While a hold says so (mail being handed over by SMTP) they wait altogether, but never longer at a
time than the hold says (``pizzamail.intake.pace``): runs slow down under a flood of mail, they
never stop.

A background task that holds something foreground work may wait for (the store's write lock) runs
in the foreground meanwhile (:func:`foreground`): held, it would keep the lock from the mail that
holds it back.

asyncio has no public hook for any of this: :class:`Loop` overrides ``call_soon`` and the private
``_run_once`` and ``_ready`` of CPython's selector loop (written against 3.11's; ``tests/test_lanes.py``
fails if a later one differs in what this relies on).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import deque
from collections.abc import Callable, Iterator
from typing import TypeVarTuple

_Ts = TypeVarTuple("_Ts")

_BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar("pizzamail_background", default=False)

#: the longest stretch of background steps between two looks for I/O
SLICE = 0.004
#: how often a held lane asks its holds again (a hold may end with time, and nothing wakes the loop)
LOOK_AGAIN = 0.05


def background() -> None:
    """The current task, and every task it starts from now on, runs in the background lane."""
    _BACKGROUND.set(True)


@contextlib.contextmanager
def foreground() -> Iterator[None]:
    """The current task runs in the foreground lane inside this block."""
    token = _BACKGROUND.set(False)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def foreground_context() -> contextvars.Context:
    """A copy of the current context in the foreground lane: for a task that works for everyone
    (``asyncio.create_task(..., context=foreground_context())``)."""
    context = contextvars.copy_context()
    context.run(_BACKGROUND.set, False)
    return context


def hold_while(hold: Callable[[], float]) -> Callable[[], None]:
    """Background steps wait while ``hold()`` is above 0, at most that many seconds at a time (then
    one slice runs), when the running loop is a :class:`Loop`. Returns what takes the hold away."""
    loop = asyncio.get_running_loop()
    if not isinstance(loop, Loop):
        return lambda: None
    loop.holds.append(hold)
    return lambda: loop.holds.remove(hold)


def _nothing() -> None:
    pass


class Loop(asyncio.SelectorEventLoop):
    """The selector loop with a background lane (see the module's text)."""

    def __init__(self) -> None:
        super().__init__()
        self.holds: list[Callable[[], float]] = []
        self._later: deque[asyncio.Handle] = deque()
        self._poll = asyncio.Handle(_nothing, (), self, None)
        self._slice_ended = self.time()
        self._wake: asyncio.TimerHandle | None = None

    def call_soon(self, callback: Callable[[*_Ts], object], *args: *_Ts,
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        behind = context.get(_BACKGROUND, False) if context is not None else _BACKGROUND.get()
        if not behind:
            return super().call_soon(callback, *args, context=context)
        self._check_closed()  # type: ignore[attr-defined]
        handle = asyncio.Handle(callback, args, self, context)
        self._later.append(handle)
        return handle

    def _run_once(self) -> None:
        ready: deque[asyncio.Handle] = self._ready  # type: ignore[attr-defined]
        if self._later and not ready:
            hold = self._hold()
            if self.time() - self._slice_ended < hold:  # the look for I/O waits at most until it ends
                if self._wake is None:
                    until = min(self._slice_ended + hold, self.time() + LOOK_AGAIN)
                    self._wake = self.call_at(until, self._woken)
            else:  # the look for I/O must not block while background steps may run
                ready.append(self._poll)
        super()._run_once()  # type: ignore[misc]
        if self._later and not self._held():
            self._run_slice()

    def _woken(self) -> None:
        self._wake = None

    def _hold(self) -> float:
        longest = 0.0
        for hold in self.holds:  # asked twice a turn: no generator, no max()
            value = hold()
            if value > longest:
                longest = value
        return longest

    def _held(self) -> bool:
        return self.time() - self._slice_ended < self._hold()

    def _run_slice(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        end = self.time() + SLICE
        later = self._later
        while later:
            handle = later.popleft()
            if not handle.cancelled():
                handle._run()
            if self.time() >= end:
                break
        self._slice_ended = self.time()
