"""The largest backfill the window cap allows, on daily duties: bounded pages, exact rows.

Run: .venv/bin/python -m bench.large_backfill [--duties 20000] [--days 1827] [--wild-lead]
     [--database-url DSN]

On a fresh database of the server (DATABASE_URL, or an embedded one), it
inserts ``--duties`` daily UTC duties and backfills the last ``--days`` days
(the cap, settings.DEFAULT_MAX_WINDOW_DAYS, by default) with the function's own
defaults: page size, row budget, workers, and sessions with the deployed
statement_timeout (300 s). It prints the wall time, the largest page in rows
and in seconds, the slowest statement against the timeout, and whether every
expected task exists exactly once (count = duties x days); exit status 1 if
not. ``--wild-lead`` instead times a scheduled run on the same duties with and
without one of them at a 3,660-day lead (issue 11), side by side.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg

from bench.dispatch.server import fresh_database, server, vacuum
from dispatch_fn import settings
from dispatch_fn.planning import RunRequest, Window
from dispatch_fn.run import RunReport, Runtime, dispatch

LAST_DAY = date(2026, 8, 20)
CLOCK = datetime(2026, 8, 21, 1, 0, tzinfo=UTC)
WILD_LEAD = 3_660
_PAGE_STATEMENT = "INSERT INTO duly_task"


@dataclass(slots=True)
class _Pages:
    # (seconds, owed rows) of every page statement, from every worker thread.
    seen: list[tuple[float, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _TimedConnection(psycopg.Connection[tuple[Any, ...]]):
    """Times each page statement and reads its owed rows from the result it returns."""

    pages: _Pages

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        started = time.perf_counter()
        cursor = super().execute(query, params, **kwargs)
        seconds = time.perf_counter() - started
        text = query.as_string(self) if hasattr(query, "as_string") else str(query)
        if _PAGE_STATEMENT in text:
            row = cursor.fetchone()
            cursor.scroll(0, mode="absolute")  # the dispatcher reads the row again
            names = [column.name for column in cursor.description or ()]
            owed = int(row[names.index("owed")]) if row else 0  # store.PageResult's owed
            with self.pages.lock:
                self.pages.seen.append((seconds, owed))
        return cursor


@dataclass(frozen=True, slots=True)
class Measured:
    """One backfill's figures."""

    seconds: float
    report: RunReport
    pages: tuple[tuple[float, int], ...]
    tasks: int
    distinct: int
    expected: int


def seed(conn: psycopg.Connection[Any], duties: int, *, wild: int = 0) -> None:
    """``duties`` daily UTC duties, the first ``wild`` of them with a 3,660-day lead."""
    conn.execute(
        "INSERT INTO duly_duty (id, organization_id, name, form, status, owner_id, source,"
        " frequency, timezone, lead_days) SELECT 'd' || lpad(n::text, 7, '0'), 'org-1',"
        " 'Duty ' || n, 'recurring', 'active', 'owner-1', 'catalog', 'daily', 'UTC',"
        " CASE WHEN n <= %(wild)s THEN %(lead)s ELSE 7 END"
        " FROM generate_series(1, %(duties)s) AS n",
        {"duties": duties, "wild": wild, "lead": WILD_LEAD},
    )
    vacuum(conn, ("duly_duty",))


def backfill(  # noqa: PLR0917 - the bench's knobs
    dsn: str,
    duties: int,
    days: int,
    page_rows: int | None = settings.DEFAULT_PAGE_ROWS,
    chunk_size: int = settings.DEFAULT_CHUNK_SIZE,
    workers: int = settings.DEFAULT_WORKERS,
) -> Measured:
    """Seed ``duties`` on ``dsn`` (a fresh database), backfill ``days`` days, count the rows."""
    pages = _Pages()
    timeout = settings.Settings().statement_timeout_ms
    with psycopg.connect(dsn, autocommit=True) as conn:
        seed(conn, duties)
    conns = [
        _TimedConnection.connect(dsn, autocommit=True, options=f"-c statement_timeout={timeout}")
        for _ in range(workers)
    ]
    for each in conns:
        each.pages = pages
    window = Window(LAST_DAY - timedelta(days=days - 1), LAST_DAY)
    try:
        started = time.perf_counter()
        report = dispatch(
            list(conns),
            RunRequest(now=CLOCK, window=window),
            Runtime(tuning=settings.Tuning(chunk_size=chunk_size, page_rows=page_rows)),
        )
        seconds = time.perf_counter() - started
    finally:
        for each in conns:
            each.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT (duty_id, period_key)) FROM duly_task"
        ).fetchone()
    assert row is not None  # noqa: S101 - an aggregate returns one row
    return Measured(seconds, report, tuple(pages.seen), int(row[0]), int(row[1]), duties * days)


def _scheduled_seconds(dsn: str, duties: int, wild: int) -> float:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE duly_task, duly_duty")
        seed(conn, duties, wild=wild)
    conns = [psycopg.connect(dsn, autocommit=True) for _ in range(settings.DEFAULT_WORKERS)]
    try:
        started = time.perf_counter()
        dispatch(conns, RunRequest(now=CLOCK))
        return time.perf_counter() - started
    finally:
        for each in conns:
            each.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the backfill (or the wild-lead comparison) and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duties", type=int, default=20_000)
    parser.add_argument("--days", type=int, default=settings.DEFAULT_MAX_WINDOW_DAYS)
    parser.add_argument("--page-rows", type=int, default=settings.DEFAULT_PAGE_ROWS)
    parser.add_argument("--wild-lead", action="store_true")
    parser.add_argument("--database-url")
    args = parser.parse_args(argv)
    with server(args.database_url) as (server_dsn, label), fresh_database(server_dsn, "lb") as dsn:
        print(f"{args.duties:,} daily duties on {label}")
        if args.wild_lead:
            tame = _scheduled_seconds(dsn, args.duties, wild=0)
            wild = _scheduled_seconds(dsn, args.duties, wild=1)
            print(f"scheduled run, every lead 7 days:      {tame:7.2f} s")
            print(f"the same with one lead of {WILD_LEAD:,} days: {wild:7.2f} s")
            print(f"ratio: {wild / tame:.2f}x")
            return 0
        measured = backfill(dsn, args.duties, args.days, args.page_rows)
    timeout_s = settings.Settings().statement_timeout_ms / 1000
    slowest = max(measured.pages, default=(0.0, 0))
    largest = max(measured.pages, key=lambda page: page[1], default=(0.0, 0))
    report = measured.report
    print(f"backfill of {args.days:,} days: {measured.seconds:.1f} s wall, {report.pages:,} pages,")
    print(f"  complete {report.complete}, {report.tasks_created:,} tasks created")
    print(f"  largest page: {largest[1]:,} rows in {largest[0]:.2f} s")
    share = slowest[0] / timeout_s
    print(f"  slowest page: {slowest[0]:.2f} s ({share:.1%} of the {timeout_s:.0f} s"
          f" statement_timeout), {slowest[1]:,} rows")  # fmt: skip
    exact = measured.tasks == measured.distinct == measured.expected
    print(f"  rows: {measured.tasks:,} (distinct {measured.distinct:,}),"
          f" expected {measured.expected:,}: {'exact' if exact else 'NOT EXACT'}")  # fmt: skip
    return 0 if exact and report.complete else 1


if __name__ == "__main__":
    sys.exit(main())
