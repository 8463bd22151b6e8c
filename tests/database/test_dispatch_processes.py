"""Runs in separate processes: at the same instant, and killed mid-run (SPEC §6)."""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import replace
from datetime import date
from typing import Any

import psycopg
import pytest

from bench.dispatch import child
from dispatch_fn.plan import Window, plan_dispatch
from support import (
    NOW,
    TASK_COLUMNS,
    duty,
    insert_duties,
    last_dispatched,
    latest_keys,
    task_count,
    task_rows,
)

ZONES = ("UTC", "Asia/Shanghai", "America/Los_Angeles", "Europe/Berlin", "Pacific/Auckland")
FREQUENCIES = ("daily", "weekly", "fortnightly", "monthly", "quarterly")

pytestmark = pytest.mark.slow


def _duties(count: int) -> list[dict[str, Any]]:
    return [
        duty(
            f"duty-{n:05}",
            organization_id=f"org-{n % 7}",
            owner_id=f"owner-{n % 13}",
            frequency=FREQUENCIES[n % len(FREQUENCIES)],
            timezone=ZONES[n % len(ZONES)],
            lead_days=n % 20,
        )
        for n in range(count)
    ]


def _spawn(
    dsn: str, request: child.ChildSpec, start_at: float, chunk: int, *, pause: float, workers: int
) -> subprocess.Popen[str]:
    return child.spawn(
        replace(
            request, dsn=dsn, start_at=start_at, chunk_size=chunk, pause_s=pause, workers=workers
        )
    )


def _expected(
    duties: list[dict[str, Any]], windows: list[Window | None]
) -> tuple[set[tuple[Any, ...]], dict[str, str | None]]:
    rows: set[tuple[Any, ...]] = set()
    for window in windows:
        rows |= {
            tuple(d[c] for c in TASK_COLUMNS) for d in plan_dispatch(duties, NOW, window).drafts
        }
    latest = latest_keys(
        (d["id"] for d in duties), (dict(zip(TASK_COLUMNS, row, strict=True)) for row in rows)
    )
    return rows, latest


def _wait_for_other_backends_to_end(conn: psycopg.Connection[Any]) -> None:
    # A killed client's statement runs on: its backend only notices the
    # closed socket when it sends the result, and the page commits first. Count
    # the rows once every page that was in flight has ended.
    deadline = time.monotonic() + 30
    while conn.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND backend_type = 'client backend'"
    ).fetchone() != (0,):
        assert time.monotonic() < deadline, "the killed run's backends did not end"
        time.sleep(0.01)


def _rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in TASK_COLUMNS) for r in task_rows(conn)]


# The dsn, start, page size, pause and connections are filled in by _spawn.
SCHEDULED = child.ChildSpec(dsn="", now=NOW.isoformat(), chunk_size=1, workers=1)
BACKFILL = replace(SCHEDULED, window=("2026-05-01", "2026-08-31"))
BACKFILL_WINDOW = Window(date(2026, 5, 1), date(2026, 8, 31))


@pytest.mark.parametrize(
    ("first", "second", "windows"),
    [
        (SCHEDULED, SCHEDULED, [None]),
        (SCHEDULED, BACKFILL, [None, BACKFILL_WINDOW]),
    ],
    ids=["two-schedules", "schedule-and-backfill"],
)
@pytest.mark.parametrize("workers", [1, 2], ids=["one-connection", "two-connections"])
def test_two_runs_started_at_the_same_instant_both_succeed_and_leave_each_task_once(
    conn: psycopg.Connection[Any],
    db_url: str,
    first: child.ChildSpec,
    second: child.ChildSpec,
    windows: list[Window | None],
    *,
    workers: int,
) -> None:
    duties = _duties(600)
    insert_duties(conn, duties)
    start_at = time.time() + 1.5
    runs = [
        _spawn(db_url, first, start_at, 25, pause=0.0, workers=workers),
        _spawn(db_url, second, start_at, 25, pause=0.0, workers=workers),
    ]
    reports = [child.collect(each, timeout=120)["report"] for each in runs]
    expected_rows, expected_latest = _expected(duties, windows)
    rows = _rows(conn)
    assert len(rows) == len(set(rows))
    assert set(rows) == expected_rows
    assert last_dispatched(conn) == expected_latest
    # Between them the two runs created every row exactly once.
    assert sum(r["tasks_created"] for r in reports) == len(expected_rows)


@pytest.mark.parametrize("workers", [1, 2], ids=["one-connection", "two-connections"])
def test_a_run_killed_mid_way_and_run_again_leaves_exactly_the_expected_rows(
    conn: psycopg.Connection[Any], db_url: str, workers: int
) -> None:
    duties = _duties(400)
    insert_duties(conn, duties)
    expected_rows, expected_latest = _expected(duties, [BACKFILL_WINDOW])
    victim = _spawn(
        db_url, BACKFILL, time.time(), 10, pause=0.05, workers=workers
    )  # 40 pages, 50 ms apart
    deadline = time.monotonic() + 60
    while task_count(conn) == 0:
        assert victim.poll() is None, "the run finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    _wait_for_other_backends_to_end(conn)
    partial = task_count(conn)
    assert 0 < partial < len(expected_rows)
    # Only whole pages survive: every duty has all of its rows or none of them.
    per_duty = conn.execute("SELECT duty_id, count(*) FROM duly_task GROUP BY duty_id").fetchall()
    wanted = {d: sum(1 for r in expected_rows if r[1] == d) for d, _ in per_duty}
    assert all(n == wanted[d] for d, n in per_duty)

    rerun = _spawn(db_url, BACKFILL, time.time(), 10, pause=0.0, workers=workers)
    assert child.collect(rerun, timeout=120)["report"]["tasks_created"] == (
        len(expected_rows) - partial
    )
    assert set(_rows(conn)) == expected_rows
    assert task_count(conn) == len(expected_rows)
    assert last_dispatched(conn) == expected_latest
