"""What migrations 0003 and 0006 cost on a table of existing tasks.

Run: .venv/bin/python -m bench.late_after_migration [--tasks 1000000] [--dsn DSN]

Builds a throwaway database at migration 0002 holding ``--tasks`` tasks, then
applies 0003 (columns: catalog only) and 0006 (late_after backfilled in
committed batches, the check validated, NOT NULL, two indexes built
concurrently), timing each, and times one insert made by another session
while 0006 runs (it must not wait for the whole migration). Without ``--dsn``
a throwaway embedded PostgreSQL is started under /tmp and removed afterwards.
"""

from __future__ import annotations

import argparse
import threading
import time

import psycopg

from bench.dispatch.server import fresh_database, server
from dispatch_fn.db import apply_migrations


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--dsn", help="a server to create the throwaway database on")
    args = parser.parse_args()
    with (
        server(args.dsn) as (server_dsn, _),
        fresh_database(server_dsn, "mig", until="0002_duty_fillfactor") as dsn,
    ):
        _measure(dsn, args.tasks)


def _measure(dsn: str, tasks: int) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO duly_duty (id, organization_id, name, form, status, owner_id, source,"
            " frequency) SELECT 'd' || n, 'org-' || n % 100, 'duty', 'recurring', 'active',"
            " 'u' || n % 50, 'catalog', 'daily' FROM generate_series(1, 10000) n"
        )
        started = time.perf_counter()
        conn.execute(
            "INSERT INTO duly_task (organization_id, duty_id, owner_id, subject, source,"
            " period_key, due_date, visible_from)"
            " SELECT 'org-' || d %% 100, 'd' || d, 'u' || d %% 50, 'duty', 'catalog',"
            " to_char(date '2000-01-01' + p, 'YYYY-MM-DD'), date '2000-01-01' + p,"
            " date '2000-01-01' + p - 7"
            " FROM generate_series(1, 10000) d, generate_series(0, %s - 1) p",
            (max(tasks // 10000, 1),),
        )
        conn.commit()
        print(f"{tasks:,} tasks stored at 0002 in {time.perf_counter() - started:.1f} s")
        for version in ("0003_compliance_duties", "0006_task_late_after"):
            probe = _Probe(dsn) if version.startswith("0006") else None
            started = time.perf_counter()
            applied = apply_migrations(conn, until=version)
            elapsed = time.perf_counter() - started
            line = f"{', '.join(applied)}: {elapsed:.2f} s"
            if probe is not None:
                line += f"; an insert from another session meanwhile waited {probe.wait():.3f} s"
            print(line)
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE late_after = due_date), count(*) FROM duly_task"
        ).fetchone()
        print(f"late_after = due_date on {row[0]:,} of {row[1]:,} tasks" if row else "no rows")


class _Probe:
    """One insert by another session, started a moment after the migration begins."""

    def __init__(self, dsn: str) -> None:
        self._waited = -1.0
        self._thread = threading.Thread(target=self._run, args=(dsn,))
        self._thread.start()

    def _run(self, dsn: str) -> None:
        time.sleep(0.5)
        with psycopg.connect(dsn, autocommit=True) as conn:
            started = time.perf_counter()
            conn.execute(
                "INSERT INTO duly_task (organization_id, duty_id, owner_id, subject, source,"
                " period_key, due_date, visible_from, late_after)"
                " VALUES ('org-1', 'd1', 'u1', 'duty', 'catalog', 'probe', '2030-01-01',"
                " '2030-01-01', '2030-01-01')"
            )
            self._waited = time.perf_counter() - started

    def wait(self) -> float:
        self._thread.join()
        return self._waited


if __name__ == "__main__":
    main()
