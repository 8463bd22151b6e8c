"""What migration 0011 (the shard keys) costs on a table of existing tasks, inserts going on.

Run: .venv/bin/python -m bench.shard_keys_migration [--tasks 1000000] [--dsn DSN]

Builds a throwaway database at migration 0010 holding ``--tasks`` tasks of
10,000 duties, then applies 0011 (a unique index built concurrently and
attached, the foreign key added NOT VALID and validated, the old key and
index dropped) while another session inserts one task per statement, as a
run's pages would, timing each insert. It prints the migration's wall time
and the longest and median insert: a migration safe on a live table keeps
the longest insert far below its own length. Without ``--dsn`` a throwaway
embedded PostgreSQL is started under /tmp and removed afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import psycopg

from bench.dispatch.server import fresh_database, server
from dispatch_fn.db import apply_migrations

_DUTIES = 10_000


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--dsn", help="a server to create the throwaway database on")
    args = parser.parse_args()
    with (
        server(args.dsn) as (server_dsn, _),
        fresh_database(server_dsn, "shard", until="0010_dispatch_rules") as dsn,
    ):
        _measure(dsn, args.tasks)


def _measure(dsn: str, tasks: int) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO duly_duty (id, organization_id, name, form, status, owner_id, source,"
            " frequency) SELECT 'd' || n, 'org-' || n %% 100, 'duty', 'recurring', 'active',"
            " 'u' || n %% 50, 'catalog', 'daily' FROM generate_series(1, %s) n",
            (_DUTIES,),
        )
        started = time.perf_counter()
        conn.execute(
            "INSERT INTO duly_task (organization_id, duty_id, owner_id, subject, source,"
            " period_key, due_date, visible_from, late_after)"
            " SELECT 'org-' || d %% 100, 'd' || d, 'u' || d %% 50, 'duty', 'catalog',"
            " to_char(date '2000-01-01' + p, 'YYYY-MM-DD'), date '2000-01-01' + p,"
            " date '2000-01-01' + p - 7, date '2000-01-01' + p"
            " FROM generate_series(1, %s) d, generate_series(0, %s - 1) p",
            (_DUTIES, max(tasks // _DUTIES, 1)),
        )
        conn.commit()
        stored = time.perf_counter() - started
        print(f"{tasks:,} tasks of {_DUTIES:,} duties stored at 0010 in {stored:.1f} s")
        inserts = _Inserts(dsn)
        started = time.perf_counter()
        applied = apply_migrations(conn)
        elapsed = time.perf_counter() - started
        waits = inserts.stop()
        print(f"{', '.join(applied)}: {elapsed:.2f} s")
        print(
            f"concurrent inserts meanwhile: {len(waits):,}, longest {max(waits) * 1000:.1f} ms,"
            f" median {statistics.median(waits) * 1000:.2f} ms"
        )


class _Inserts:
    """Another session inserting one task per statement until stopped, each insert timed."""

    def __init__(self, dsn: str) -> None:
        self._stop = threading.Event()
        self._waits: list[float] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(dsn,))
        self._thread.start()
        self._ready.wait()

    def _run(self, dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            self._ready.set()
            n = 0
            while not self._stop.is_set():
                n += 1
                started = time.perf_counter()
                conn.execute(
                    "INSERT INTO duly_task (organization_id, duty_id, owner_id, subject, source,"
                    " period_key, due_date, visible_from, late_after)"
                    " VALUES ('org-1', 'd1', 'u1', 'duty', 'catalog', %s, '2030-01-01',"
                    " '2030-01-01', '2030-01-01')",
                    (f"probe-{n}",),
                )
                self._waits.append(time.perf_counter() - started)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join()
        return self._waits


if __name__ == "__main__":
    main()
