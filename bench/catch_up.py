"""What catching up missed days costs, beside an ordinary daily run (issues 14, 37).

Run: .venv/bin/python -m bench.catch_up [--duties N] [--missed K] [--database-url DSN]

On bench.dispatch's generated duties (the same mix of frequencies, zones,
anchors, leads and windows), at bench.dispatch's clock ``D``:

- daily: runs at D-K-1, D-K, …, D-1 with catch-up off, each the day after the
  last; the run at D is the ordinary daily run. The K runs before it are what
  replaying the missed days one by one would cost.
- catching up: the same database reset to no tasks, a run at D-K-1, then the
  run at D, whose duties' accounts (docs/contract.md#account) owe what
  became owed on the K missed days D-K … D-1 too.
- not catching up: reset again, a run at D-K-1, then the run at D with a
  horizon of one day: the same run owing what the missed days' runs would
  have, so the difference is what owing it costs (its rows lack the periods
  only the missed days owed).

Both runs at D must end with the same rows (checked). Each timed run starts
after ``VACUUM (ANALYZE)``, as bench.dispatch's runs do. The figure of
interest: (catching-up run - daily run) / daily run, the extra cost in "runs",
against K, the runs that replaying the missed days would have cost.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg

from bench.dispatch.data import CLOCK, generate
from bench.dispatch.mix import CLASSIC
from bench.dispatch.server import DISPATCH_TABLES, fresh_database, server, vacuum
from dispatch_fn import settings
from dispatch_fn.planning import RunRequest
from dispatch_fn.run import Runtime, dispatch_recorded
from dispatch_fn.settings import Tuning


def _run(dsn: str, clock: Any, catch_up_days: int, workers: int) -> tuple[float, dict[str, Any]]:
    conns = [psycopg.connect(dsn, autocommit=True) for _ in range(workers)]
    try:
        started = time.perf_counter()
        runtime = Runtime(tuning=Tuning(catch_up_days=catch_up_days))
        report = dispatch_recorded(conns, RunRequest(now=clock), runtime).as_json()
        return time.perf_counter() - started, report
    finally:
        for conn in conns:
            conn.close()


def _fingerprint(conn: psycopg.Connection[Any]) -> tuple[int, str]:
    row = conn.execute(
        "SELECT count(*), md5(string_agg(duty_id || '/' || period_key, ',' ORDER BY duty_id"
        ' COLLATE "C", period_key COLLATE "C")) FROM duly_task'
    ).fetchone()
    assert row is not None  # noqa: S101 - an aggregate returns one row
    return int(row[0]), str(row[1])


def _reset(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "TRUNCATE duly_task, duly_dispatch_fault, duly_dispatch_set_aside, duly_dispatch_run"
    )
    conn.execute(
        "UPDATE duly_duty SET last_dispatched_period = NULL, dispatch_through = NULL,"
        " dispatch_paused_on = NULL, dispatch_changed_on = NULL,"
        " dispatch_next = '0001-01-01', dispatch_next_at = '0001-01-01 00:00:00+00'"
    )
    vacuum(conn, DISPATCH_TABLES)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison and print it; exit status 1 if the two runs disagree on rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duties", type=int, default=200_000)
    parser.add_argument("--missed", type=int, default=3)
    parser.add_argument("--workers", type=int, default=settings.DEFAULT_WORKERS)
    parser.add_argument("--database-url")
    args = parser.parse_args(argv)
    day = timedelta(days=1)
    start = CLOCK - (args.missed + 1) * day
    with (
        server(args.database_url) as (server_dsn, label),
        fresh_database(server_dsn, "cu") as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        summary = generate(conn, args.duties, args.duties // 20, CLASSIC)
        print(f"{summary.duties:,} duties ({summary.dispatchable:,} dispatchable) on {label}")

        replayed: list[float] = []
        for n in range(args.missed + 1):
            vacuum(conn, DISPATCH_TABLES)
            seconds, _ = _run(dsn, start + n * day, 0, args.workers)
            if n:
                replayed.append(seconds)
        vacuum(conn, DISPATCH_TABLES)
        daily_s, daily = _run(dsn, CLOCK, 0, args.workers)
        daily_rows = _fingerprint(conn)

        _reset(conn)
        _run(dsn, start, args.missed, args.workers)
        vacuum(conn, DISPATCH_TABLES)
        caught_s, caught = _run(dsn, CLOCK, args.missed, args.workers)
        caught_rows = _fingerprint(conn)

        _reset(conn)
        _run(dsn, start, 0, args.workers)
        vacuum(conn, DISPATCH_TABLES)
        plain_s, plain = _run(dsn, CLOCK, 0, args.workers)

    extra = (caught_s - daily_s) / daily_s
    print(f"daily run at {CLOCK:%Y-%m-%d}:        {daily_s:7.2f} s, "
          f"{daily['tasks_created']:,} created")  # fmt: skip
    print(
        f"catching-up run ({args.missed} missed): {caught_s:7.2f} s, "
        f"{caught['tasks_created']:,} created for {caught['duties_owing']:,} owing duties,"
        f" their accounts {args.missed + 1} day(s) behind"
    )
    print(
        f"the {args.missed} missed daily runs:    {sum(replayed):7.2f} s"
        f" ({', '.join(f'{s:.2f}' for s in replayed)})"
    )
    print(
        f"same run, catch-up off:        {plain_s:7.2f} s, {plain['tasks_created']:,} created"
        f" (the catch-up statements cost {caught_s - plain_s:.2f} s"
        f" = {(caught_s - plain_s) / daily_s:.2f} daily runs)"
    )
    print(f"catch-up costs {extra:.2f} extra runs (replaying would cost {args.missed})")
    print(f"catching-up / daily run: {caught_s / daily_s:.2f}x; "
          f"catch-up share of replaying: {(caught_s - daily_s) / sum(replayed):.2f}")  # fmt: skip
    if daily_rows != caught_rows:
        print(f"ROWS DIFFER: daily {daily_rows} vs catching up {caught_rows}", file=sys.stderr)
        return 1
    print(f"rows identical: {daily_rows[0]:,} tasks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
