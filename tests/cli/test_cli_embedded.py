"""The embedded PostgreSQL outlives the command that started it, until `stop-db` stops it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pgserver.utils import PostmasterInfo

from dispatch_fn.cli import embedded
from support import EVENTS_DIR, duty, insert_duties


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory of this test's own; the server in it is stopped afterwards."""
    # Under /tmp, like the session's server: pgserver runs PostgreSQL as its own
    # user when we are root, and that user must reach the directory.
    path = Path(tempfile.mkdtemp(prefix="duly-cli-pg-")) / "pgdata"
    yield path
    if embedded._is_running(path):
        _command(path, "stop-db")
    shutil.rmtree(path.parent, ignore_errors=True)


def _command(data_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "-m", "dispatch_fn", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**env, "DULY_PGDATA": str(data_dir), "POWERTOOLS_METRICS_DISABLED": "true"},
        timeout=180,
    )


def _invoke(data_dir: Path) -> dict[str, int]:
    completed = _command(data_dir, "invoke", str(EVENTS_DIR / "scheduler.json"))
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    return {key: report[key] for key in ("tasks_created", "tasks_existing")}


def test_tasks_persist_between_invocations_until_stop_db(data_dir: Path) -> None:
    assert _invoke(data_dir) == {"tasks_created": 0, "tasks_existing": 0}
    # The command has exited; its server has not.
    info = PostmasterInfo.read_from_pgdata(data_dir)
    assert info is not None
    assert info.is_running()
    with psycopg.connect(info.get_uri(), autocommit=True) as conn:
        insert_duties(conn, [duty("d1")])
    # 2026-11-29: November, and December (visible from November 24th).
    assert _invoke(data_dir) == {"tasks_created": 2, "tasks_existing": 0}
    # The duty's account says both are dispatched: the same clock owes nothing again.
    assert _invoke(data_dir) == {"tasks_created": 0, "tasks_existing": 0}

    stopped = _command(data_dir, "stop-db")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith("stopped the embedded PostgreSQL")
    assert not embedded._is_running(data_dir)
    again = _command(data_dir, "stop-db")
    assert (again.returncode, again.stdout.startswith("not running")) == (0, True)


def test_stop_db_with_no_server_says_so(tmp_path: Path) -> None:
    completed = _command(tmp_path / "never-started", "stop-db")
    assert completed.returncode == 0
    assert completed.stdout.strip() == f"not running: {tmp_path / 'never-started'}"
