"""Handler behaviour beyond the acceptance list: faults, dry runs, scope, refusals, report."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from dispatch_fn.errors import EventError
from support import CLOCK, Conn, Invoke, duty, insert_duties, last_dispatched, task_count, task_rows


def test_a_duty_in_an_unknown_zone_degrades_the_run_but_the_others_are_dispatched(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(
        conn,
        [duty("good-1"), duty("mars", timezone="Mars/Olympus"), duty("good-2", frequency="weekly")],
    )
    report = invoke({"now": CLOCK})
    assert report["degraded"] is True
    assert [(f["duty_id"], f["reason"]) for f in report["faults"]] == [("mars", "invalid_cadence")]
    assert "Mars/Olympus" in report["faults"][0]["detail"]
    assert {row["duty_id"] for row in task_rows(conn)} == {"good-1", "good-2"}
    assert last_dispatched(conn)["mars"] is None


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"form": "periodic"}, "unknown_form"),
        ({"frequency": None}, "no_frequency"),
        ({"frequency": "hourly"}, "unknown_frequency"),
        ({"due_anchor": "whenever"}, "invalid_cadence"),
    ],
)
def test_every_fault_reason_is_reported_by_duty(
    conn: Conn, invoke: Invoke, fields: dict[str, Any], reason: str
) -> None:
    insert_duties(conn, [duty("bad", **fields), duty("good")])
    report = invoke({"now": CLOCK})
    assert report["faults"] == [
        {"duty_id": "bad", "reason": reason, "detail": report["faults"][0]["detail"]}
    ]
    assert report["fault_counts"][reason] == 1
    assert report["degraded"] is True
    assert task_count(conn) == 1


def test_a_dry_run_writes_nothing_and_reports_what_a_real_run_would_create(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("a"), duty("b", frequency="weekly"), duty("c", frequency="daily")])
    invoke({"from": "2026-07-01", "to": "2026-07-31", "now": CLOCK})
    rows_before, marks_before = task_rows(conn), last_dispatched(conn)
    dry = invoke({"from": "2026-07-01", "to": "2026-08-31", "now": CLOCK, "dry_run": True})
    assert task_rows(conn) == rows_before
    assert last_dispatched(conn) == marks_before
    real = invoke({"from": "2026-07-01", "to": "2026-08-31", "now": CLOCK})
    assert dry["dry_run"] is True
    for field in ("tasks_created", "tasks_existing", "duties_advanced", "duties_read"):
        assert dry[field] == real[field], field
    assert real["tasks_created"] > 0


def test_a_scoped_backfill_touches_only_the_named_organisation_and_duties(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(
        conn,
        [
            duty("a1", organization_id="org-a"),
            duty("a2", organization_id="org-a"),
            duty("b1", organization_id="org-b"),
        ],
    )
    window = {"from": "2026-01-01", "to": "2026-03-31", "now": CLOCK}
    invoke({**window, "organization_id": "org-a", "duty_ids": ["a2"]})
    assert {(r["duty_id"], r["period_key"]) for r in task_rows(conn)} == {
        ("a2", "2026-01"), ("a2", "2026-02"), ("a2", "2026-03"),
    }  # fmt: skip
    report = invoke({**window, "organization_id": "org-b"})
    assert report["duties_read"] == 1
    assert {r["duty_id"] for r in task_rows(conn)} == {"a2", "b1"}


@pytest.mark.parametrize(
    ("event", "named"),
    [
        ([], "JSON object"),
        ({"nwo": CLOCK}, "nwo"),
        ({"from": "2026-13-01", "to": "2026-12-31"}, "2026-13-01"),
        ({"from": "2026/01/01", "to": "2026-12-31"}, "2026/01/01"),
        ({"from": 20260101}, "20260101"),
        ({"to": "2026-12-31"}, "'to' without 'from'"),
        ({"from": "2026-12-31", "to": "2026-01-01"}, "before"),
        ({"from": "2010-01-01", "to": "2026-01-01"}, "at most"),
        ({"now": "2026-08-21T01:00:00"}, "offset"),
        ({"now": "yesterday"}, "yesterday"),
        ({"dry_run": "yes"}, "dry_run"),
        ({"duty_ids": []}, "duty_ids"),
        ({"scheduled_time": "2026-08-21"}, "offset"),
        ({"scheduled_time": CLOCK, "extra": 1}, "extra"),
        ({"detail-type": "Scheduled Event"}, "time"),
        ({"detail-type": "Object Created", "time": CLOCK}, "detail-type"),
    ],
)
def test_a_refused_event_names_the_problem_and_writes_nothing(
    conn: Conn, invoke: Invoke, event: object, named: str
) -> None:
    insert_duties(conn, [duty("d1")])
    with pytest.raises(EventError) as refused:
        invoke(event)
    assert named in str(refused.value)
    assert task_count(conn) == 0
    assert last_dispatched(conn) == {"d1": None}


def test_the_window_cap_is_configurable(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("d1")])
    with pytest.raises(EventError, match="at most 31"):
        invoke({"from": "2026-01-01", "to": "2026-02-01"}, max_window_days=31)
    window = {"from": "2026-01-01", "to": "2026-01-31", "now": CLOCK}
    assert invoke(window, max_window_days=31)["tasks_created"] == 1


def test_the_report_carries_the_contract_fields(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("d1"), duty("s", form="standing"), duty("p", status="paused")])
    report = invoke({"from": "2026-01-01", "to": "2026-02-28", "now": CLOCK})
    assert report["mode"] == "backfill"
    assert report["now"] == "2026-08-21T01:00:00+00:00"
    assert report["window"] == {"from": "2026-01-01", "to": "2026-02-28"}
    assert report["dry_run"] is False
    assert report["duties_read"] == 3
    assert (report["tasks_created"], report["tasks_existing"], report["duties_advanced"]) == (
        2,
        0,
        1,
    )
    assert report["skipped"] == {
        "standing": 1, "one_off": 0, "not_active": 1, "not_approved": 0,
        "outside_effective_window": 0,
        "nothing_due": 0,
    }  # fmt: skip
    assert report["faults"] == []
    assert report["degraded"] is False
    assert report["complete"] is True


@pytest.mark.parametrize(
    ("event", "clock"),
    [
        (
            {"detail-type": "Scheduled Event", "source": "aws.events", "time": CLOCK, "detail": {}},
            CLOCK,
        ),
        ({"scheduled_time": CLOCK}, CLOCK),
        ({"now": "2026-08-21T09:00:00+08:00"}, CLOCK),
    ],
)
def test_a_scheduled_run_takes_its_clock_from_the_event(
    conn: Conn, invoke: Invoke, event: dict[str, Any], clock: str
) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0)])
    report = invoke(event)
    assert report["mode"] == "scheduled"
    assert report["now"] == "2026-08-21T01:00:00+00:00"
    assert [r["due_date"] for r in task_rows(conn)] == [date(2026, 8, 21)]


def test_an_empty_event_runs_at_the_current_time(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0)])
    report = invoke({})
    assert report["mode"] == "scheduled"
    assert report["tasks_created"] == 1
