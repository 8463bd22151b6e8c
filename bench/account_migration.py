"""What migrations 0012 to 0019 (each duty's account) cost on a live table, edits going on.

Run: .venv/bin/python -m bench.account_migration [--duties 1000000] [--dsn DSN]

Builds a throwaway database at migration 0011 holding ``--duties`` duties,
then applies the rest (0012 adds the account's columns, the trigger that
marks edits, and the dispatcher's grants) while another session edits one
duty per statement (its owner, a column the trigger watches once it exists),
timing each edit. It prints the migration's wall time and the longest and
median edit: adding nullable columns and a trigger only writes the catalog,
so the longest edit stays far below a table rewrite. Without ``--dsn`` a
throwaway embedded PostgreSQL is started under /tmp and removed afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import psycopg

from bench.dispatch.server import fresh_database, server
from dispatch_fn.db import apply_migrations


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duties", type=int, default=1_000_000)
    parser.add_argument("--dsn", help="a server to create the throwaway database on")
    args = parser.parse_args()
    with (
        server(args.dsn) as (server_dsn, _),
        fresh_database(server_dsn, "account", until="0011_shard_keys") as dsn,
    ):
        _measure(dsn, args.duties)


def _measure(dsn: str, duties: int) -> None:
    with psycopg.connect(dsn) as conn:
        started = time.perf_counter()
        conn.execute(
            "INSERT INTO duly_duty (id, organization_id, name, form, status, owner_id, source,"
            " frequency) SELECT 'd' || n, 'org-' || n %% 100, 'duty', 'recurring', 'active',"
            " 'u' || n %% 50, 'catalog', 'daily' FROM generate_series(1, %s) n",
            (duties,),
        )
        conn.commit()
        print(f"{duties:,} duties stored at 0011 in {time.perf_counter() - started:.1f} s")
        edits = _Edits(dsn, duties)
        started = time.perf_counter()
        applied = apply_migrations(conn)
        elapsed = time.perf_counter() - started
        waits = edits.stop()
        print(f"{', '.join(applied)}: {elapsed:.3f} s")
        print(
            f"concurrent edits meanwhile: {len(waits):,}, longest {max(waits) * 1000:.1f} ms,"
            f" median {statistics.median(waits) * 1000:.2f} ms"
        )
        marked = conn.execute(
            "SELECT count(*) FILTER (WHERE dispatch_version > 0) FROM duly_duty"
        ).fetchone()
        print(f"duties whose edit after 0012 the trigger marked: {marked[0] if marked else 0:,}")


class _Edits:
    """Another session changing one duty's owner per statement until stopped, each timed."""

    def __init__(self, dsn: str, duties: int) -> None:
        self._stop = threading.Event()
        self._waits: list[float] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(dsn, duties))
        self._thread.start()
        self._ready.wait()

    def _run(self, dsn: str, duties: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            self._ready.set()
            n = 0
            while not self._stop.is_set():
                n += 1
                duty = n % duties or duties
                started = time.perf_counter()
                conn.execute(
                    "UPDATE duly_duty SET owner_id = %s WHERE organization_id = %s AND id = %s",
                    (f"v{n}", f"org-{duty % 100}", f"d{duty}"),
                )
                self._waits.append(time.perf_counter() - started)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join()
        return self._waits


if __name__ == "__main__":
    main()
