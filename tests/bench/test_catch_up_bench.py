"""bench/catch_up.py at a tiny N, so it cannot rot; its timings are not asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_catch_up_benchmark_ends_with_the_daily_runs_rows(server_dsn: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "bench.catch_up", "--duties", "1500", "--database-url", server_dsn],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    assert "rows identical" in completed.stdout
    assert "their accounts 4 day(s) behind" in completed.stdout
