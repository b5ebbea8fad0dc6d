"""serve's event loop: the runs' steps in a lane behind everything someone waits for (pizzamail.lanes)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar, cast

import pytest

from pizzamail import lanes
from pizzamail.mailbox.filing import Filer
from pizzamail.runner.dispatch import Dispatcher
from pizzamail.store import Store, Tx

T = TypeVar("T")


def on_lanes(main: Coroutine[Any, Any, Any]) -> Any:
    with asyncio.Runner(loop_factory=lanes.Loop) as runner:
        return runner.run(main)


async def steps(log: list[str], name: str, count: int) -> None:
    for _ in range(count):
        log.append(name)
        await asyncio.sleep(0)


def in_background(step: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """A task in the background lane from its first step (as the dispatcher's runs are)."""
    context = contextvars.copy_context()
    context.run(lanes.background)
    return asyncio.create_task(step, context=context)


def test_a_foreground_step_waits_for_one_background_step_not_for_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lanes, "SLICE", 0.0)  # one background step a turn

    async def main() -> list[str]:
        log: list[str] = []
        runs = [in_background(steps(log, "run", 10)) for _ in range(5)]
        await steps(log, "mail", 10)
        log.append("mail done")
        await asyncio.gather(*runs)
        return log

    log = on_lanes(main())
    # first come, first served, the mail's ten steps would wait for about fifty of the runs'
    assert log[:log.index("mail done")].count("run") <= 10
    assert log.count("run") == 50


def test_background_steps_wait_while_held() -> None:
    async def main() -> tuple[int, int]:
        held = [True]
        lanes.hold_while(lambda: 3600.0 if held[0] else 0.0)
        log: list[str] = []
        run = in_background(steps(log, "run", 3))
        await steps([], "mail", 50)
        while_held = len(log)
        held[0] = False
        await run
        return while_held, len(log)

    assert on_lanes(main()) == (0, 3)


def test_a_hold_lasts_at_most_as_long_as_it_says() -> None:
    async def main() -> int:
        lanes.hold_while(lambda: 0.01)  # never lets go: the runs go on anyway, a slice at a time
        log: list[str] = []
        await in_background(steps(log, "run", 3))
        return len(log)

    assert on_lanes(main()) == 3


def test_a_hold_that_ends_with_time_lets_the_lane_go_though_nothing_wakes_the_loop() -> None:
    """A burst of mail ends when no two mails came at once for a while: no I/O marks that moment,
    and the hold first said it might last an hour. The only other wake-up is a watchdog's, 100
    times later than the hold's end."""
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        ends = loop.time() + 0.1
        lanes.hold_while(lambda: 3600.0 if loop.time() < ends else 0.0)
        log: list[str] = []
        watchdog = loop.call_later(10, log.append, "watchdog")
        await in_background(steps(log, "run", 3))
        watchdog.cancel()
        return log

    assert on_lanes(main()) == ["run"] * 3


def test_a_background_task_holding_the_write_lock_is_not_held_back(tmp_path: Path) -> None:
    """Held while it holds the lock, a run would keep the lock from the mail that holds it back
    (for as long as the hold says at a time: here long enough to be seen, short enough to end)."""

    async def select(db: Tx) -> int:
        async with db.execute("SELECT 1") as cursor:
            row = await cursor.fetchone()
        assert row is not None
        return int(row[0])

    async def main() -> tuple[int, int]:
        holding = [False]
        held_back: list[bool] = []

        def mail_waits() -> float:  # "a mail is being handed over" while the run has the lock
            if holding[0]:
                held_back.append(True)
            return 0.2 if holding[0] else 0.0

        lanes.hold_while(mail_waits)

        async def run_writes(store: Store) -> None:
            async with store.write() as db:
                holding[0] = True
                for _ in range(3):
                    await select(db)
                holding[0] = False

        async with Store(path=tmp_path / "home.db") as store:
            run = in_background(run_writes(store))
            await asyncio.sleep(0)
            value = await store.write_at_once(select, priority=True)  # waits for the run's lock
            await run
            return value, len(held_back)

    assert on_lanes(main()) == (1, 0)


def test_the_dispatcher_starts_runs_in_the_background_lane() -> None:
    async def main() -> list[bool]:
        lanes_seen: list[bool] = []
        ran = asyncio.Event()
        claimed = [SimpleNamespace(id=1)]

        async def claim(room: int) -> list[Any]:
            return [claimed.pop()] if claimed else []

        async def work(run: Any) -> None:
            lanes_seen.append(lanes._BACKGROUND.get())
            ran.set()

        dispatcher = Dispatcher(claim=claim, work=work, capacity=1, poll_interval=60)
        dispatcher.start()
        async with asyncio.timeout(10):
            await ran.wait()
        await dispatcher.stop()
        lanes_seen.append(lanes._BACKGROUND.get())
        return lanes_seen

    assert on_lanes(main()) == [True, False]  # the runs', and the caller's stays in the foreground


def test_a_filing_pass_a_run_starts_works_in_the_foreground() -> None:
    """Anyone may wait for the pass a run started: held back, it would hold them back too."""

    async def main() -> tuple[list[bool], int]:
        lanes_seen: list[bool] = []
        leading = iter([True, False])  # no longer leading after the wait: the pass files nothing

        async def pace() -> None:
            lanes_seen.append(lanes._BACKGROUND.get())

        filer = Filer(mailbox=cast(Any, None), blobs=cast(Any, None), files=lambda: next(leading), pace=pace)
        filed = await in_background(filer.run())
        return lanes_seen, filed

    assert on_lanes(main()) == ([False], 0)
