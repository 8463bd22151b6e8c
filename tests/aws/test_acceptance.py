"""The user's acceptance criteria, each through lambda_handler on real PostgreSQL.

See docs/contract.md#acceptance.
"""

from __future__ import annotations

from functools import partial

import pytest

from support import CLOCK, Conn, Invoke, duty, insert_duties, last_dispatched, task_count, task_keys


def test_running_the_job_twice_over_the_same_clock_inserts_nothing_the_second_time(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(
        conn,
        [
            duty("monthly"),
            duty("weekly", frequency="weekly", lead_days=3),
            duty("daily", frequency="daily", timezone="Asia/Kathmandu"),
            duty("quarterly", frequency="quarterly", timezone="Europe/Berlin", lead_days=60),
        ],
    )
    first = invoke({"now": CLOCK})
    rows_after_first = task_count(conn)
    second = invoke({"now": CLOCK})
    assert first["tasks_created"] == rows_after_first > 0
    assert second["tasks_created"] == 0
    # Each duty's account says its periods are dispatched and when it next owes
    # something: nothing is owed again, and no duty is read to find that out.
    assert (second["tasks_existing"], second["duties_owing"]) == (0, 0)
    assert (second["duties_read"], second["skipped"]["nothing_due"]) == (0, 0)
    assert second["duties_advanced"] == 0
    assert task_count(conn) == rows_after_first


def test_shanghai_and_los_angeles_duties_get_their_local_period_on_one_utc_run(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(
        conn,
        [
            duty("sh", timezone="Asia/Shanghai", frequency="daily", lead_days=0),
            duty("la", timezone="America/Los_Angeles", frequency="daily", lead_days=0),
        ],
    )
    # 01:00 UTC, the schedule's hour: 09:00 on the 21st in Shanghai, 18:00 on the 20th in LA.
    invoke({"scheduled_time": CLOCK})
    assert task_keys(conn, "sh") == ["2026-08-21"]
    assert task_keys(conn, "la") == ["2026-08-20"]


def test_standing_duties_produce_nothing_in_any_run(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("standing", form="standing", frequency="monthly")])
    scheduled = invoke({"now": CLOCK})
    backfill = invoke({"from": "2025-08-01", "to": "2026-08-31", "now": CLOCK})
    assert task_count(conn) == 0
    assert scheduled["skipped"]["standing"] == backfill["skipped"]["standing"] == 1
    assert last_dispatched(conn) == {"standing": None}


def test_a_paused_duty_produces_nothing_and_unpausing_it_owes_only_the_current_period(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", status="paused", lead_days=0)])
    for month in ("2026-05", "2026-06", "2026-07"):
        report = invoke({"now": f"{month}-15T01:00:00Z"})
        assert report["skipped"]["not_active"] == 1
    assert task_count(conn) == 0
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = 'd1'")
    invoke({"now": CLOCK})
    assert task_keys(conn) == ["2026-08"]


def test_last_dispatched_period_advances_and_never_regresses(
    conn: Conn, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The clock jumps six weeks without the daily runs in between: this test is
    # about the mark, not about catching those weeks up (test_catch_up is).
    invoke = partial(invoke, catch_up_days=0)
    insert_duties(conn, [duty("d1", lead_days=0)])
    invoke({"now": "2026-08-21T01:00:00Z"})
    assert last_dispatched(conn) == {"d1": "2026-08"}
    jumped = invoke({"now": "2026-10-02T01:00:00Z"})
    assert last_dispatched(conn) == {"d1": "2026-10"}
    # September became owed before the one-day horizon: counted, not created
    # (docs/contract.md#account), and a replay at its clock finds it dispatched.
    assert jumped["beyond_horizon"] == 1
    replay = invoke({"now": "2026-09-10T01:00:00Z"})
    assert replay["tasks_created"] == 0
    # Older periods created later (a backfill) never move it back.
    backfill = invoke({"from": "2025-01-01", "to": "2025-12-31", "now": CLOCK})
    assert backfill["tasks_created"] == 12
    assert backfill["duties_advanced"] == 0
    assert last_dispatched(conn) == {"d1": "2026-10"}


def test_a_run_that_creates_nothing_for_a_duty_does_not_write_the_duty(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", lead_days=0)])
    invoke({"now": CLOCK})
    before = conn.execute("SELECT xmin::text FROM duly_duty WHERE id = 'd1'").fetchone()
    invoke({"now": CLOCK})
    after = conn.execute("SELECT xmin::text FROM duly_duty WHERE id = 'd1'").fetchone()
    assert before == after


def test_backfill_over_13_months_produces_exactly_the_expected_keys_and_repeats_as_a_no_op(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(
        conn,
        [
            duty("monthly", timezone="Pacific/Auckland"),
            duty("quarterly", frequency="quarterly", timezone="America/Santiago"),
            duty("weekly", frequency="weekly", timezone="Europe/Berlin"),
        ],
    )
    event = {"from": "2025-08-01", "to": "2026-08-31", "now": CLOCK}
    first = invoke(event)
    months = [f"2025-{m:02}" for m in range(8, 13)] + [f"2026-{m:02}" for m in range(1, 9)]
    assert task_keys(conn, "monthly") == months
    assert task_keys(conn, "quarterly") == ["2025-Q3", "2025-Q4", "2026-Q1", "2026-Q2", "2026-Q3"]
    # 2025-08-01 is a Friday in ISO week 31; 2026-08-31 a Monday in week 36.
    weeks = [f"2025-W{w:02}" for w in range(31, 53)] + [f"2026-W{w:02}" for w in range(1, 37)]
    assert task_keys(conn, "weekly") == weeks
    assert first["tasks_created"] == len(months) + 5 + len(weeks)
    second = invoke(event)
    assert second["tasks_created"] == 0
    assert second["tasks_existing"] == first["tasks_created"]
    assert task_count(conn) == first["tasks_created"]
