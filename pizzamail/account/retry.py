"""How long to wait before connecting to an account again, shared by every long-lived connection
(a watched mailbox, the reader of the user's own INBOX)."""

from __future__ import annotations


def retry_delay(attempt: int, *, initial: float, longest: float, patient: bool, jitter: float) -> float:
    """Seconds before reconnect ``attempt`` (0 = the first): doubling from ``initial`` up to
    ``longest``, or ``longest`` at once when the problem wants patience (a refused login).

    ``jitter`` in [0, 1) trims up to 20 %: several connections to one server (or many users of one
    provider) do not retry in step.
    """
    base = longest if patient else initial * 2 ** min(attempt, 30)
    return min(base, longest) * (1.0 - 0.2 * jitter)
