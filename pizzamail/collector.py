"""The pace of Python's cycle collector in the long-running processes (``serve``, ``worker``).

CPython collects its youngest generation each time 700 more container objects (tuples, lists,
dicts …) are alive than at the last collection, and moves whatever survives into an older
generation, whose own collections walk far more. A server's work makes its objects in bursts that
die together: an IMAP header listing of 2,000 mails makes 10,000 tuples a batch, a run's reply its
parsed JSON. At 700, such a burst is caught alive several times over: a listing ran 7-8 young
collections and, every tenth, an older one: with the threshold below, the server's CPU a listing
is 9.2 ms instead of 10.7 (``bench/imap.py``'s server). At :data:`YOUNG` a burst is mostly freed
by reference counting before a collection comes, and the older generations grow more slowly.
Cycles are still found, only later: memory after 200 runs moved by under 2 MB (``bench/agent.py``
(c)).
"""

from __future__ import annotations

import gc

#: net new container objects between two collections of the youngest generation
YOUNG = 10_000


def pace() -> None:
    """The youngest generation collected every :data:`YOUNG` objects; the older ones as before."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, oldest)
