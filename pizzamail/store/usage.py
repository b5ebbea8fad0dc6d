"""Token and call usage: per call in each model step's data, per run in ``runs``, per thread summed."""

from __future__ import annotations

from dataclasses import dataclass

import aiosqlite

from pizzamail.store import Store

_SUM_STEPS = """
    SELECT
      coalesce(sum(kind = 'model'), 0) AS model_calls,
      coalesce(sum(kind = 'tool'), 0) AS tool_calls,
      coalesce(sum(CASE WHEN kind = 'model' THEN json_extract(data, '$.usage.input_tokens') END), 0)
        AS input_tokens,
      coalesce(sum(CASE WHEN kind = 'model' THEN json_extract(data, '$.usage.output_tokens') END), 0)
        AS output_tokens
    FROM steps WHERE run_id = ?
"""


@dataclass(frozen=True, kw_only=True)
class Usage:
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


async def record_run_usage(db: aiosqlite.Connection, run_id: int) -> None:
    """Sum the run's steps into its row; the limit that stopped it is its last answer's finish reason."""
    async with db.execute(_SUM_STEPS, (run_id,)) as cursor:
        row = await cursor.fetchone()
    async with db.execute(
        "SELECT json_extract(data, '$.finish_reason') FROM steps WHERE run_id = ? AND kind = 'model'"
        " ORDER BY seq DESC LIMIT 1", (run_id,),
    ) as cursor:
        last = await cursor.fetchone()
    reason = str(last[0] or "") if last else ""
    stopped = reason.removeprefix("limit:") if reason.startswith("limit:") else None
    assert row is not None
    await db.execute(
        "UPDATE runs SET model_calls = ?, tool_calls = ?, input_tokens = ?, output_tokens = ?,"
        " stopped_by = ? WHERE id = ?", (*tuple(row), stopped, run_id),
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
