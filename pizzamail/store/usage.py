"""Token and call usage: per call in each model step's data, per run in ``runs``, per thread summed."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pizzamail.store import Store, Tx


@dataclass(frozen=True, kw_only=True)
class Usage:
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


async def record_run_usage(db: Tx, run_id: int) -> None:
    """Sum the run's steps into its row; the limit that stopped it is its last answer's finish reason.
    Summed here from each step's JSON, the same on both engines (a run has a few dozen steps)."""
    async with db.execute("SELECT kind, data FROM steps WHERE run_id = ? AND kind IN ('model', 'tool')"
                          " ORDER BY seq", (run_id,)) as cursor:
        rows = [(str(r[0]), json.loads(r[1])) for r in await cursor.fetchall()]
    answers = [data for kind, data in rows if kind == "model"]
    tokens = [data.get("usage") or {} for data in answers]
    reason = str(answers[-1].get("finish_reason") or "") if answers else ""
    stopped = reason.removeprefix("limit:") if reason.startswith("limit:") else None
    await db.execute(
        "UPDATE runs SET model_calls = ?, tool_calls = ?, input_tokens = ?, output_tokens = ?,"
        " stopped_by = ? WHERE id = ?",
        (len(answers), len(rows) - len(answers), sum(int(t.get("input_tokens") or 0) for t in tokens),
         sum(int(t.get("output_tokens") or 0) for t in tokens), stopped, run_id),
    )


async def thread_usage(store: Store) -> dict[int, Usage]:
    """Usage summed over each thread's runs."""
    rows = await store.fetchall(
        "SELECT thread_id, sum(model_calls) AS model_calls, sum(tool_calls) AS tool_calls,"
        " sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens FROM runs"
        " GROUP BY thread_id"
    )
    fields = ("model_calls", "tool_calls", "input_tokens", "output_tokens")
    return {int(r["thread_id"]): Usage(**{f: int(r[f] or 0) for f in fields}) for r in rows}
