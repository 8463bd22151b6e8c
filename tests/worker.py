"""A dispatcher run in its own process, for the concurrency and kill tests.

usage: python tests/worker.py DSN REQUEST_JSON START_AT CHUNK_SIZE PAUSE_S WORKERS

Waits until the wall clock reaches START_AT (so two workers are released at
the same instant), runs one dispatch and prints its report as JSON.
PAUSE_S sleeps before each page, so a test can kill the run between pages;
WORKERS connections share the pages.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import date, datetime

import psycopg

from dispatch_fn import dispatch
from dispatch_fn.plan import Window


def main(argv: list[str]) -> None:
    """Run as the module docstring says, ``argv`` being the arguments."""
    dsn, request_json = argv[0], argv[1]
    start_at, chunk_size, pause_s, workers = (
        float(argv[2]),
        int(argv[3]),
        float(argv[4]),
        int(argv[5]),
    )
    spec = json.loads(request_json)
    window = None
    if spec.get("from"):
        window = Window(date.fromisoformat(spec["from"]), date.fromisoformat(spec["to"]))
    request = dispatch.RunRequest(now=datetime.fromisoformat(spec["now"]), window=window)

    def pause() -> bool:
        time.sleep(pause_s)
        return False

    conns = [psycopg.connect(dsn, autocommit=True) for _ in range(workers)]
    try:
        for conn in conns:
            conn.execute("SELECT 1")
        time.sleep(max(0.0, start_at - time.time()))
        report = dispatch.run(conns, request, chunk_size=chunk_size, should_stop=pause)
    finally:
        for conn in conns:
            conn.close()
    sys.stdout.write(json.dumps(report.as_json()) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
