"""A run's status mail on the Activity board: its Maildir name, subject and bytes. Pure; no I/O.

The name carries the run and a digest of what the mail shows, so the folder itself remembers which
state of which run it shows: a mail whose name is not the run's current one is stale.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from email.utils import formataddr

from pizzamail.mail.build import plain_bytes
from pizzamail.mail.ids import bare
from pizzamail.store.activity import BoardRun

#: how each run status reads on the board
LABELS = {"queued": "queued", "running": "working", "waiting": "waiting for approval",
          "delegating": "waiting for a delegate", "done": "done", "failed": "failed", "stopped": "stopped"}
#: run states that never change again
FINAL = frozenset({"done", "failed", "stopped"})
STATUS_PREFIX = "status."
PROGRESS_PREFIX = "progress."


def label(run: BoardRun) -> str:
    return LABELS.get(run.status, run.status)


def status_name(run: BoardRun) -> str:
    """The Maildir name of the status mail showing ``run`` as it is now."""
    shown = f"{run.status}|{run.steps}|{run.last_tool or ''}|{run.error or ''}"
    return f"{run_prefix(run.run)}{run.status}.{hashlib.sha256(shown.encode()).hexdigest()[:12]}"


def run_prefix(run_id: int) -> str:
    return f"{STATUS_PREFIX}{run_id}."


def shown_run(name: str) -> tuple[int, str] | None:
    """The run and status a status mail's name shows; None for any other mail."""
    if not name.startswith(STATUS_PREFIX):
        return None
    run, _, rest = name[len(STATUS_PREFIX):].partition(".")
    status = rest.partition(".")[0]
    return (int(run), status) if run.isdigit() and status else None


def progress_name(message_row: int) -> str:
    """The Maildir name of the Activity copy of a progress note."""
    return f"{PROGRESS_PREFIX}{message_row}"


def progress_row(name: str) -> int | None:
    rest = name[len(PROGRESS_PREFIX):] if name.startswith(PROGRESS_PREFIX) else ""
    return int(rest) if rest.isdigit() else None


def status_subject(run: BoardRun) -> str:
    """``[working] Find flights — step 4, web__fetch``"""
    detail = []
    if run.status in ("running", "waiting", "delegating") and run.steps:
        detail.append(f"step {run.steps}")
    elif run.status in FINAL and run.steps:
        detail.append(f"{run.steps} step{'s' if run.steps != 1 else ''}")
    if run.status in ("running", "waiting", "delegating") and run.last_tool:
        detail.append(run.last_tool)
    tail = f" — {', '.join(detail)}" if detail else ""
    return f"[{label(run)}] {run.subject}{tail}"


def status_mail(run: BoardRun, *, text: str, agent: str, agent_name: str, owner: str, domain: str,
                date: datetime) -> bytes:
    """The status mail, From the agent and threaded under the run's task mail so a client can jump
    to the thread. Written out directly (:func:`~pizzamail.mail.build.plain_bytes`): the board
    writes one at each change of every run, and the email package's building was most of its time."""
    parent = bare(run.task_id) if run.task_id else None
    references = [bare(r) for r in run.task_refs] + ([parent] if parent else [])
    return plain_bytes(
        sender=formataddr((agent_name, agent)), to=owner, subject=status_subject(run), text=text,
        message_id=f"{status_name(run)}@{domain}", in_reply_to=parent, references=references,
        date=date, headers=[("X-Pizzamail-Thread", str(run.thread)), ("X-Pizzamail-Run", str(run.run)),
                            ("X-Pizzamail-Kind", "status")],
    )
