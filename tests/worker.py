"""A dispatcher run in its own process, for the concurrency and kill tests.

usage: python tests/worker.py DSN REQUEST_JSON START_AT CHUNK_SIZE PAUSE_S

Waits until the wall clock reaches START_AT (so two workers are released at
the same instant), runs one dispatch and prints its report as JSON.
PAUSE_S sleeps before each page, so a test can kill the run between pages.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import date, datetime

import psycopg

from dispatch_fn import dispatch
from dispatch_fn.plan import Window


def main(dsn: str, request_json: str, start_at: float, chunk_size: int, pause_s: float) -> None:
    spec = json.loads(request_json)
    window = None
    if spec.get("from"):
        window = Window(date.fromisoformat(spec["from"]), date.fromisoformat(spec["to"]))
    request = dispatch.RunRequest(now=datetime.fromisoformat(spec["now"]), window=window)

    def pause() -> bool:
        time.sleep(pause_s)
        return False

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 1")
        time.sleep(max(0.0, start_at - time.time()))
        report = dispatch.run(conn, request, chunk_size=chunk_size, should_stop=pause)
    sys.stdout.write(json.dumps(report.as_json()) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
