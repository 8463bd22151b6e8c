"""Review gate, grace, due dates after the period and rolls on the database path."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import psycopg
import pytest
from psycopg import sql

from dispatch_fn.db import apply_migrations
from dispatch_fn.planning import RunRequest, Window, plan_dispatch
from dispatch_fn.run import dispatch
from support import CLOCK, NOW, Invoke, duty, insert_duties, multiset, task_keys, task_rows

BACKFILL = Window(date(2026, 1, 1), date(2026, 12, 31))


def _run(conn: psycopg.Connection[Any], now: datetime = NOW, window: Window | None = None) -> Any:
    return dispatch([conn], RunRequest(now=now, window=window)).as_json()


# --- the review gate ---


@pytest.mark.parametrize("window", [None, BACKFILL], ids=["scheduled", "backfill"])
def test_only_approved_duties_get_tasks_and_the_rest_are_counted_not_approved(
    conn: psycopg.Connection[Any], window: Window | None
) -> None:
    reviews = ["approved", "to_confirm", "to_review", "returned", None]
    insert_duties(conn, [duty(f"d{n}", review_status=r) for n, r in enumerate(reviews)])
    report = _run(conn, window=window)
    assert {row["duty_id"] for row in task_rows(conn)} == {"d0"}
    assert report["skipped"]["not_approved"] == 4
    assert report["degraded"] is False
    assert report["duties_read"] == 5


def test_returning_an_approved_duty_stops_new_tasks_and_keeps_the_old(
    conn: psycopg.Connection[Any],
) -> None:
    insert_duties(conn, [duty("d1", lead_days=0)])
    _run(conn)
    assert task_keys(conn) == ["2026-08"]
    conn.execute("UPDATE duly_duty SET review_status = 'returned'")
    report = _run(conn, now=datetime(2026, 9, 2, 1, tzinfo=UTC))
    assert task_keys(conn) == ["2026-08"]
    assert report["skipped"]["not_approved"] == 1


def test_a_gated_duty_with_a_broken_cadence_is_not_a_fault(
    conn: psycopg.Connection[Any],
) -> None:
    insert_duties(conn, [duty("d1", review_status="to_review", timezone="Mars/Olympus")])
    report = _run(conn)
    assert report["faults"] == []
    assert report["skipped"]["not_approved"] == 1


# --- grace ---


def test_late_after_is_stamped_once_and_never_recomputed(conn: psycopg.Connection[Any]) -> None:
    insert_duties(conn, [duty("d1", grace_days=7, due_offset_days=27, lead_days=0)])
    _run(conn)
    conn.execute("UPDATE duly_duty SET grace_days = 30, name = 'Renamed'")
    _run(conn)
    (row,) = task_rows(conn)
    assert (row["due_date"], row["late_after"], row["subject"]) == (
        date(2026, 8, 28),
        date(2026, 9, 4),
        "Duty d1",
    )


# --- due dates after the period, rolls, the same as the planner ---

COMPLIANCE_DUTIES = [
    duty("vat-q", frequency="quarterly", due_anchor="after_period_end", due_offset_days=20,
         due_roll="following", holiday_calendar="GB-SCT"),
    duty("payroll", frequency="monthly", due_anchor="after_period_end", due_offset_days=15,
         due_roll="modified_following", holiday_calendar="US"),
    duty("annual", frequency="annual", due_anchor="after_period_end", due_offset_months=4,
         due_roll="preceding", holiday_calendar="CN"),
    duty("weekly-sa", frequency="weekly", due_anchor="period_end", due_roll="following",
         holiday_calendar="SA", timezone="Asia/Riyadh"),
    duty("month-end", frequency="monthly", due_anchor="period_end",
         due_roll="modified_following"),
    duty("bavaria", frequency="daily", due_roll="preceding", holiday_calendar="DE-BY",
         timezone="Europe/Berlin", grace_days=3),
    duty("ended", frequency="monthly", due_anchor="after_period_end", due_offset_months=1,
         effective_to=date(2026, 6, 30), grace_days=10),
]  # fmt: skip


@pytest.mark.parametrize("window", [None, BACKFILL], ids=["scheduled", "backfill"])
def test_rolled_and_after_period_due_dates_match_the_planner(
    conn: psycopg.Connection[Any], window: Window | None
) -> None:
    insert_duties(conn, COMPLIANCE_DUTIES)
    plan = plan_dispatch(COMPLIANCE_DUTIES, NOW, window)
    report = _run(conn, window=window)
    assert multiset(task_rows(conn)) == multiset(plan.drafts)
    assert report["tasks_created"] == len(plan.drafts) > len(COMPLIANCE_DUTIES)


def test_the_quarterly_vat_return_is_due_twenty_days_after_the_quarter(
    conn: psycopg.Connection[Any],
) -> None:
    insert_duties(conn, COMPLIANCE_DUTIES[:1])
    _run(conn, window=BACKFILL)
    due = {row["period_key"]: row["due_date"] for row in task_rows(conn)}
    assert due == {
        "2026-Q1": date(2026, 4, 20),
        "2026-Q2": date(2026, 7, 20),
        "2026-Q3": date(2026, 10, 20),
        "2026-Q4": date(2027, 1, 20),
    }


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"due_offset_months": 2}, "due_offset_months 2"),
        ({"due_anchor": "after_period_end", "due_offset_days": 500}, "due_offset_days 500"),
        ({"grace_days": 367}, "grace_days 367"),
        ({"due_roll": "sideways"}, "'sideways'"),
        ({"holiday_calendar": "Atlantis"}, "'Atlantis'"),
    ],
)
def test_a_refused_due_rule_is_a_fault_and_every_other_duty_is_dispatched(
    conn: psycopg.Connection[Any], fields: dict[str, Any], named: str
) -> None:
    duties = [duty("bad", **fields), duty("good")]
    insert_duties(conn, duties)
    plan = plan_dispatch(duties, NOW)
    report = _run(conn)
    assert report["degraded"] is True
    assert report["fault_counts"]["invalid_cadence"] == 1
    (fault,) = report["faults"]
    assert (fault["duty_id"], fault["reason"]) == ("bad", "invalid_cadence")
    assert named in fault["detail"]
    assert fault["detail"] == plan.faults[0].detail
    assert {row["duty_id"] for row in task_rows(conn)} == {"good"}


def test_only_the_out_of_range_duties_of_a_group_are_set_aside(
    conn: psycopg.Connection[Any],
) -> None:
    duties = [duty(f"d{n}", grace_days=n * 100) for n in range(6)]  # 400 and 500 out of range
    insert_duties(conn, duties)
    report = _run(conn)
    assert sorted(f["duty_id"] for f in report["faults"]) == ["d4", "d5"]
    assert sorted({row["duty_id"] for row in task_rows(conn)}) == ["d0", "d1", "d2", "d3"]
    assert report["duties_read"] == 6


def test_the_handler_reports_the_gate_and_stamps_grace(
    conn: psycopg.Connection[Any], invoke: Invoke
) -> None:
    insert_duties(conn, [duty("gated", review_status="to_review"), duty("graced", grace_days=5)])
    report = invoke({"now": CLOCK})
    assert report["skipped"]["not_approved"] == 1
    assert report["tasks_created"] == 1
    (row,) = task_rows(conn)
    assert (row["duty_id"], row["due_date"], row["late_after"]) == (
        "graced",
        date(2026, 8, 1),
        date(2026, 8, 6),
    )


# --- the migration ---


def test_existing_tasks_get_late_after_from_their_due_date(server_dsn: str, db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute(
            "DROP TABLE duly_dispatch_fault, duly_dispatch_set_aside, duly_dispatch_run, duly_task,"
            " duly_duty, duly_schema_migration CASCADE"
        )
    with psycopg.connect(db_url) as conn:
        apply_migrations(conn, until="0002_duty_fillfactor")
        conn.execute(
            "INSERT INTO duly_duty (id, organization_id, name, form, status, owner_id, source,"
            " frequency) VALUES ('d1', 'o', 'n', 'recurring', 'active', 'u', 'self', 'daily')"
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO duly_task (organization_id, duty_id, owner_id, subject, source,"
                " period_key, due_date, visible_from)"
                " SELECT 'o', 'd1', 'u', 'n', 'self', to_char(day, 'YYYY-MM-DD'), day, day - 7"
                " FROM generate_series(date '2020-01-01', date '2024-12-31', '1 day') g,"
                " LATERAL (SELECT g::date AS day) d"
            )
        )
        conn.commit()
        applied = apply_migrations(conn)
        assert "0006_task_late_after" in applied
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE late_after = due_date) FROM duly_task"
        ).fetchone()
        assert row == (1827, 1827)
        nullable = conn.execute(
            "SELECT is_nullable FROM information_schema.columns"
            " WHERE table_name = 'duly_task' AND column_name = 'late_after'"
        ).fetchone()
        assert nullable == ("NO",)
        indexes = {
            str(name)
            for (name,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename IN ('duly_task', 'duly_duty')"
            )
        }
        assert {"duly_task_open_late", "duly_duty_next_at"} <= indexes
        assert "duly_duty_dispatchable" not in indexes
        defaults = conn.execute(
            "SELECT review_status, grace_days, due_offset_months, due_roll, holiday_calendar"
            " FROM duly_duty"
        ).fetchone()
        assert defaults == ("approved", 0, 0, "none", None)
