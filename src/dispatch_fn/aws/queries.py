"""The function's read-only queries: the ledger and explain, where Aurora is private.

See docs/contract.md#queries.

A console user cannot reach the database, so the function answers the two
questions ``runs`` and ``explain`` answer locally. A query writes nothing: no
ledger row, no task, no run metric.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Final

from dispatch_fn.aws.events import Query
from dispatch_fn.bounded import clip
from dispatch_fn.db import Connection, ledger, runs_table
from dispatch_fn.run import explain

# JSON bytes a runs answer may take: a sixth of Lambda's 6 MB response, so an answer
# never nears the limit whatever the ledger holds (a list's rows are already sampled
# and clipped by the statement; this bounds their total, and one run shown whole).
ANSWER_BYTES: Final = 1024 * 1024
# What a run shown whole keeps of a field too large for the answer.
_KEPT_IDS: Final = 1000
_KEPT_TEXT_BYTES: Final = 4096
_KEPT_LEDGER_ROWS: Final = 100


def answer(
    conn: Connection, query: Query, *, interval: timedelta, catch_up_days: int
) -> dict[str, Any]:
    """The answer to ``query``, as the local command would print it with ``--json``.

    ``{"runs": [...], "runs_omitted", "runs_hint"}`` (``runs``), ``{"run": {...} | null,
    "run_id"}`` (``runs show ID``) or ``{"explain": {...}}`` (``explain``).
    """
    if query.kind == "runs" and query.run_id is not None:
        return _one_run(conn, query.run_id)
    if query.kind == "runs":
        rows = ledger.recent(conn, query.limit, mode=query.mode, status=query.status)
        return _within_budget([runs_table.json_row(row) for row in rows])
    if query.duty_id is None or query.now is None:
        raise ValueError(f"an explain query needs a duty id and a clock; got {query!r}")
    explained = explain(
        conn,
        [query.duty_id],
        query.now,
        query.window,
        interval=interval,
        catch_up_days=catch_up_days,
        organization_id=query.organization_id,
    )
    return {"explain": explained[query.duty_id]}


def _within_budget(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The newest rows whose JSON fits ``ANSWER_BYTES``, and how many more did not."""
    kept: list[dict[str, Any]] = []
    used = 0
    for row in rows:
        size = _size(row)
        if used + size > ANSWER_BYTES:
            break
        kept.append(row)
        used += size
    omitted = len(rows) - len(kept)
    return {
        "runs": kept,
        "runs_omitted": omitted,
        "runs_hint": None
        if omitted == 0
        else (
            f"{omitted} older runs did not fit in the response; "
            '{"query": "runs", "run_id": ID} answers one, or ask for a smaller limit'
        ),
    }


def _one_run(conn: Connection, run_id: int) -> dict[str, Any]:
    """One run whole, as ``runs show ID --json``; what cannot fit the answer is cut and said."""
    record = ledger.one(conn, run_id)
    if record is None:
        return {"run": None, "run_id": run_id}
    run: dict[str, Any] = json.loads(runs_table.render_one(record, as_json=True))
    if _size(run) > ANSWER_BYTES:
        run = _cut(run)
    return {"run": run, "run_id": run_id}


def _cut(run: dict[str, Any]) -> dict[str, Any]:
    """A run too large to answer: its id list sampled, its text clipped, its report dropped.

    Only a ledger row written outside the dispatcher gets here: a run's own scope is
    capped at 240 KiB and its report is bounded.
    """
    cut = dict(run)
    cut["cut"] = []
    ids = cut.get("duty_ids")
    if isinstance(ids, list) and len(ids) > _KEPT_IDS:
        cut["duty_ids"] = ids[:_KEPT_IDS]
        cut["cut"].append(f"duty_ids: the first {_KEPT_IDS} of {len(ids)}")
    for name in ("organization_id", "request_id", "resume_after", "error"):
        value = cut.get(name)
        if isinstance(value, str) and _size(value) > _KEPT_TEXT_BYTES:
            cut[name] = clip(value, _KEPT_TEXT_BYTES)
            cut["cut"].append(f"{name}: clipped to {_KEPT_TEXT_BYTES} bytes")
    ids = cut.get("duty_ids")
    if isinstance(ids, list) and _size(ids) > ANSWER_BYTES // 2:
        cut["duty_ids"] = [clip(str(each)) for each in ids]
        cut["cut"].append("duty_ids: each id clipped")
    if _size(cut) > ANSWER_BYTES and cut.get("report") is not None:
        cut["report"] = None
        cut["cut"].append(
            "report: too large for a response; SELECT report FROM duly_dispatch_run reads it"
        )
    for name in ("set_aside", "refused_afresh"):
        if _size(cut) > ANSWER_BYTES and len(cut[name]) > _KEPT_LEDGER_ROWS:
            cut[name] = cut[name][:_KEPT_LEDGER_ROWS]
            cut["cut"].append(f"{name}: the first {_KEPT_LEDGER_ROWS}")
    return cut


def _size(value: object) -> int:
    return len(json.dumps(value).encode("utf-8"))
