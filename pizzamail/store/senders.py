"""What a sender (``[senders.NAME]``) last started: its latest task and how that task's run went."""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.store import Store


@dataclass(frozen=True, kw_only=True)
class LastTask:
    received_at: str
    run_id: int | None
    status: str | None
    """the run's status; None when the task started no run"""


async def last_task_from(store: Store, address: str) -> LastTask | None:
    """The latest task mail from ``address`` (compared without case)."""
    row = await store.fetchone(
        "SELECT m.created_at, r.id, r.status FROM messages m LEFT JOIN runs r ON r.message_id = m.id"
        " WHERE m.kind = 'task' AND lower(m.sender) = ? ORDER BY m.id DESC LIMIT 1", (address.lower(),))
    if row is None:
        return None
    return LastTask(received_at=str(row[0]), run_id=None if row[1] is None else int(row[1]),
                    status=None if row[2] is None else str(row[2]))
