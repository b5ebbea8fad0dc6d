"""Guards against abuse, shared by SMTP and IMAP: one waiting room for connections that have not
logged in yet (:class:`Gate`), and the token bucket behind every rate in pizzamail.

The gate answers three threats with one mechanism:

- **Holding connections open.** The room has one size for both protocols together. When it is full a
  newcomer still gets in, and the connection with the most failed logins (then the one waiting
  longest) is dropped. Refusing the newcomer instead would let anyone who keeps a few dozen idle
  connections open lock the owner out for good; dropping the oldest makes an attacker open
  connections faster than the owner's client logs in, and a guesser goes first. Whoever has not
  logged in within ``deadline`` seconds is dropped too (Dovecot also gives a client a minute).
- **Guessing passwords.** Every password check, SMTP or IMAP, takes a turn at this one gate. Each
  failure spends a token of one bucket (``burst``, refilled at ``rate`` a second), so however many
  connections guess, at most ``burst + rate * seconds`` guesses are checked; a correct password
  spends nothing, so with nobody guessing a login never waits.
- **Locking the owner out by guessing.** Checks take their turns in the order they were asked for
  (each connection has one at a time), and the next in line is never dropped. A correct password
  therefore waits only for the checks asked for before it, at ``1 / rate`` seconds each (at most one
  per connection in the room), and never for a guess made after it.

All of it lives in memory, not in the store: it guards one running process, and a restart (which a
client cannot cause) only gives a guesser one more burst.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass(kw_only=True)
class TokenBucket:
    """``rate`` tokens every ``per`` seconds, bursts up to ``burst`` (default: ``rate``)."""

    rate: float
    per: float = 60.0
    burst: float = 0.0
    clock: Callable[[], float] = time.monotonic
    _tokens: float = -1.0
    _at: float = 0.0

    def __post_init__(self) -> None:
        self.burst = self.burst or self.rate

    def available(self) -> float:
        current = self.clock()
        if self._tokens < 0:
            self._tokens, self._at = self.burst, current
        self._tokens = min(self.burst, self._tokens + (current - self._at) * self.rate / self.per)
        self._at = current
        return self._tokens

    def take(self) -> bool:
        """Spend a token if there is one."""
        if self.available() < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def delay(self) -> float:
        """Seconds until a token is there (0 when there is one now)."""
        return max(0.0, (1.0 - self.available()) * self.per / self.rate)


@dataclass(eq=False, kw_only=True)
class Visitor:
    """One connection that has not logged in yet."""

    drop: Callable[[str], None]
    """closes the connection, telling the client why"""
    admitted: int
    place: int = 0
    """its place in the line of password checks (taken when it asks)"""
    failures: int = 0
    timer: asyncio.TimerHandle | None = None


@dataclass(kw_only=True)
class Gate:
    """The connections of SMTP and IMAP that have not logged in yet, and their password checks."""

    room: int = 128
    """connections waiting to log in, both protocols together (a client logs in within
    milliseconds, so this is plenty for every device of the owner at once)"""
    deadline: float = 60.0
    """seconds a connection has to log in"""
    burst: int = 10
    """failed logins checked at once before the rate applies"""
    rate: float = 5.0
    """failed logins checked per second once the burst is spent"""
    clock: Callable[[], float] = time.monotonic
    checked: int = 0
    """passwords checked so far (what a guesser gets out of us)"""
    _visitors: set[Visitor] = field(default_factory=set)
    _waiting: set[Visitor] = field(default_factory=set)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _order: itertools.count[int] = field(default_factory=itertools.count)
    _failures: TokenBucket = field(init=False)

    def __post_init__(self) -> None:
        self._failures = TokenBucket(rate=self.rate, per=1.0, burst=self.burst, clock=self.clock)

    @property
    def waiting(self) -> int:
        """Password checks waiting for their turn."""
        return len(self._waiting)

    @property
    def visitors(self) -> int:
        """Connections waiting to log in."""
        return len(self._visitors)

    def admit(self, drop: Callable[[str], None]) -> Visitor:
        """A new connection; when the room is full another one is dropped to make room."""
        if len(self._visitors) >= self.room:
            self._evict()
        visitor = Visitor(drop=drop, admitted=next(self._order))
        visitor.timer = asyncio.get_running_loop().call_later(
            self.deadline, self._expel, visitor, f"Log in within {self.deadline:g} seconds")
        self._visitors.add(visitor)
        return visitor

    def inside(self, visitor: Visitor) -> bool:
        """Still waiting to log in."""
        return visitor in self._visitors

    def leave(self, visitor: Visitor) -> None:
        """The connection logged in or closed (again is harmless)."""
        if visitor.timer is not None:
            visitor.timer.cancel()
        self._visitors.discard(visitor)
        self._waiting.discard(visitor)
        self._poke()

    async def check(self, visitor: Visitor, verify: Callable[[], T | None]) -> T | None:
        """``verify()`` (who these credentials are, or None) once it is this connection's turn."""
        visitor.place = next(self._order)
        self._waiting.add(visitor)
        try:
            await self._turn(visitor)
        finally:
            self._waiting.discard(visitor)
            self._poke()
        self.checked += 1
        found = verify()
        if found is None:
            self._failures.take()
            visitor.failures += 1
        else:
            self.leave(visitor)
        return found

    async def _turn(self, visitor: Visitor) -> None:
        while True:
            delay = self._failures.delay() if self._next() is visitor else None
            if delay == 0.0:
                return
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await changed.wait()

    def _next(self) -> Visitor | None:
        return min(self._waiting, key=lambda v: v.place, default=None)

    def _poke(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _evict(self) -> None:
        # the next in line keeps its place: it is checked within 1/rate seconds
        keep = self._next()
        candidates = [v for v in self._visitors if v is not keep]
        if candidates:
            victim = max(candidates, key=lambda v: (v.failures, -v.admitted))
            self._expel(victim, "Too many connections are waiting to log in")

    def _expel(self, visitor: Visitor, why: str) -> None:
        self.leave(visitor)
        visitor.drop(why)
