"""Catch-up: a scheduled run after an outage owes what the missed daily runs would have.

See docs/contract.md#catch-up.

The oracle is the pure planner: the rows of a catching-up run are exactly the
union of ``plan_dispatch`` at the earlier clock, each missed clock and the run's own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dispatch_fn.db import ledger
from dispatch_fn.planning.plan import plan_dispatch
from dispatch_fn.run import catch_up, dispatch, recorded
from runtimes import runtime
from support import (
    CLOCK,
    TASK_COLUMNS,
    Conn,
    Invoke,
    duty,
    insert_duties,
    last_dispatched,
    refuse_tasks,
    task_keys,
    task_rows,
)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _planned(duties: list[dict[str, Any]], clocks: list[datetime]) -> set[tuple[Any, ...]]:
    return {
        tuple(draft[c] for c in TASK_COLUMNS)
        for clock in clocks
        for draft in plan_dispatch(duties, clock).drafts
    }


def _stored(conn: Conn) -> set[tuple[Any, ...]]:
    return {tuple(row[c] for c in TASK_COLUMNS) for row in task_rows(conn)}


def _daily(first: str, last: str) -> list[str]:
    start, end = date.fromisoformat(first), date.fromisoformat(last)
    return [(start + timedelta(days=n)).isoformat() for n in range((end - start).days + 1)]


# Duties whose tasks an outage could lose: no lead (each period's task is owed
# only while it is current), a month boundary inside the outage, zones either
# side of UTC, a window that closes during the outage and one that opens.
MIXED = [
    duty("daily-utc", frequency="daily", lead_days=0),
    duty("daily-la", frequency="daily", lead_days=0, timezone="America/Los_Angeles"),
    duty("daily-tokyo", frequency="daily", lead_days=1, timezone="Asia/Tokyo"),
    duty("weekly", frequency="weekly", lead_days=0, timezone="Europe/Berlin"),
    duty("monthly", lead_days=0, timezone="Pacific/Auckland"),
    duty("monthly-end", due_anchor="period_end", lead_days=3),
    duty("ends", frequency="daily", lead_days=0, effective_to=date(2026, 8, 30)),
    duty("starts", frequency="daily", lead_days=0, effective_from=date(2026, 8, 30)),
    duty("quarterly", frequency="quarterly", lead_days=10),
    # Due after the period, rolled onto a business day, with grace: the task of
    # August is owed from its visible-from date in September.
    duty(
        "payroll",
        due_anchor="after_period_end",
        due_offset_days=15,
        lead_days=20,
        due_roll="following",
        holiday_calendar="US",
        grace_days=3,
    ),
    duty("weekly-rolled", frequency="weekly", lead_days=0, due_roll="preceding"),
    duty("unapproved", frequency="daily", lead_days=0, review_status="to_review"),
]


def test_a_run_after_missed_days_creates_what_the_missed_daily_runs_would_have(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, MIXED)
    invoke({"now": "2026-08-28T01:00:00Z"})
    report = invoke({"now": "2026-09-02T01:00:00Z"})
    missed = [_at(f"2026-{day}T01:00:00Z") for day in ("08-29", "08-30", "08-31", "09-01")]
    expected = _planned(MIXED, [_at("2026-08-28T01:00:00Z"), *missed, _at("2026-09-02T01:00:00Z")])
    assert _stored(conn) == expected
    first = _planned(MIXED, [_at("2026-08-28T01:00:00Z")])
    own = _planned(MIXED, [_at("2026-09-02T01:00:00Z")])
    assert report["catch_up"] == {
        "from": "2026-08-29T01:00:00+00:00",
        "to": "2026-09-01T01:00:00+00:00",
        "clocks": 4,
        # Each page is dispatched at the run's own clock first: catch-up counts the rest.
        "tasks_created": len(expected - first - own),
    }
    assert report["tasks_created"] == len(expected - first)
    assert task_keys(conn, "daily-utc") == _daily("2026-08-28", "2026-09-02")
    assert task_keys(conn, "ends") == _daily("2026-08-28", "2026-08-30")
    assert task_keys(conn, "monthly") == ["2026-08", "2026-09"]


def test_catch_up_creates_exactly_the_rows_of_the_daily_runs_it_replaces(
    conn: Conn, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert_duties(conn, MIXED)
    invoke({"now": "2026-08-28T01:00:00Z"})
    caught = invoke({"now": "2026-09-02T01:00:00Z"})
    with_catch_up, marks = task_rows(conn), last_dispatched(conn)
    conn.execute("DELETE FROM duly_task")
    conn.execute("UPDATE duly_duty SET last_dispatched_period = NULL")
    invoke = partial(invoke, catch_up_days=0)
    created = 0
    for day in ("08-28", "08-29", "08-30", "08-31", "09-01", "09-02"):
        created += invoke({"now": f"2026-{day}T01:00:00Z"})["tasks_created"]
    assert task_rows(conn) == with_catch_up
    assert last_dispatched(conn) == marks
    first = 1  # the run at 08-28 created the same rows both times
    assert created - caught["tasks_created"] == _count_of_run(conn, first)


def _count_of_run(conn: Conn, run_id: int) -> int:
    row = conn.execute(
        "SELECT (report ->> 'tasks_created')::int FROM duly_dispatch_run WHERE id = %s", (run_id,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_catch_up_report_counts_the_clocks_and_the_tasks_created_for_them(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    report = invoke({"now": CLOCK})
    assert report["catch_up"] == {
        "from": "2026-08-19T01:00:00+00:00",
        "to": "2026-08-20T01:00:00+00:00",
        "clocks": 2,
        "tasks_created": 2,
    }
    assert report["tasks_created"] == 3
    assert task_keys(conn) == _daily("2026-08-18", "2026-08-21")
    # Its re-run finds that clock completed: nothing is missing since.
    again = invoke({"now": CLOCK})
    assert again["catch_up"] is None
    assert again["tasks_created"] == 0


def test_a_run_a_day_after_the_last_owes_no_catch_up(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-20T01:00:00Z"})
    assert invoke({"now": CLOCK})["catch_up"] is None
    assert task_keys(conn) == ["2026-08-20", "2026-08-21"]


def test_the_first_run_ever_owes_no_catch_up(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    assert invoke({"now": CLOCK})["catch_up"] is None
    assert task_keys(conn) == ["2026-08-21"]


def test_a_missed_week_beyond_the_bound_is_caught_up_only_for_the_bound(
    conn: Conn, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoke = partial(invoke, catch_up_days=3)
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-01T01:00:00Z"})
    report = invoke({"now": CLOCK})
    assert report["catch_up"] == {
        "from": "2026-08-18T01:00:00+00:00",
        "to": "2026-08-20T01:00:00+00:00",
        "clocks": 3,
        "tasks_created": 3,
    }
    assert task_keys(conn) == ["2026-08-01", *_daily("2026-08-18", "2026-08-21")]


def test_the_default_bound_is_seven_days(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-01T01:00:00Z"})
    report = invoke({"now": CLOCK})
    assert report["catch_up"]["clocks"] == 7
    assert task_keys(conn) == ["2026-08-01", *_daily("2026-08-14", "2026-08-21")]


def test_catch_up_days_zero_turns_it_off(
    conn: Conn, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoke = partial(invoke, catch_up_days=0)
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    assert invoke({"now": CLOCK})["catch_up"] is None
    assert task_keys(conn) == ["2026-08-18", "2026-08-21"]


def test_a_replayed_older_clock_catches_nothing_up(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": CLOCK})
    replay = invoke({"now": "2026-08-10T01:00:00Z"})
    assert replay["catch_up"] is None
    assert task_keys(conn) == ["2026-08-10", "2026-08-21"]
    # Nor does it become the clock the next run catches up from.
    assert invoke({"now": "2026-08-22T01:00:00Z"})["catch_up"] is None


def test_an_incomplete_run_is_not_a_completed_clock(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    stopped = invoke({"now": "2026-08-20T01:00:00Z"}, _NoTimeLeft())
    assert stopped["complete"] is False
    report = invoke({"now": CLOCK})
    assert report["catch_up"]["from"] == "2026-08-19T01:00:00+00:00"
    assert task_keys(conn) == _daily("2026-08-18", "2026-08-21")


def test_a_failed_run_is_not_a_completed_clock(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    failed = ledger.start(
        conn,
        dispatch.RunRequest(now=_at("2026-08-20T01:00:00Z")),
        request_id=None,
        continues_run=None,
    )
    ledger.finish(conn, failed, "failed", None, "the database went away")
    report = invoke({"now": CLOCK})
    assert report["catch_up"]["clocks"] == 2
    assert task_keys(conn) == _daily("2026-08-18", "2026-08-21")


def test_scoped_and_dry_runs_neither_catch_up_nor_count_as_completed_clocks(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-15T01:00:00Z"})
    scoped = invoke({"now": "2026-08-19T01:00:00Z", "organization_id": "org-1"})
    dry = invoke({"now": "2026-08-20T01:00:00Z", "dry_run": True})
    assert scoped["catch_up"] is None
    assert dry["catch_up"] is None
    report = invoke({"now": CLOCK})
    assert report["catch_up"]["from"] == "2026-08-16T01:00:00+00:00"
    assert task_keys(conn) == _daily("2026-08-15", "2026-08-21")


def test_a_duty_unpaused_during_an_outage_receives_the_missed_days_periods(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", status="paused", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    conn.execute("UPDATE duly_duty SET status = 'active'")
    invoke({"now": CLOCK})
    # The runs of the 19th and 20th would have found it active: their periods are owed.
    assert task_keys(conn) == _daily("2026-08-19", "2026-08-21")


def test_two_catching_up_runs_at_once_leave_exactly_the_expected_rows(
    conn: Conn, db_url: str
) -> None:
    duties = [
        duty(f"d{n:03}", frequency=("daily", "weekly", "monthly")[n % 3], lead_days=n % 2)
        for n in range(60)
    ]
    insert_duties(conn, duties)
    earlier = _at("2026-08-27T01:00:00Z")
    now = _at("2026-09-02T01:00:00Z")
    recorded.execute([conn], dispatch.RunRequest(now=earlier))
    barrier = threading.Barrier(2)
    reports: list[dict[str, Any]] = []

    def run() -> None:
        with (
            psycopg.connect(db_url, autocommit=True) as own,
            psycopg.connect(db_url, autocommit=True) as helper,
        ):
            barrier.wait()
            reports.append(
                recorded.execute(
                    [own, helper], dispatch.RunRequest(now=now), runtime(chunk_size=7)
                ).as_json()
            )

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    clocks = [earlier + timedelta(days=n) for n in range(7)]
    assert _stored(conn) == _planned(duties, clocks)
    assert len(reports) == 2
    assert all(report["catch_up"]["clocks"] == 5 for report in reports)
    # Between them they created each missing row once.
    first = _planned(duties, [earlier])
    assert sum(report["tasks_created"] for report in reports) == len(
        _planned(duties, clocks) - first
    )


def test_a_catching_up_run_killed_mid_run_and_rerun_leaves_exactly_the_expected_rows(
    conn: Conn, db_url: str, tmp_path: Path
) -> None:
    duties = [duty(f"d{n:03}", frequency="daily", lead_days=n % 3) for n in range(120)]
    insert_duties(conn, duties)
    earlier, now = _at("2026-08-16T01:00:00Z"), _at("2026-08-21T01:00:00Z")
    recorded.execute([conn], dispatch.RunRequest(now=earlier))
    conn.execute("CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS"
                 " $$ BEGIN PERFORM pg_sleep(0.002); RETURN NEW; END $$")  # fmt: skip
    conn.execute(
        "CREATE TRIGGER slow BEFORE INSERT ON duly_task FOR EACH ROW EXECUTE FUNCTION slow()"
    )
    event = tmp_path / "scheduled.json"
    event.write_text(json.dumps({"now": CLOCK}))
    child = subprocess.Popen(
        [sys.executable, "-m", "dispatch_fn", "invoke", str(event)],
        env={**os.environ, "DATABASE_URL": db_url, "DISPATCH_CHUNK_SIZE": "10"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    before = len(_stored(conn))
    deadline = time.monotonic() + 60
    while len(_stored(conn)) < before + 150 and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    expected = _planned(duties, [earlier + timedelta(days=n) for n in range(6)])
    assert before + 150 <= len(_stored(conn)) < len(expected)
    conn.execute("DROP TRIGGER slow ON duly_task")
    rerun = recorded.execute([conn], dispatch.RunRequest(now=now)).as_json()
    assert rerun["catch_up"]["clocks"] == 4
    assert _stored(conn) == expected


@pytest.mark.parametrize(
    ("latest", "now", "days", "expected"),
    [
        (None, "2026-08-21T01:00", 7, []),
        ("2026-08-20T01:00", "2026-08-21T01:00", 7, []),
        ("2026-08-21T01:00", "2026-08-10T01:00", 7, []),
        ("2026-08-19T01:00", "2026-08-21T01:00", 7, ["2026-08-20T01:00"]),
        ("2026-08-19T01:00", "2026-08-21T01:00", 0, []),
        ("2026-08-19T23:00", "2026-08-21T01:00", 7, ["2026-08-20T23:00"]),
        ("2020-01-01T01:00", "2026-08-21T01:00", 2, ["2026-08-19T01:00", "2026-08-20T01:00"]),
    ],
)
def test_missed_clocks_are_the_daily_clocks_between_within_the_bound(
    latest: str | None, now: str, days: int, expected: list[str]
) -> None:
    found = catch_up.missed_clocks(
        None if latest is None else _at(latest + "Z"), _at(now + "Z"), days
    )
    assert [clock.strftime("%Y-%m-%dT%H:%M") for clock in found] == expected


class _NoTimeLeft:
    aws_request_id = "no-time-left"

    def get_remaining_time_in_millis(self) -> int:
        return 0


def test_a_missed_clock_refused_for_one_duty_redoes_nothing_and_reports_that_duty_once(
    conn: Conn,
) -> None:
    insert_duties(conn, [duty(f"d{n}", frequency="daily", lead_days=0) for n in range(1, 4)])
    # The page at the run's own clock is stored; d1's task of the missed day is refused.
    refuse_tasks(conn, "NEW.duty_id = 'd1' AND NEW.period_key = '2026-08-20'")
    now = _at(CLOCK)

    report = dispatch.run(
        [conn], dispatch.RunRequest(now=now), catch_up_clocks=[now - timedelta(days=1)]
    )

    assert [f.duty_id for f in report.faults] == ["d1"]
    assert (report.duties_read, report.tasks_created, report.tasks_existing) == (3, 5, 0)
    assert (report.pages, report.complete, report.last_duty_id) == (1, True, "d3")
    assert task_keys(conn) == ["2026-08-21", "2026-08-20", "2026-08-21", "2026-08-20", "2026-08-21"]


def test_a_manual_run_at_a_future_clock_never_switches_catch_up_off(
    conn: Conn, invoke: Invoke
) -> None:
    # Real clocks: the ledger compares a run's clock with the wall clock when it started.
    today = datetime.now(UTC).replace(hour=1, minute=0, second=0, microsecond=0)
    if today > datetime.now(UTC):
        today -= timedelta(days=1)
    before = today - timedelta(days=6)
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": before.isoformat()})
    ahead = invoke({"now": (today + timedelta(days=40)).isoformat()})
    # Five missed days, then the real run.
    report = invoke({"now": today.isoformat()})

    assert ahead["complete"] is True
    assert report["catch_up"] is not None
    assert report["catch_up"]["clocks"] == 5
    # The future run caught up its own week ahead; every day up to today is there too.
    up_to_today = [key for key in task_keys(conn) if key <= today.date().isoformat()]
    assert up_to_today == _daily(before.date().isoformat(), today.date().isoformat())
