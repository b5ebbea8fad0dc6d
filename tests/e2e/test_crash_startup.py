"""Start-up crashed at exact moments (:mod:`tests.e2e.crash`): during the migrations of a new home,
while the Maildir is made and reconciled, while unfiled mail is filed, while runs are resumed. The
next start finishes the work: nothing lost, nothing twice, and the start after that is quiet."""

from __future__ import annotations

import os
import sqlite3

import pytest

from pizzamail.store.migrations import MIGRATIONS
from tests.e2e.crash import CRASHED
from tests.e2e.harness import Served, task_mail
from tests.e2e.test_roundtrip import fetch_all
from tests.fakes.openai_server import FakeOpenAI, text

#: several restarts of serve each, 10-20 s a test
pytestmark = pytest.mark.slow


def _roundtrip_once(served: Served) -> None:
    """One task and exactly one reply in INBOX, the store and the Maildir agreeing; then a quiet start."""
    served.wait_for("run 1 done")
    subjects = [m["Subject"] for _, m in fetch_all(served)]
    assert subjects == ["Plan the team offsite", "Re: Plan the team offsite"]
    maildir = served.home / "Maildir"
    assert len(os.listdir(maildir / "new") + os.listdir(maildir / "cur")) == 2
    with sqlite3.connect(served.home / "state.db") as db:
        assert db.execute("SELECT count(*) FROM messages WHERE filed = 0").fetchone() == (0,)
        assert db.execute("SELECT status FROM runs").fetchall() == [("done",)]
    served.stop()
    served.start()
    served.stop()
    assert not [line for line in served.output if "left unfiled" in line or "resuming" in line]


@pytest.mark.parametrize("moment", [
    "aiosqlite:Connection.commit#4",  # a few migrations of a new home are in, the others not
    "pizzamail.mailbox.maildir:make_folder#3",  # a standard folder's directory made, its row not
])
def test_a_new_home_crashed_while_it_is_set_up_starts_next_time(
    served: Served, fake_openai: FakeOpenAI, moment: str
) -> None:
    fake_openai.script([text("Planned.")])
    assert served.crash(crash_after=moment) == CRASHED
    served.start()
    with sqlite3.connect(served.home / "state.db") as db:
        names = [r[0] for r in db.execute("SELECT name FROM migrations")]
        folders = [r[0] for r in db.execute("SELECT name FROM folders ORDER BY id")]
    assert names == [name for name, _ in MIGRATIONS]
    assert folders == ["INBOX", "Action", "Activity", "Sent", "Drafts", "Archive", "Trash"]
    served.send(task_mail("Plan it"))
    _roundtrip_once(served)


@pytest.mark.parametrize("moment", [
    "pizzamail.mailbox:Mailbox.reconcile",  # INBOX reconciled: the task's file indexed as a stranger's
    "pizzamail.mailbox:Mailbox.deliver_each",  # that file linked to its row, nothing else done
    "pizzamail.runner.pool:requeue_interrupted",  # the interrupted run queued again, not yet run
])
def test_a_start_crashed_while_it_recovers_recovers_next_time(
    served: Served, fake_openai: FakeOpenAI, moment: str
) -> None:
    fake_openai.script([], then=text("Planned."))
    # the task is committed, its file renamed into INBOX, its index row not written
    served.start(crash_after="pizzamail.mailbox.maildir:write_all")
    served.send(task_mail("Plan it"))
    assert served.stop(None) == CRASHED
    assert served.crash(crash_after=moment) == CRASHED
    served.start()
    _roundtrip_once(served)
