"""The read-only queries: the ledger and explain from the console, writing nothing.

See docs/contract.md#queries.
"""

from __future__ import annotations

import pytest
from aws_lambda_powertools import Metrics

from dispatch_fn.errors import EventError
from support import CLOCK, Conn, Invoke, duty, insert_duties, task_count


def _ledger_rows(conn: Conn) -> int:
    row = conn.execute("SELECT count(*) FROM duly_dispatch_run").fetchone()
    assert row is not None
    return int(row[0])


def test_the_runs_query_answers_the_ledger_newest_first_as_runs_json_does(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0)])
    first = invoke({"now": "2026-08-20T01:00:00Z"})
    second = invoke({"now": CLOCK})

    answer = invoke({"query": "runs", "limit": 1})

    assert [run["id"] for run in answer["runs"]] == [second["run_id"]]
    assert answer["runs"][0]["status"] == "completed"
    assert [run["id"] for run in invoke({"query": "runs"})["runs"]] == [
        second["run_id"], first["run_id"],
    ]  # fmt: skip


def test_a_query_writes_nothing_and_emits_no_run_metric(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0)])
    metrics = Metrics(namespace="Duly", service="duly-dispatcher")
    # Powertools' Metrics share one set across instances: start from none.
    metrics.clear_metrics()

    invoke({"query": "runs"}, metrics=metrics)
    invoke({"query": "explain", "duty_id": "d1", "now": CLOCK}, metrics=metrics)

    assert (_ledger_rows(conn), task_count(conn)) == (0, 0)
    assert set(metrics.metric_set) == {"QueriesAnswered"}


def test_the_explain_query_answers_what_explain_json_does(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0)])
    answer = invoke({"query": "explain", "duty_id": "d1", "now": CLOCK})["explain"]
    window = invoke(
        {"query": "explain", "duty_id": "d1", "from": "2026-08-01", "to": "2026-08-03"}
    )["explain"]

    assert answer["found"] is True
    assert [(c["period_key"], c["verdict"]) for c in answer["candidates"]] == [
        ("2026-08-21", "would_create")
    ]
    assert [c["period_key"] for c in window["candidates"]] == [
        "2026-08-01", "2026-08-02", "2026-08-03",
    ]  # fmt: skip
    missing = invoke({"query": "explain", "duty_id": "nobody", "now": CLOCK})["explain"]
    assert missing == {"duty_id": "nobody", "found": False}
    elsewhere = invoke(
        {"query": "explain", "duty_id": "d1", "organization_id": "org-2", "now": CLOCK}
    )["explain"]
    assert elsewhere == {"duty_id": "d1", "found": False}


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"query": "runs", "limit": 0}, "limit"),
        ({"query": "runs", "limit": 101}, "limit"),
        ({"query": "runs", "limit": True}, "limit"),
        ({"query": "runs", "dry_run": True}, "dry_run: unknown field"),
        ({"query": "explain", "now": CLOCK}, "duty_id"),
        ({"query": "explain", "duty_id": "d1", "to": "2026-08-01"}, "'to' without 'from'"),
        ({"query": "tasks"}, "query: 'tasks'; expected 'runs' or 'explain'"),
    ],
)
def test_a_query_with_anything_else_is_refused(
    conn: Conn, invoke: Invoke, event: dict[str, object], problem: str
) -> None:
    with pytest.raises(EventError, match=problem):
        invoke(event)
    assert _ledger_rows(conn) == 0


def test_a_dry_run_moves_no_alarm(conn: Conn, invoke: Invoke) -> None:
    insert_duties(
        conn, [duty("d1", frequency="daily", lead_days=0), duty("mars", timezone="Mars/x")]
    )
    metrics = Metrics(namespace="Duly", service="duly-dispatcher")
    # Powertools' Metrics share one set across instances: start from none.
    metrics.clear_metrics()

    dry = invoke({"now": CLOCK, "dry_run": True}, metrics=metrics)

    assert dry["degraded"] is True
    # Only its own count, which no alarm watches.
    assert set(metrics.metric_set) == {"DryRuns"}
