"""Set-aside duties are owed again (docs/contract.md#owed-again).

A duty a run sets aside — its row locked elsewhere, its statement timed out
alone — did not get that clock's periods. The run says so and is degraded;
the ledger keeps the ids; the next run that writes owes them what that clock
(and every clock they missed since) owed them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from aws_lambda_powertools import Metrics

from support import Conn, Invoke, duty, insert_duties, task_keys

DAY = timedelta(days=1)
FIRST = datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
LOCKED = "d2"


def _clock(at: datetime) -> dict[str, str]:
    return {"now": at.isoformat().replace("+00:00", "Z")}


@pytest.fixture
def holder(db_url: str) -> Iterator[Conn]:
    """Another session that can hold a duty's row with ``SELECT ... FOR UPDATE``."""
    with psycopg.connect(db_url) as other:
        yield other
        other.rollback()


def _lock(holder: Conn) -> None:
    holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (LOCKED,))


def _daily_duties(conn: Conn) -> None:
    insert_duties(conn, [duty(f"d{n}", frequency="daily", lead_days=0) for n in range(5)])


def _set_aside_rows(conn: Conn) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT r.clock, s.duty_id, s.reason, s.repaid_by IS NOT NULL"
        " FROM duly_dispatch_set_aside s JOIN duly_dispatch_run r ON r.id = s.run_id"
        " ORDER BY r.clock, s.duty_id"
    ).fetchall()


def test_a_duty_locked_during_a_run_gets_that_period_from_the_next_run(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    invoke(_clock(FIRST), lock_timeout_ms=200)
    _lock(holder)

    locked_run = invoke(_clock(FIRST + DAY), lock_timeout_ms=200)
    holder.rollback()
    following = invoke(_clock(FIRST + 2 * DAY), lock_timeout_ms=200)

    assert task_keys(conn, LOCKED) == ["2026-11-27", "2026-11-28", "2026-11-29"]
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
    assert following["owed_again"] == {
        "duties": 1,
        "from": (FIRST + DAY).isoformat(),
        "to": (FIRST + DAY).isoformat(),
        "clocks": 1,
        "windows": 0,
        "tasks_created": 1,
    }
    assert following["degraded"] is False
    assert _set_aside_rows(conn) == [(FIRST + DAY, LOCKED, "locked", True)]


def test_a_set_aside_duty_is_owed_every_clock_it_missed_since_within_the_catch_up_days(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    invoke(_clock(FIRST), lock_timeout_ms=200)
    holder.rollback()
    # A scoped run is not the scheduled chain: it owes no catch-up, but it is a
    # run that writes, so it repays what its scope holds.
    repaid = invoke({**_clock(FIRST + 3 * DAY), "organization_id": "org-1"}, lock_timeout_ms=200)

    assert task_keys(conn, LOCKED) == [
        "2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30",
    ]  # fmt: skip
    assert task_keys(conn, "d0") == ["2026-11-27", "2026-11-30"]
    assert repaid["owed_again"]["clocks"] == 3
    assert repaid["owed_again"]["tasks_created"] == 3


def test_a_duty_locked_again_while_it_is_repaid_stays_owed(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    invoke(_clock(FIRST), lock_timeout_ms=200)
    again = invoke(_clock(FIRST + DAY), lock_timeout_ms=200)
    holder.rollback()
    invoke(_clock(FIRST + 2 * DAY), lock_timeout_ms=200)

    assert again["set_aside_count"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11-27", "2026-11-28", "2026-11-29"]
    assert [repaid for *_, repaid in _set_aside_rows(conn)] == [True, True]


def test_a_dry_run_neither_sets_aside_for_later_nor_repays(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    invoke(_clock(FIRST), lock_timeout_ms=200)
    holder.rollback()

    dry = invoke({**_clock(FIRST + DAY), "dry_run": True}, lock_timeout_ms=200)

    assert dry["owed_again"] is None
    assert task_keys(conn, LOCKED) == []
    assert [repaid for *_, repaid in _set_aside_rows(conn)] == [False]


def test_a_run_with_set_aside_duties_emits_the_set_aside_metric(
    conn: Conn, holder: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    _daily_duties(conn)
    _lock(holder)
    metrics = Metrics(namespace="Duly", service="duly-dispatcher")
    metrics.clear_metrics()  # one set shared by every instance

    invoke(_clock(FIRST), lock_timeout_ms=200, metrics=metrics)

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
    slow = invoke(_clock(FIRST), statement_timeout_ms=400)
    conn.execute("DROP TRIGGER slow_insert ON duly_task")
    following = invoke(_clock(FIRST + DAY), statement_timeout_ms=400)

    assert [(s["duty_id"], s["reason"]) for s in slow["set_aside"]] == [(LOCKED, "timed_out")]
    assert (slow["degraded"], slow["complete"]) == (True, True)
    assert following["owed_again"]["tasks_created"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11-27", "2026-11-28"]
    assert _set_aside_rows(conn) == [(FIRST, LOCKED, "timed_out", True)]


def test_a_duty_set_aside_by_a_catching_up_run_is_owed_the_clocks_it_caught_up(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    invoke(_clock(FIRST), lock_timeout_ms=200)
    _lock(holder)
    # Two days missed: this run catches up -28 and -29, but not for the locked duty.
    caught = invoke(_clock(FIRST + 3 * DAY), lock_timeout_ms=200)
    holder.rollback()
    following = invoke(_clock(FIRST + 4 * DAY), lock_timeout_ms=200)

    assert caught["catch_up"]["clocks"] == 2
    assert task_keys(conn, "d0") == [
        "2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30", "2026-12-01",
    ]  # fmt: skip
    assert task_keys(conn, LOCKED) == task_keys(conn, "d0")
    assert following["owed_again"]["clocks"] == 3


def test_a_catching_up_run_s_clocks_are_owed_even_past_the_next_runs_bound(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    invoke(_clock(FIRST), lock_timeout_ms=200)
    _lock(holder)
    # Seven days caught up, the earliest of them eight days before the next run.
    invoke(_clock(FIRST + 8 * DAY), lock_timeout_ms=200)
    holder.rollback()
    invoke(_clock(FIRST + 9 * DAY), lock_timeout_ms=200)

    assert task_keys(conn, LOCKED) == task_keys(conn, "d0")
    assert "2026-11-28" in task_keys(conn, LOCKED)


def test_a_set_aside_duty_paused_since_stays_owed_until_it_is_dispatched_again(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    invoke(_clock(FIRST), lock_timeout_ms=200)
    holder.rollback()
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    paused = invoke(_clock(FIRST + DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    invoke(_clock(FIRST + 2 * DAY))

    assert paused["owed_again"] is None
    # The first run that dispatches it again owes the set-aside clock and each
    # daily clock since, read as the duty is now: as catch-up reads a duty
    # un-paused during an outage (docs/operations.md).
    assert task_keys(conn, LOCKED) == ["2026-11-27", "2026-11-28", "2026-11-29"]
    assert [repaid for *_, repaid in _set_aside_rows(conn)] == [True]


def test_a_duty_set_aside_by_a_backfill_is_owed_that_window(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _daily_duties(conn)
    _lock(holder)
    window = {"from": "2026-11-01", "to": "2026-11-05"}
    backfill = invoke({**_clock(FIRST), **window}, lock_timeout_ms=200)
    holder.rollback()
    following = invoke(_clock(FIRST + DAY))

    assert backfill["set_aside_count"] == 1
    assert following["owed_again"]["windows"] == 1
    assert task_keys(conn, LOCKED) == [
        "2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05", "2026-11-28",
    ]  # fmt: skip
