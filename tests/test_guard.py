"""The gate before login, without sockets: its room, and the turns and rate of password checks.

Time is an injectable clock, so the tests count checks per window instead of timing anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pizzamail.guard import Gate, TokenBucket, Visitor
from tests.polling import until


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def guess(gate: Gate, visitor: Visitor, log: list[str], name: str) -> Awaitable[bool | None]:
    def verify() -> bool | None:
        log.append(name)
        return None

    return gate.check(visitor, verify)


def owner(gate: Gate, visitor: Visitor, log: list[str]) -> Awaitable[bool | None]:
    def verify() -> bool | None:
        log.append("owner")
        return True

    return gate.check(visitor, verify)


def dropped(log: list[str], name: str) -> Callable[[str], None]:
    return lambda why: log.append(f"{name}: {why}")


def test_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2, per=1.0, burst=3, clock=clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    assert bucket.delay() == 0.5
    clock.now = 100.0
    assert sum(bucket.take() for _ in range(10)) == 3


async def test_guesses_from_many_connections_share_one_budget() -> None:
    clock = Clock()
    gate = Gate(burst=10, rate=2, clock=clock)
    log: list[str] = []
    visitors = [gate.admit(dropped(log, str(n))) for n in range(60)]
    tasks = [asyncio.ensure_future(guess(gate, v, log, str(n))) for n, v in enumerate(visitors)]
    await until(lambda: gate.waiting == 50)
    assert gate.checked == 10  # the burst, however many connections ask
    clock.now = 5.0
    await until(lambda: gate.checked == 20)  # 2 a second: 10 more in 5 seconds
    await until(lambda: gate.waiting == 40)
    assert gate.checked == 20
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert gate.waiting == 0


async def test_a_correct_password_never_waits_when_nobody_guesses() -> None:
    gate = Gate(burst=1, rate=1, clock=Clock())
    log: list[str] = []
    for _ in range(50):  # a frozen clock: not one token is refilled
        assert await owner(gate, gate.admit(dropped(log, "owner")), log) is True
    assert gate.visitors == 0 and log == ["owner"] * 50


async def test_the_owner_waits_only_for_checks_queued_before_it() -> None:
    clock = Clock()
    gate = Gate(burst=10, rate=2, clock=clock)
    log: list[str] = []
    guessers = [gate.admit(dropped(log, f"g{n}")) for n in range(30)]
    first = [asyncio.ensure_future(guess(gate, v, log, f"g{n}")) for n, v in enumerate(guessers)]
    await until(lambda: gate.waiting == 20)
    me = asyncio.ensure_future(owner(gate, gate.admit(dropped(log, "owner")), log))
    await until(lambda: gate.waiting == 21)
    # the ten that were answered guess again at once: they go behind the owner
    again = [asyncio.ensure_future(guess(gate, v, log, f"g{n}")) for n, v in enumerate(guessers[:10])]
    await until(lambda: gate.waiting == 31)
    while not me.done():
        clock.now += 1.0
        await until(lambda: me.done() or gate.checked >= 2 * clock.now + 10)
    assert me.result() is True
    assert log.index("owner") == 30  # after the 30 first guesses, before any second one
    assert len(log) - 1 <= 10 + 2 * clock.now  # guesses checked: the burst and 2 a second
    for task in first + again:
        task.cancel()
    await asyncio.gather(*first, *again, return_exceptions=True)


async def test_a_full_room_drops_the_worst_guesser_then_the_oldest_never_the_next_in_line() -> None:
    clock = Clock()
    gate = Gate(room=3, burst=1, rate=1, clock=clock)
    log: list[str] = []
    old, guesser, _ = (gate.admit(dropped(log, name)) for name in ("old", "guesser", "young"))
    assert await guess(gate, guesser, log, "guess") is None  # spends the only token
    gate.admit(dropped(log, "new"))
    assert log == ["guess", "guesser: Too many connections are waiting to log in"]
    waiting = asyncio.ensure_future(owner(gate, old, log))  # old is next in line: kept
    await until(lambda: gate.waiting == 1)
    gate.admit(dropped(log, "newer"))
    assert log[-1] == "young: Too many connections are waiting to log in"
    clock.now = 1.0
    assert await waiting is True
    assert gate.visitors == 2  # new and newer; old logged in and left


async def test_a_connection_that_does_not_log_in_in_time_is_dropped() -> None:
    gate = Gate(deadline=0.05)
    gone = asyncio.Event()
    reasons: list[str] = []

    def drop(why: str) -> None:
        reasons.append(why)
        gone.set()

    gate.admit(drop)
    stays = gate.admit(lambda why: reasons.append("must not happen"))
    gate.leave(stays)  # it logged in
    await asyncio.wait_for(gone.wait(), 10)
    await asyncio.sleep(0.1)
    assert reasons == ["Log in within 0.05 seconds"] and gate.visitors == 0
    assert Gate().deadline == 60.0  # the default: a minute, as Dovecot gives
