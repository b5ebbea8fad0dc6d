"""The Activity board: one status mail per active or recently finished run, kept current.

The folder is its own record. A status mail's Maildir name says which run and which state it shows
(:func:`~pizzamail.activity.status.status_name`), so each pass compares the folder with the store:
a run whose current name is missing gets its new mail delivered, then the old one is expunged
(through the mailbox, so IMAP IDLE pushes EXISTS and EXPUNGE). After a kill -9 between the two, the
next pass (the one at start-up first) expunges the extra one: never more than one per run for long.

Status mails and the copies of progress notes are mailbox-only: they are not rows of the thread, so
the history the model reads never holds them, and replacing one writes no thread history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

from pizzamail.activity.status import (
    FINAL,
    LABELS,
    PROGRESS_PREFIX,
    STATUS_PREFIX,
    progress_name,
    shown_run,
    status_mail,
    status_name,
)
from pizzamail.composer import Composer
from pizzamail.config import Config
from pizzamail.mailbox.writing import Delivery, MailFolders
from pizzamail.store import Store
from pizzamail.store.activity import BoardRun, board_runs, progress_notes
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailindex import Folder

ACTIVITY_FOLDER = "Activity"

#: status mails a pass renders between two looks of the event loop for other work (about half a
#: millisecond): rendering a burst's 130 at once held a mail's MAIL FROM up for 10 ms
RENDERED_AT_ONCE = 8


class Pass(NamedTuple):
    """What one :meth:`Board.sync` did."""

    due: float | None
    """seconds until a held-back replacement is due (None: nothing waits)"""
    delivered: int
    """status mails delivered"""


@dataclass(kw_only=True)
class Board:
    """Brings ``Activity`` in line with the runs, one :meth:`sync` at a time."""

    store: Store
    mailbox: MailFolders
    blobs: BlobStore
    composer: Composer
    config: Config
    file_mail: Callable[[], Awaitable[object]]
    """files what the store holds unfiled (the service's one ``Filer``): a run's task mail is in its
    folder before the status mail that answers it, and a crash right after the task's first
    Maildir write is always the task's"""
    interval: float = 1.0
    """seconds between two replacements of one run's mail while its status stays the same (a run
    doing 20 steps a second writes one mail a second); a new status is shown at once"""
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    _replaced: dict[int, datetime] = field(default_factory=dict, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def sync(self) -> Pass:
        """One pass: the runs' mails brought up to date."""
        async with self._lock:
            await self.file_mail()
            now = self.clock()
            folder = await self.mailbox.folder(ACTIVITY_FOLDER) or await self.mailbox.create_folder(
                ACTIVITY_FOLDER)
            present = {row.name: row.uid for row in await self.mailbox.messages(folder)}
            by_run: dict[int, list[str]] = {}  # each run's status mails there, looked up once a pass
            for name in present:
                if (found := shown_run(name)) is not None:
                    by_run.setdefault(found[0], []).append(name)
            runs = await board_runs(self.store, finished_since=now - self.config.activity.keep)
            kept: set[str] = set()
            due: list[float] = []
            shown: list[Delivery] = []
            for run in runs:
                before = len(shown)
                names, wait = self._show(run, present, by_run.get(run.run, []), now, shown)
                kept |= names
                if wait:
                    due.append(wait)
                if len(shown) > before and len(shown) % RENDERED_AT_ONCE == 0:
                    await asyncio.sleep(0)
            if shown:  # in one delivery: one trip to write the files, one commit
                await self.mailbox.deliver_each(folder, shown)
            kept |= await self._copy_notes(folder, [run.run for run in runs], present)
            stale = [uid for name, uid in present.items()
                     if name.startswith((STATUS_PREFIX, PROGRESS_PREFIX)) and name not in kept]
            if stale:
                await self.mailbox.expunge(folder, stale)
            self._forget(run.run for run in runs)
            return Pass(due=min(due) if due else None, delivered=len(shown))

    def _show(self, run: BoardRun, present: dict[str, int], current: list[str], now: datetime,
              shown: list[Delivery]) -> tuple[set[str], float]:
        """The names of ``run``'s mails to keep (``current``: its status mails there), and the
        seconds its replacement is held back; its new status mail, if it needs one, goes into
        ``shown``."""
        name = status_name(run)
        if name in present:
            return {name}, 0.0
        wait = self._held_back(run, current, now)
        if wait > 0:
            return set(current), wait
        mail = status_mail(run, text=self._text(run), agent=self.config.agent.address,
                           agent_name=self.config.agent.name, owner=self.config.account.address,
                           domain=self.config.domain, date=now)
        shown.append(Delivery(data=mail, flags=frozenset({"\\Seen"}), base=name,
                              internaldate=int(now.timestamp())))
        self._replaced[run.run] = now
        return {name}, 0.0

    def _held_back(self, run: BoardRun, shown: list[str], now: datetime) -> float:
        """Seconds to wait before replacing a mail that shows the same status (0: replace now)."""
        last = self._replaced.get(run.run)
        same = any((found := shown_run(n)) is not None and found[1] == run.status for n in shown)
        if last is None or not same or run.status in FINAL:
            return 0.0
        # bounded both ways: a clock set back must not hold a run's mail back for the difference
        return min(self.interval, max(0.0, self.interval - (now - last).total_seconds()))

    def _text(self, run: BoardRun) -> str:
        return self.composer.render(
            "status.txt.j2", label=LABELS.get(run.status, run.status), subject=run.subject,
            steps=run.steps, last_tool=run.last_tool, error=run.error, created_at=run.created_at,
            started_at=run.started_at, finished_at=run.finished_at, run=run.run, thread=run.thread)

    async def _copy_notes(self, folder: Folder, runs: list[int], present: dict[str, int]) -> set[str]:
        """Each progress note of the shown runs, copied once (its own bytes, as in the thread)."""
        names = set()
        for note in await progress_notes(self.store, runs, board=ACTIVITY_FOLDER):
            name = progress_name(note.message)
            names.add(name)
            if name not in present:
                data = await self.blobs.load(note.blob)
                await self.mailbox.deliver(folder, data, base=name)
        return names

    def _forget(self, shown: Iterable[int]) -> None:
        keep = set(shown)
        for run in [r for r in self._replaced if r not in keep]:
            del self._replaced[run]
