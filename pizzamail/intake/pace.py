"""Mail first: while SMTP clients are in the middle of handing over mail, the service's own
follow-up work waits for them (filing mail into its folders, and with it the Activity board), at
most :data:`PATIENCE` seconds, then does in one pass what piled up meanwhile.

A sender waits for its ``250``; nobody waits for a mail's copy in INBOX the same moment. On a busy
machine the copies, the replies' filing and the board cost intake more than half of its pace, and
done in bigger passes after a burst they cost less in all. With no mail coming in nothing waits.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from weakref import WeakSet

from aiosmtpd.smtp import Envelope

#: the longest the follow-up work waits for intake to pause
PATIENCE = 1.0

#: how often a waiter looks again (a client that vanished mid-mail leaves no word that it is gone)
LOOK_AGAIN = 0.05


@dataclass
class Intake:
    """Which mails are between their ``MAIL FROM`` and their answer to ``DATA`` (or the end of their
    connection). One given up by ``RSET`` is dropped from here with its envelope."""

    _open: WeakSet[Envelope] = field(default_factory=WeakSet)
    _paused: asyncio.Event = field(default_factory=asyncio.Event)

    def begin(self, envelope: Envelope) -> None:
        self._open.add(envelope)
        self._paused.clear()

    def end(self, envelope: Envelope) -> None:
        self._open.discard(envelope)
        if not self._open:
            self._paused.set()

    def busy(self) -> bool:
        """Whether a mail is being handed over now."""
        return bool(self._open)

    async def paused(self, at_most: float = PATIENCE) -> None:
        """Returns once no mail is being handed over, or after ``at_most`` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(at_most):
                while self._open:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._paused.wait(), LOOK_AGAIN)
