"""Waiting for a state that no event announces (the gate's counters, say): look again every 10 ms,
give up after 30 s so a broken test fails instead of hanging."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(30):
        while True:
            if condition():
                return
            await asyncio.sleep(0.01)
