"""The local commands: `python -m dispatch_fn migrate | invoke EVENT_FILE | demo | stop-db`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dispatch_fn.cli import main
from support import EVENTS_DIR, Conn, duty, insert_duties, task_count


def test_migrate_reports_an_up_to_date_schema(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate"]) == 0
    assert capsys.readouterr().out.strip() == "schema is up to date"


def test_migrate_says_when_the_database_is_ahead_of_the_code(
    conn: Conn, database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # What an older checkout (a rollback's) finds after a newer release migrated.
    conn.execute(
        "INSERT INTO duly_schema_migration (version, checksum) VALUES (%s, %s)",
        ("9990_from_a_newer_release", "0" * 64),
    )
    assert main(["migrate"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "schema is up to date"
    assert "the database is ahead of the code" in captured.err
    assert "9990_from_a_newer_release" in captured.err


def test_invoke_prints_the_report_as_json_and_exits_zero(
    conn: Conn, database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("d1")])
    assert main(["invoke", str(EVENTS_DIR / "backfill-13-months.json")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tasks_created"] == task_count(conn) == 13


def test_invoke_refuses_a_bad_event_with_its_reason_and_writes_nothing(
    conn: Conn, database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("d1")])
    event = tmp_path / "bad.json"
    event.write_text('{"to": "2026-01-01"}')
    assert main(["invoke", str(event)]) == 2
    assert "'to' without 'from'" in capsys.readouterr().err
    assert task_count(conn) == 0


def test_the_module_form_runs_as_a_command(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1")])
    completed = subprocess.run(
        [sys.executable, "-m", "dispatch_fn", "invoke", str(EVENTS_DIR / "scheduler.json")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "DATABASE_URL": database},
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    # 2026-11-29: November, and December, visible from November 24th (lead 7).
    assert json.loads(completed.stdout)["tasks_created"] == 2
