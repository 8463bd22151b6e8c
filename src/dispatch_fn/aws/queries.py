"""The function's read-only queries: the ledger and explain, where Aurora is private.

See docs/contract.md#queries.

A console user cannot reach the database, so the function answers the two
questions ``runs`` and ``explain`` answer locally. A query writes nothing: no
ledger row, no task, no run metric.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dispatch_fn.aws.events import Query
from dispatch_fn.db import ledger, runs_table
from dispatch_fn.db.sql import Connection
from dispatch_fn.run.explain import explain


def answer(
    conn: Connection, query: Query, *, interval: timedelta, catch_up_days: int
) -> dict[str, Any]:
    """``{"runs": [...]}`` or ``{"explain": {...}}``, as ``runs --json`` and ``explain --json``."""
    if query.kind == "runs":
        return {"runs": [runs_table.json_row(row) for row in ledger.recent(conn, query.limit)]}
    if query.duty_id is None or query.now is None:
        raise ValueError(f"an explain query needs a duty id and a clock; got {query!r}")
    explained = explain(
        conn,
        [query.duty_id],
        query.now,
        query.window,
        interval=interval,
        catch_up_days=catch_up_days,
    )
    return {"explain": explained[query.duty_id]}
