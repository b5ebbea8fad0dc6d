"""Mail first: while SMTP clients are in the middle of handing over mail, the service's own
follow-up work waits for them (the runs' steps, filing mail into its folders, and with it the
Activity board), then does in one pass what piled up meanwhile.

A sender waits for its ``250``; nobody waits for a mail's copy in INBOX, or for a run whose model
takes seconds anyway, the same moment. How long the follow-up waits depends on the pressure:

- one mail being handed over: the runs' steps wait at most :data:`HOLD_ONE` at a time (one client
  sending mail after mail leaves gaps between them, and the runs work in those);
- mail from two connections at once in the last :data:`CROWD` seconds (a burst: a script, a backlog
  delivered at once): the runs wait at most :data:`HOLD_CROWD` at a time, filing until the burst
  is over. Measured with ``bench/agent.py`` (e), four clients sending while the runner answered
  every mail: holding only while a mail was open, intake got 0.22-0.35x a bare aiosmtpd; holding
  through the burst, with filing, 0.51-0.82x, the runs all done 1-2 s later after the last mail.

Filing waits at most :data:`PATIENCE` seconds, then does its pass anyway. With no mail coming in
nothing waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from weakref import WeakSet

from aiosmtpd.smtp import Envelope

#: the longest filing waits for intake to pause (a longer burst is filed in passes this far apart)
PATIENCE = 3.0

#: how long intake counts as crowded after two mails were handed over at once
CROWD = 0.3

#: the longest the runs' steps wait at a time while one mail is handed over, and while crowded
HOLD_ONE, HOLD_CROWD = 0.05, 1.0

#: how often a waiter looks again (a client that vanished mid-mail leaves no word that it is gone)
LOOK_AGAIN = 0.05


@dataclass
class Intake:
    """Which mails are between their ``MAIL FROM`` and their answer to ``DATA`` (or the end of their
    connection). One given up by ``RSET`` is dropped from here with its envelope."""

    _open: WeakSet[Envelope] = field(default_factory=WeakSet)
    _paused: asyncio.Event = field(default_factory=asyncio.Event)
    _crowded_until: float = 0.0

    def begin(self, envelope: Envelope) -> None:
        self._open.add(envelope)
        self._paused.clear()
        if len(self._open) > 1:
            self._crowded_until = time.monotonic() + CROWD

    def end(self, envelope: Envelope) -> None:
        self._open.discard(envelope)
        if not self._open:
            self._paused.set()

    def crowded(self) -> bool:
        """Whether two mails were handed over at once in the last :data:`CROWD` seconds."""
        return time.monotonic() < self._crowded_until

    def hold(self) -> float:
        """The longest the runs' steps may wait at a time now (0: not at all); for
        :func:`pizzamail.lanes.hold_while`."""
        if self._crowded_until:  # asked twice a turn of the loop: the clock only after a burst
            if self.crowded():
                return HOLD_CROWD
            self._crowded_until = 0.0
        return HOLD_ONE if self._open else 0.0

    async def paused(self, at_most: float = PATIENCE) -> None:
        """Returns once no mail is being handed over and intake is not crowded, or after ``at_most``
        seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(at_most):
                while self._open or self.crowded():
                    if not self._open:
                        await asyncio.sleep(self._crowded_until - time.monotonic())
                        continue
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._paused.wait(), LOOK_AGAIN)
