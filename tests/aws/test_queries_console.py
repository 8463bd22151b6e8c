"""The console's `runs` query answers what `runs show ID`, `--mode` and `--status` do locally,
and every answer stays well inside Lambda's 6 MB response, whatever the ledger holds.

See docs/contract.md#queries.
"""

from __future__ import annotations

import json

import pytest

from dispatch_fn.aws.queries import ANSWER_BYTES
from dispatch_fn.cli import ExitStatus
from dispatch_fn.db import ledger, runs_table
from dispatch_fn.errors import EventError
from support import CLOCK, NOW, Conn, Invoke, cli, duty, insert_duties

# Lambda's synchronous response limit.
LAMBDA_RESPONSE_BYTES = 6 * 1024 * 1024


def _size(answer: object) -> int:
    return len(json.dumps(answer).encode("utf-8"))


def test_the_budget_is_well_inside_lambdas_response_limit() -> None:
    assert ANSWER_BYTES * 4 <= LAMBDA_RESPONSE_BYTES


def test_thirty_dry_runs_scoped_by_8000_duty_ids_each_answer_well_inside_6_mb(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1")])
    ids = [f"duty-{n:020d}" for n in range(8000)]
    for _ in range(30):
        invoke({"now": CLOCK, "dry_run": True, "duty_ids": ids})

    answer = invoke({"query": "runs", "limit": 100})

    assert len(answer["runs"]) == 30
    assert _size(answer) <= ANSWER_BYTES
    first = answer["runs"][0]
    # The scope summarised: a sample of its ids and how many there are.
    assert first["duty_ids_count"] == 8000
    assert first["duty_ids"] == ids[: len(first["duty_ids"])]
    assert len(first["duty_ids"]) < 100
    # One run whole, as `runs show ID --json`: every id.
    whole = invoke({"query": "runs", "run_id": first["id"]})["run"]
    assert whole["duty_ids"] == ids
    assert _size(whole) <= ANSWER_BYTES


def test_the_runs_query_filters_by_mode_and_status_as_the_cli_does(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1")])
    scheduled = invoke({"now": CLOCK})["run_id"]
    backfill = invoke({"from": "2026-01-01", "to": "2026-03-31"})["run_id"]
    conn.execute("UPDATE duly_dispatch_run SET status = 'failed' WHERE id = %s", (scheduled,))

    def ids(**filters: object) -> list[int]:
        return [run["id"] for run in invoke({"query": "runs", **filters})["runs"]]

    assert ids(mode="backfill") == [backfill]
    assert ids(status="failed") == [scheduled]
    assert ids(mode="backfill", status="failed") == []
    assert ids(status="abandoned") == []


def test_the_run_id_query_answers_as_runs_show_json(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("d1")])
    run_id = invoke({"now": CLOCK})["run_id"]
    ledger.record_set_aside(conn, run_id, [(None, "d9", "locked")], owed_from=NOW)
    answer = invoke({"query": "runs", "run_id": run_id})
    record = ledger.one(conn, run_id)
    assert record is not None
    assert answer["run"] == json.loads(runs_table.render_one(record, as_json=True))
    assert answer["run"]["report"]["run_id"] == run_id
    assert answer["run"]["set_aside"][0]["duty_id"] == "d9"
    assert invoke({"query": "runs", "run_id": run_id + 1000}) == {
        "run": None,
        "run_id": run_id + 1000,
    }


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"query": "runs", "mode": "hourly"}, "mode"),
        ({"query": "runs", "status": "finished"}, "status"),
        ({"query": "runs", "run_id": 0}, "run_id"),
        ({"query": "runs", "run_id": "3"}, "run_id"),
        ({"query": "runs", "run_id": 2**63}, "run_id"),
        ({"query": "runs", "run_id": 3, "limit": 5}, "run_id names one run"),
        ({"query": "runs", "run_id": 3, "mode": "scheduled"}, "run_id names one run"),
    ],
)
def test_a_runs_query_with_a_bad_filter_is_refused(
    conn: Conn, invoke: Invoke, event: dict[str, object], problem: str
) -> None:
    with pytest.raises(EventError, match=problem):
        invoke(event)


def test_whatever_the_ledger_holds_every_answer_stays_inside_the_budget(
    conn: Conn, invoke: Invoke
) -> None:
    """Rows written by hand (or by a future bug): megabytes of ids, error text and report."""
    huge_ids = [f"x{n:07d}" + "y" * 2000 for n in range(3000)]  # ~6 MB of ids
    for _ in range(3):
        conn.execute(
            "INSERT INTO duly_dispatch_run (mode, clock, duty_ids, dry_run, status, error, report,"
            " organization_id, request_id, finished_at)"
            " VALUES ('scheduled', now(), %s, true, 'failed', %s, %s, %s, %s, now())",
            (huge_ids, "e" * 7_000_000, json.dumps({"blob": "r" * 7_000_000}), "o" * 5000,
             "q" * 5000),
        )  # fmt: skip
    listed = invoke({"query": "runs", "limit": 100})
    assert _size(listed) <= ANSWER_BYTES
    assert len(listed["runs"]) == 3
    run_id = listed["runs"][0]["id"]
    whole = invoke({"query": "runs", "run_id": run_id})
    assert _size(whole) <= ANSWER_BYTES
    assert whole["run"]["id"] == run_id
    assert whole["run"]["duty_ids_count"] == 3000


def test_invoke_answers_the_run_id_query_with_the_runs_show_status(
    conn: Conn, database: str
) -> None:
    unknown = cli("invoke", "-", stdin='{"query": "runs", "run_id": 999}')
    assert unknown.returncode == ExitStatus.UNKNOWN_RUN
    assert json.loads(unknown.stdout) == {"run": None, "run_id": 999}
    assert "no run 999" in unknown.stderr
