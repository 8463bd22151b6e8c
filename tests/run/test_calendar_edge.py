"""At the calendar's edges (years 1583 and 9999) the database path refuses what the planner refuses.

docs/contract.md#periods: a duty whose lead, offset, roll or grace would read or emit a date
outside calendar years 1583-9999 is an ``invalid_cadence`` fault with the
engine's message; it gets no task, and every other duty is dispatched.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import psycopg
import pytest

from dispatch_fn.planning import FaultReason, RunRequest, Window, plan_dispatch
from dispatch_fn.run import dispatch, explain
from runtimes import runtime
from support import assert_run_is_the_plan, duty, insert_duties, refuse_tasks, task_rows

_FIRST_QUARTER_1583 = (
    datetime(1583, 3, 15, tzinfo=UTC),
    Window(date(1583, 1, 1), date(1583, 3, 31)),
)
_LAST_QUARTER_9999 = (
    datetime(9999, 12, 1, tzinfo=UTC),
    Window(date(9999, 10, 1), date(9999, 12, 31)),
)

# Each case: the duties, the run, and which of them the engine refuses.
_CASES = {
    "lead before 1583": (
        [duty("lead-7"), duty("lead-0", lead_days=0), duty("quarterly-7", frequency="quarterly")],
        _FIRST_QUARTER_1583,
        {"lead-7", "quarterly-7"},
    ),
    "roll back before 1583": (
        # 1583-01-01 is a Saturday: the business day before it is in 1582.
        [duty("preceding", lead_days=0, due_roll="preceding"), duty("none", lead_days=0)],
        _FIRST_QUARTER_1583,
        {"preceding"},
    ),
    "after the period past 9999": (
        [
            duty("one-month-after", due_anchor="after_period_end", due_offset_months=1),
            duty("days-after", due_anchor="after_period_end", due_offset_days=1),
            duty("in-time", due_anchor="after_period_end", due_offset_days=0, grace_days=0),
        ],
        _LAST_QUARTER_9999,
        {"one-month-after", "days-after"},
    ),
    "grace past 9999": (
        [duty("graced", due_anchor="period_end", grace_days=1),
         duty("no-grace", due_anchor="period_end")],
        _LAST_QUARTER_9999,
        {"graced"},
    ),
    "negative lead past 9999": (
        [duty("visible-after", due_anchor="period_end", lead_days=-1), duty("visible-before")],
        _LAST_QUARTER_9999,
        {"visible-after"},
    ),
    "a lead past the last week of 9999": (
        # The planner plans each lead: lead 0 sees only the current week; lead
        # 30 reaches 9999-W52, whose Sunday is in year 10000.
        [duty("weekly-0", frequency="weekly", lead_days=0),
         duty("weekly-30", frequency="weekly", lead_days=30)],
        (datetime(9999, 12, 8, 1, tzinfo=UTC), None),
        {"weekly-30"},
    ),
    "a lead past the last week of 9999, with a grace out of range": (
        # Refused twice over: the planner names the lead first, as the report must.
        [duty("weekly-0", frequency="weekly", lead_days=0),
         duty("weekly-30-graced", frequency="weekly", lead_days=30, grace_days=400)],
        (datetime(9999, 12, 8, 1, tzinfo=UTC), None),
        {"weekly-30-graced"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(_CASES))
def test_the_database_path_refuses_what_the_planner_refuses_at_the_calendar_edge(
    conn: psycopg.Connection[Any], case: str
) -> None:
    duties, (now, window), refused = _CASES[case]
    insert_duties(conn, duties)
    plan = plan_dispatch(duties, now, window)
    assert {f.duty_id for f in plan.faults} == refused
    assert {f.reason for f in plan.faults} == {FaultReason.INVALID_CADENCE}

    report = dispatch([conn], RunRequest(now=now, window=window), runtime(chunk_size=2))

    assert_run_is_the_plan(conn, report, plan)
    assert report.degraded
    assert not {row["duty_id"] for row in task_rows(conn)} & refused
    assert {row["duty_id"] for row in task_rows(conn)} == {d["id"] for d in duties} - refused
    for row in task_rows(conn):
        for column in ("due_date", "visible_from", "late_after"):
            assert 1583 <= row[column].year <= 9999, (row["duty_id"], column, row[column])


def test_explain_gives_the_fault_the_run_reports_at_the_calendar_edge(
    conn: psycopg.Connection[Any],
) -> None:
    duties, (now, window), refused = _CASES["lead before 1583"]
    insert_duties(conn, duties)
    explained = explain(conn, [d["id"] for d in duties], now, window)
    report = dispatch([conn], RunRequest(now=now, window=window))
    faults = {f["duty_id"]: f for f in report.as_json()["faults"]}
    assert set(faults) == refused
    for duty_id, fault in faults.items():
        skip = explained[duty_id]["skip"]
        assert skip["fault"]
        assert (skip["reason"], skip["detail"]) == (fault["reason"], fault["detail"])


@pytest.mark.parametrize(
    ("now", "window"),
    [
        _LAST_QUARTER_9999,
        (datetime(2026, 12, 1, tzinfo=UTC), Window(date(2026, 10, 1), date(2026, 12, 31))),
    ],
    ids=["at-the-edge", "off-the-edge"],
)
def test_a_duty_refused_behind_pages_the_row_budget_cut_is_set_aside_once_and_nothing_is_redone(
    conn: psycopg.Connection[Any], now: datetime, window: Window
) -> None:
    # Three months each, a budget of three rows: one duty a page; d2's rows are refused.
    duties = [duty(f"d{n}", due_anchor="period_end") for n in range(1, 5)]
    insert_duties(conn, duties)
    refuse_tasks(conn, "NEW.duty_id = 'd2'")

    report = dispatch(
        [conn], RunRequest(now=now, window=window), runtime(chunk_size=10, page_rows=3)
    )

    assert [f.duty_id for f in report.faults] == ["d2"]
    assert (report.duties_read, report.tasks_created, report.tasks_existing) == (4, 9, 0)
    assert (report.pages, report.complete, report.last_duty_id) == (3, True, "d4")
    assert len(task_rows(conn)) == 9


def test_a_duty_the_edge_refuses_past_a_failing_page_is_counted_once(
    conn: psycopg.Connection[Any],
) -> None:
    now, window = _LAST_QUARTER_9999
    # "graced" (its grace reaches into year 10000) is refused by the planner's
    # judgement of the page, past the duty whose rows the server refuses.
    duties = [duty(f"d{n}", due_anchor="period_end") for n in range(1, 4)]
    duties.append(duty("graced", due_anchor="period_end", grace_days=1))
    insert_duties(conn, duties)
    refuse_tasks(conn, "NEW.duty_id = 'd1'")

    report = dispatch(
        [conn], RunRequest(now=now, window=window), runtime(chunk_size=10, page_rows=3)
    )

    assert sorted(f.duty_id for f in report.faults) == ["d1", "graced"]
    assert report.fault_counts["invalid_cadence"] == 2
    assert (report.duties_read, report.tasks_created, report.tasks_existing) == (4, 6, 0)
    assert (report.complete, report.last_duty_id) == (True, "graced")
