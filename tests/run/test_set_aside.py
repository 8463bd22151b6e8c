"""Set-aside duties (docs/contract.md#set-aside).

A duty a run sets aside — its row locked elsewhere, its statement timed out
alone — did not get that clock's periods. The run says so and is degraded;
the ledger keeps the ids; the duty's account was not moved, so the next run
that reads it owes what that clock (and every day since, within the horizon)
owed it (docs/contract.md#account).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools import Metrics

from support import Conn, Invoke, clock_event, duty, insert_duties, task_keys

DAY = timedelta(days=1)
# September, not November: every clock here, up to nine days on, stays before
# the wall clock, so no run is a manual run at a future clock, which keeps no
# account (see the contract's account section).
FIRST = datetime(2026, 9, 27, 1, 0, tzinfo=UTC)
LOCKED = "d2"


def _lock(holder: Conn) -> None:
    holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (LOCKED,))


def _daily_duties(conn: Conn) -> None:
    insert_duties(conn, [duty(f"d{n}", frequency="daily", lead_days=0) for n in range(5)])


def _set_aside_rows(conn: Conn) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT r.clock, s.duty_id, s.reason"
        " FROM duly_dispatch_set_aside s JOIN duly_dispatch_run r ON r.id = s.run_id"
        " ORDER BY r.clock, s.duty_id"
    ).fetchall()


def test_a_duty_locked_during_a_run_gets_that_period_from_the_next_run(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    invoke(clock_event(FIRST), lock_timeout_ms=200)
    _lock(holder)

    locked_run = invoke(clock_event(FIRST + DAY), lock_timeout_ms=200)
    holder.rollback()
    following = invoke(clock_event(FIRST + 2 * DAY), lock_timeout_ms=200)

    assert task_keys(conn, LOCKED) == ["2026-09-27", "2026-09-28", "2026-09-29"]
    assert locked_run["degraded"] is True
    assert locked_run["complete"] is True
    assert locked_run["set_aside"] == [
        {
            "duty_id": LOCKED,
            "reason": "locked",
            "detail": "its row was locked by another transaction; the next run dispatches it",
        }
    ]
    assert locked_run["set_aside_count"] == 1
    # Its own two days and one for each of the other four.
    assert (following["tasks_created"], following["duties_owing"]) == (6, 5)
    assert following["degraded"] is False
    assert _set_aside_rows(conn) == [(FIRST + DAY, LOCKED, "locked")]


def test_a_set_aside_duty_is_owed_every_clock_it_missed_since_within_the_catch_up_days(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    invoke(clock_event(FIRST), lock_timeout_ms=200)
    holder.rollback()
    # A scoped run reads its duties' accounts as any run does: the locked duty,
    # never kept, owes from the first run's clock; the others from their day.
    scoped = invoke(
        {**clock_event(FIRST + 3 * DAY), "organization_id": "org-1"}, lock_timeout_ms=200
    )

    assert task_keys(conn, LOCKED) == [
        "2026-09-27", "2026-09-28", "2026-09-29", "2026-09-30",
    ]  # fmt: skip
    assert task_keys(conn, "d0") == task_keys(conn, LOCKED)
    assert scoped["tasks_created"] == 4 + 4 * 3


def test_a_duty_locked_again_while_it_is_repaid_stays_owed(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    invoke(clock_event(FIRST), lock_timeout_ms=200)
    again = invoke(clock_event(FIRST + DAY), lock_timeout_ms=200)
    holder.rollback()
    invoke(clock_event(FIRST + 2 * DAY), lock_timeout_ms=200)

    assert again["set_aside_count"] == 1
    assert task_keys(conn, LOCKED) == ["2026-09-27", "2026-09-28", "2026-09-29"]
    assert len(_set_aside_rows(conn)) == 2


def test_a_dry_run_neither_records_a_set_aside_nor_keeps_an_account(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    invoke(clock_event(FIRST), lock_timeout_ms=200)
    holder.rollback()

    dry = invoke({**clock_event(FIRST + DAY), "dry_run": True}, lock_timeout_ms=200)
    following = invoke(clock_event(FIRST + DAY), lock_timeout_ms=200)

    # What it would create: the locked duty's two days, the others' one each.
    assert dry["tasks_created"] == 2 + 4
    assert _set_aside_rows(conn) == [(FIRST, LOCKED, "locked")]
    # The dry run kept no account: the real run at its clock still owes both days.
    assert following["tasks_created"] == 2 + 4
    assert task_keys(conn, LOCKED) == ["2026-09-27", "2026-09-28"]


def test_a_run_with_set_aside_duties_emits_the_set_aside_metric(
    conn: Conn, holder: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    _daily_duties(conn)
    _lock(holder)
    metrics = Metrics(namespace="Duly", service="duly-dispatcher")
    metrics.clear_metrics()  # one set shared by every instance

    invoke(clock_event(FIRST), lock_timeout_ms=200, metrics=metrics)

    assert metrics.metric_set["SetAsideDuties"]["Value"] == [1.0]
    assert metrics.metric_set["Degraded"]["Value"] == [1.0]


def test_a_duty_that_timed_out_alone_gets_that_period_from_the_next_run(
    conn: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    conn.execute(
        "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF NEW.duty_id = 'd2' THEN PERFORM pg_sleep(1); END IF; RETURN NEW; END $$"
    )
    conn.execute(
        "CREATE TRIGGER slow_insert BEFORE INSERT ON duly_task"
        " FOR EACH ROW EXECUTE FUNCTION slow_insert()"
    )
    slow = invoke(clock_event(FIRST), statement_timeout_ms=400)
    conn.execute("DROP TRIGGER slow_insert ON duly_task")
    following = invoke(clock_event(FIRST + DAY), statement_timeout_ms=400)

    assert [(s["duty_id"], s["reason"]) for s in slow["set_aside"]] == [(LOCKED, "timed_out")]
    assert (slow["degraded"], slow["complete"]) == (True, True)
    assert following["tasks_created"] == 2 + 4
    assert task_keys(conn, LOCKED) == ["2026-09-27", "2026-09-28"]
    assert _set_aside_rows(conn) == [(FIRST, LOCKED, "timed_out")]


def test_a_duty_set_aside_after_an_outage_is_owed_the_days_the_outage_missed(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    invoke(clock_event(FIRST), lock_timeout_ms=200)
    _lock(holder)
    # Two days missed: this run owes -28 and -29 too, but not for the locked duty.
    caught = invoke(clock_event(FIRST + 3 * DAY), lock_timeout_ms=200)
    holder.rollback()
    following = invoke(clock_event(FIRST + 4 * DAY), lock_timeout_ms=200)

    assert caught["tasks_created"] == 4 * 3
    assert task_keys(conn, "d0") == [
        "2026-09-27", "2026-09-28", "2026-09-29", "2026-09-30", "2026-10-01",
    ]  # fmt: skip
    assert task_keys(conn, LOCKED) == task_keys(conn, "d0")
    assert following["tasks_created"] == 4 + 4


def test_a_set_aside_duty_is_owed_within_the_horizon_of_the_run_that_reads_it(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    invoke(clock_event(FIRST), lock_timeout_ms=200)
    _lock(holder)
    # Eight days missed; then the locked duty's run comes nine days after its
    # account's day: what became owed before its seven-day horizon is
    # counted, not created (docs/contract.md#account).
    invoke(clock_event(FIRST + 8 * DAY), lock_timeout_ms=200)
    holder.rollback()
    following = invoke(clock_event(FIRST + 9 * DAY), lock_timeout_ms=200)

    # The others' run eight days on still owed the 28th; the locked duty's,
    # a day later, finds it owed before its horizon.
    assert "2026-09-28" in task_keys(conn, "d0")
    assert task_keys(conn, LOCKED) == [key for key in task_keys(conn, "d0") if key != "2026-09-28"]
    assert following["beyond_horizon"] == 1


def test_a_set_aside_duty_paused_since_is_owed_the_set_aside_day_once_resumed(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    invoke(clock_event(FIRST), lock_timeout_ms=200)
    holder.rollback()
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    paused = invoke(clock_event(FIRST + DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 2 * DAY))

    assert paused["tasks_created"] == 4
    # The first run that reads it again owes the set-aside day, not the day
    # it was paused on, and its current day (docs/contract.md#account).
    assert task_keys(conn, LOCKED) == ["2026-09-27", "2026-09-29"]


def test_a_duty_set_aside_by_a_backfill_is_recorded_and_its_account_left(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    window = {"from": "2026-09-01", "to": "2026-09-05"}
    backfill = invoke({**clock_event(FIRST), **window}, lock_timeout_ms=200)
    holder.rollback()
    following = invoke(clock_event(FIRST + DAY))

    assert backfill["set_aside_count"] == 1
    assert _set_aside_rows(conn) == [(FIRST, LOCKED, "locked")]
    # A backfill keeps no account: its window is an operator's to run again
    # (docs/contract.md#backfill); the scheduled run owes what it always did.
    assert following["tasks_created"] == 5
    assert task_keys(conn, LOCKED) == ["2026-09-28"]
