"""Outages: a scheduled run after missed days owes what the missed daily runs would have.

See docs/contract.md#account. Each duty keeps its own account: the local day
through which its owed periods are dispatched (``dispatch_through``). A run
owes the periods that became owed after that day and by its own today, back to
the catch-up horizon (``DISPATCH_CATCH_UP_DAYS``, default 7, at least 1); an
over period that became owed on or before the horizon is not created but
counted (``beyond_horizon``, a count of duties).

The oracle is the pure planner: the rows of a run after an outage are exactly
the union of ``plan_dispatch`` at the earlier clock, each missed daily clock and
the run's own, or keys spelled out by hand.
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

from dispatch_fn.db import ledger
from dispatch_fn.planning import RunRequest, plan_dispatch
from dispatch_fn.run import dispatch, dispatch_recorded
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

_DUTY_ID = TASK_COLUMNS.index("duty_id")


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


def _duties_of(rows: set[tuple[Any, ...]]) -> int:
    """How many duties ``rows`` hold tasks of: the duties a run owing them owes something."""
    return len({row[_DUTY_ID] for row in rows})


def _daily(first: str, last: str) -> list[str]:
    start, end = date.fromisoformat(first), date.fromisoformat(last)
    return [(start + timedelta(days=n)).isoformat() for n in range((end - start).days + 1)]


def _accounts(conn: Conn) -> dict[str, date | None]:
    rows = conn.execute("SELECT id, dispatch_through FROM duly_duty ORDER BY id").fetchall()
    return {str(duty_id): through for duty_id, through in rows}


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
    # Changed (docs/contract.md#account): there is no catch-up object; the run
    # counts the duties whose accounts owed them something, and none owed a
    # period beyond the horizon or changed while owed.
    counts = (report["duties_owing"], report["beyond_horizon"], report["changed_while_owed"])
    assert counts == (_duties_of(expected - first), 0, 0)
    assert report["tasks_existing"] == 0
    assert report["tasks_created"] == len(expected - first)
    assert task_keys(conn, "daily-utc") == _daily("2026-08-28", "2026-09-02")
    # Its 29th and 30th became owed inside its window while it was dispatchable,
    # within the horizon: owed though its window has closed by the run's today
    # (docs/contract.md#account).
    assert task_keys(conn, "ends") == _daily("2026-08-28", "2026-08-30")
    assert task_keys(conn, "monthly") == ["2026-08", "2026-09"]


def test_a_run_after_an_outage_creates_exactly_the_rows_of_the_daily_runs_it_replaces(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, MIXED)
    invoke({"now": "2026-08-28T01:00:00Z"})
    caught = invoke({"now": "2026-09-02T01:00:00Z"})
    with_outage, marks = task_rows(conn), last_dispatched(conn)
    conn.execute("DELETE FROM duly_task")
    # Changed (docs/contract.md#account): the accounts are cleared too, so the
    # daily runs start from duties no run has kept, as the first run did.
    conn.execute(
        "UPDATE duly_duty SET last_dispatched_period = NULL,"
        " dispatch_through = NULL, dispatch_paused_on = NULL, dispatch_changed_on = NULL,"
        " dispatch_next = '0001-01-01', dispatch_next_at = '0001-01-01 00:00:00+00'"
    )
    # Daily runs each looking back no further than a day (a horizon of one day).
    invoke = partial(invoke, catch_up_days=0)
    created = 0
    for day in ("08-28", "08-29", "08-30", "08-31", "09-01", "09-02"):
        created += invoke({"now": f"2026-{day}T01:00:00Z"})["tasks_created"]
    assert task_rows(conn) == with_outage
    assert last_dispatched(conn) == marks
    first = 1  # the run at 08-28 created the same rows both times
    assert created - caught["tasks_created"] == _count_of_run(conn, first)


def _count_of_run(conn: Conn, run_id: int) -> int:
    row = conn.execute(
        "SELECT (report ->> 'tasks_created')::int FROM duly_dispatch_run WHERE id = %s", (run_id,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_report_counts_the_duties_owing_and_the_tasks_created_after_missed_days(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    report = invoke({"now": CLOCK})
    # Changed (docs/contract.md#account): no catch-up clocks to count; the
    # duty's account owed it the two missed days and its own.
    counts = (report["duties_owing"], report["beyond_horizon"], report["changed_while_owed"])
    assert counts == (1, 0, 0)
    assert report["tasks_created"] == 3
    assert task_keys(conn) == _daily("2026-08-18", "2026-08-21")
    # Its re-run finds the account at that day: nothing is owed since
    # (docs/contract.md#account: a re-run at the same clock owes nothing).
    again = invoke({"now": CLOCK})
    assert (again["duties_owing"], again["tasks_existing"]) == (0, 0)
    assert again["tasks_created"] == 0


def test_a_run_a_day_after_the_last_owes_nothing_extra(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-20T01:00:00Z"})
    report = invoke({"now": CLOCK})
    # Changed (docs/contract.md#account): its own day is all the account owes.
    assert (report["tasks_created"], report["duties_owing"], report["beyond_horizon"]) == (1, 1, 0)
    assert task_keys(conn) == ["2026-08-20", "2026-08-21"]


def test_the_first_run_ever_owes_from_the_scheduled_clock_before_it(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    report = invoke({"now": CLOCK})
    # Changed (docs/contract.md#account): a duty no run has kept owes from the
    # scheduled clock before the run, so nothing before its own day.
    assert (report["tasks_created"], report["beyond_horizon"]) == (1, 0)
    assert task_keys(conn) == ["2026-08-21"]


def test_a_missed_span_beyond_the_horizon_is_created_within_it_and_counted_beyond_it(
    conn: Conn, invoke: Invoke
) -> None:
    invoke = partial(invoke, catch_up_days=3)
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-01T01:00:00Z"})
    report = invoke({"now": CLOCK})
    # What became owed today and on the three days before (the three missed
    # daily clocks' days) is created; older days are counted, not created
    # (docs/contract.md#account).
    assert (report["tasks_created"], report["beyond_horizon"]) == (4, 1)
    assert task_keys(conn) == ["2026-08-01", *_daily("2026-08-18", "2026-08-21")]


def test_the_default_horizon_is_seven_days(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-01T01:00:00Z"})
    report = invoke({"now": CLOCK})
    # Today and the seven days before it are created; older ones are counted.
    assert (report["tasks_created"], report["beyond_horizon"]) == (8, 1)
    assert task_keys(conn) == ["2026-08-01", *_daily("2026-08-14", "2026-08-21")]


def test_catch_up_days_zero_is_a_horizon_of_one_day(conn: Conn, invoke: Invoke) -> None:
    invoke = partial(invoke, catch_up_days=0)
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    report = invoke({"now": CLOCK})
    # The horizon is at least a day (docs/contract.md#account): yesterday is
    # still created, the days before it are counted, not created.
    assert (report["tasks_created"], report["beyond_horizon"]) == (2, 1)
    assert task_keys(conn) == ["2026-08-18", "2026-08-20", "2026-08-21"]


def test_a_replayed_older_clock_creates_nothing_the_account_says_is_done(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": CLOCK})
    replay = invoke({"now": "2026-08-10T01:00:00Z"})
    # Changed (docs/contract.md#account): a run at a clock older than the
    # account's day creates nothing the account says is done (the old rule
    # created the replayed clock's own day) and leaves the account alone.
    assert (replay["tasks_created"], replay["duties_owing"]) == (0, 0)
    assert task_keys(conn) == ["2026-08-21"]
    assert _accounts(conn) == {"daily": date(2026, 8, 21)}
    # Nor does it become the day the next run owes from.
    following = invoke({"now": "2026-08-22T01:00:00Z"})
    assert (following["tasks_created"], following["beyond_horizon"]) == (1, 0)
    assert task_keys(conn) == ["2026-08-21", "2026-08-22"]


class _NoTimeLeft:
    aws_request_id = "no-time-left"

    def get_remaining_time_in_millis(self) -> int:
        return 0


def test_an_incomplete_run_leaves_the_accounts_it_did_not_reach(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    stopped = invoke({"now": "2026-08-20T01:00:00Z"}, _NoTimeLeft())
    assert stopped["complete"] is False
    report = invoke({"now": CLOCK})
    # Changed (docs/contract.md#account): the account still says the 18th,
    # so the next run owes the 19th on.
    assert (report["tasks_created"], report["duties_owing"]) == (3, 1)
    assert task_keys(conn) == _daily("2026-08-18", "2026-08-21")


def test_a_failed_run_leaves_the_accounts_it_did_not_reach(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    failed = ledger.start(
        conn,
        RunRequest(now=_at("2026-08-20T01:00:00Z")),
        request_id=None,
        continues_run=None,
    )
    ledger.finish(conn, failed, "failed", None, "the database went away")
    report = invoke({"now": CLOCK})
    # Changed (docs/contract.md#account): two missed days and its own.
    assert (report["tasks_created"], report["duties_owing"]) == (3, 1)
    assert task_keys(conn) == _daily("2026-08-18", "2026-08-21")


def test_scoped_runs_read_accounts_as_any_run_does_and_dry_runs_keep_none(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("daily", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-15T01:00:00Z"})
    scoped = invoke({"now": "2026-08-19T01:00:00Z", "organization_id": "org-1"})
    dry = invoke({"now": "2026-08-20T01:00:00Z", "dry_run": True})
    # Changed (docs/contract.md#account): the scoped run owes what the account
    # says, the days since the 15th; the dry run counts the 20th, writes
    # nothing and leaves the account at the 19th.
    assert (scoped["tasks_created"], scoped["duties_owing"]) == (4, 1)
    assert (dry["tasks_created"], dry["duties_owing"]) == (1, 1)
    assert _accounts(conn) == {"daily": date(2026, 8, 19)}
    report = invoke({"now": CLOCK})
    assert (report["tasks_created"], report["duties_owing"]) == (2, 1)
    assert task_keys(conn) == _daily("2026-08-15", "2026-08-21")


def test_a_duty_unpaused_during_an_outage_owes_its_days_from_the_latest_clock_before(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", status="paused", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    conn.execute("UPDATE duly_duty SET status = 'active'")
    invoke({"now": CLOCK})
    # The resume is placed at the latest scheduled clock (the 18th's run, which
    # found it paused): it owes what became owed after it (docs/contract.md#account).
    assert task_keys(conn) == _daily("2026-08-19", "2026-08-21")


def test_a_duty_paused_and_resumed_during_an_outage_owes_every_missed_day(
    conn: Conn, invoke: Invoke
) -> None:
    # New (docs/contract.md#account): the pause and the resume are both placed
    # at the 18th's run; what became owed by it was dispatched, and the resume
    # owes its current period and what became owed after it.
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0)])
    invoke({"now": "2026-08-18T01:00:00Z"})
    conn.execute("UPDATE duly_duty SET status = 'paused'")
    conn.execute("UPDATE duly_duty SET status = 'active'")
    report = invoke({"now": CLOCK})
    assert task_keys(conn) == _daily("2026-08-18", "2026-08-21")
    assert (report["tasks_created"], report["changed_while_owed"]) == (3, 0)


def test_two_runs_at_once_after_an_outage_leave_exactly_the_expected_rows(
    conn: Conn, db_url: str
) -> None:
    duties = [
        duty(f"d{n:03}", frequency=("daily", "weekly", "monthly")[n % 3], lead_days=n % 2)
        for n in range(60)
    ]
    insert_duties(conn, duties)
    earlier = _at("2026-08-27T01:00:00Z")
    now = _at("2026-09-02T01:00:00Z")
    dispatch_recorded([conn], RunRequest(now=earlier))
    barrier = threading.Barrier(2)
    reports: list[dict[str, Any]] = []

    def run() -> None:
        with (
            psycopg.connect(db_url, autocommit=True) as own,
            psycopg.connect(db_url, autocommit=True) as helper,
        ):
            barrier.wait()
            reports.append(
                dispatch_recorded(
                    [own, helper], RunRequest(now=now), runtime(chunk_size=7)
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
    # Changed (docs/contract.md#account): no catch-up clocks; both runs are
    # complete, nothing was beyond the horizon, and every account reached today.
    assert all(report["complete"] and report["beyond_horizon"] == 0 for report in reports)
    assert set(_accounts(conn).values()) == {now.date()}
    # Between them they created each missing row once.
    first = _planned(duties, [earlier])
    assert sum(report["tasks_created"] for report in reports) == len(
        _planned(duties, clocks) - first
    )


def test_a_run_after_an_outage_killed_mid_run_and_rerun_leaves_exactly_the_expected_rows(
    conn: Conn, db_url: str, tmp_path: Path
) -> None:
    duties = [duty(f"d{n:03}", frequency="daily", lead_days=n % 3) for n in range(120)]
    insert_duties(conn, duties)
    earlier, now = _at("2026-08-16T01:00:00Z"), _at("2026-08-21T01:00:00Z")
    dispatch_recorded([conn], RunRequest(now=earlier))
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
    # The killed client's backend may still finish, and commit, the page it
    # was running: count what it left once no other session is active.
    while time.monotonic() < deadline and conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND state = 'active'"
    ).fetchone() != (0,):
        time.sleep(0.02)
    expected = _planned(duties, [earlier + timedelta(days=n) for n in range(6)])
    killed = len(_stored(conn))
    assert before + 150 <= killed < len(expected)
    conn.execute("DROP TRIGGER slow ON duly_task")
    rerun = dispatch_recorded([conn], RunRequest(now=now)).as_json()
    # Changed (docs/contract.md#account): the killed run's committed pages
    # moved their duties' accounts with their rows, so the rerun owes exactly
    # the rest, and none of it lay beyond the horizon.
    assert (rerun["tasks_created"], rerun["beyond_horizon"]) == (len(expected) - killed, 0)
    assert _stored(conn) == expected


def test_a_missed_day_refused_for_one_duty_redoes_nothing_and_reports_that_duty_once(
    conn: Conn,
) -> None:
    insert_duties(conn, [duty(f"d{n}", frequency="daily", lead_days=0) for n in range(1, 4)])
    now = _at(CLOCK)
    dispatch([conn], RunRequest(now=now - timedelta(days=2)))
    # d1's task of the missed day is refused.
    refuse_tasks(conn, "NEW.duty_id = 'd1' AND NEW.period_key = '2026-08-20'")

    report = dispatch([conn], RunRequest(now=now))

    assert [f.duty_id for f in report.faults] == ["d1"]
    # Changed (docs/contract.md#account, #faults): one statement writes a
    # duty's owed rows and moves its account, so the refused duty gets none of
    # them (not its own day either) and keeps its account; the others get both days.
    assert (report.duties_read, report.tasks_created, report.tasks_existing) == (3, 4, 0)
    assert (report.pages, report.complete, report.last_duty_id) == (1, True, "d3")
    assert task_keys(conn) == [
        "2026-08-19",
        *("2026-08-19", "2026-08-20", "2026-08-21"),
        *("2026-08-19", "2026-08-20", "2026-08-21"),
    ]
    # Once the refusal is lifted, the next run owes d1 its two days and
    # redoes nothing for the others.
    conn.execute("DROP TRIGGER refuse_task ON duly_task")
    again = dispatch([conn], RunRequest(now=now))
    assert (again.tasks_created, again.tasks_existing, again.faults) == (2, 0, ())
    assert task_keys(conn, "d1") == _daily("2026-08-19", "2026-08-21")


def test_a_manual_run_at_a_future_clock_never_switches_the_accounts_off(
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
    # Five missed days, then the real run: the future run read the duty at a
    # clock no scheduled run has reached, and the real run still owes every
    # period that became owed since the account's day (docs/contract.md#account:
    # "manual runs at past or future clocks").
    report = invoke({"now": today.isoformat()})

    assert ahead["complete"] is True
    # Changed (docs/contract.md#account): no catch-up clocks; the real run
    # owes the five missed days and its own.
    assert (report["tasks_created"], report["duties_owing"]) == (6, 1)
    # Every day up to today is there.
    up_to_today = [key for key in task_keys(conn) if key <= today.date().isoformat()]
    assert up_to_today == _daily(before.date().isoformat(), today.date().isoformat())
