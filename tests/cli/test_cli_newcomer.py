"""The command line as a newcomer meets it: pipes, typos, huge numbers, a missing database.

Each case is one a person hit on a fresh clone; the answer is one line on
stderr that names what was wrong and what was expected, and the status of
docs/contract.md#exit-statuses that fits it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from dispatch_fn.cli import ExitStatus
from support import CLOCK, EVENTS_DIR, Conn, cli, duty, insert_duties


def _one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def _into_a_closed_pipe(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m dispatch_fn ARGV | head`` where head has already gone: a closed pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "dispatch_fn", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            env=dict(os.environ),
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.fixture
def one_run(conn: Conn, database: str) -> int:
    insert_duties(conn, [duty("d1")])
    completed = cli("invoke", "--json", "--now", CLOCK, str(EVENTS_DIR / "scheduler.json"))
    assert completed.returncode == ExitStatus.OK, completed.stderr
    run_id: int = json.loads(completed.stdout)["run_id"]
    return run_id


@pytest.mark.parametrize(
    "argv", [["runs", "show", "{id}"], ["runs", "show", "{id}", "--json"], ["runs"]]
)
def test_a_reader_that_stops_reading_ends_the_command_quietly(
    one_run: int, argv: list[str]
) -> None:
    completed = _into_a_closed_pipe(*(arg.format(id=one_run) for arg in argv))
    assert completed.stderr == ""
    # What a shell reports for a tool that SIGPIPE ended: 128 + 13.
    assert completed.returncode == ExitStatus.BROKEN_PIPE
    assert ExitStatus.BROKEN_PIPE.value == 141


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["runs", "--limit", "99999999999999999999"], "argument --limit"),
        (["runs", "show", "99999999999999999999"], "argument ID"),
        (["runs", "--limit", "0"], "argument --limit"),
    ],
)
def test_a_number_out_of_range_is_a_refused_argument(
    database: str, argv: list[str], named: str
) -> None:
    completed = cli(*argv)
    assert completed.returncode == ExitStatus.REFUSED, completed.stderr
    line = _one_line(completed.stderr)
    assert named in line
    assert "expected a whole number from 1 to" in line
    assert "bigint" not in line


@pytest.mark.parametrize(
    ("argv", "named", "expected"),
    [
        (["explain", "d1", "--now", "yesterday"], "argument --now", "ISO 8601 instant"),
        (["explain", "d1", "--from", "last week"], "argument --from", "'YYYY-MM-DD'"),
        (
            ["explain", "d1", "--from", "2026-01-01", "--to", "2026-02-30"],
            "argument --to",
            "not a calendar date",
        ),
        (
            ["invoke", str(EVENTS_DIR / "console.json"), "--now", "yesterday"],
            "argument --now",
            "ISO 8601 instant",
        ),
        (["demo", "--now", "2026-08-21T01:00"], "argument --now", "UTC offset"),
    ],
)
def test_a_bad_flag_names_the_flag_and_what_it_expects_not_internal_classes(
    database: str, argv: list[str], named: str, expected: str
) -> None:
    completed = cli(*argv)
    assert completed.returncode == ExitStatus.REFUSED, completed.stderr
    line = _one_line(completed.stderr)
    assert named in line
    assert expected in line
    assert "Event" not in line
    assert "ManualEvent" not in line


def test_a_refused_event_names_no_internal_class(database: str) -> None:
    completed = cli("invoke", "-", stdin='{"now": "yesterday"}')
    assert completed.returncode == ExitStatus.REFUSED
    line = _one_line(completed.stderr)
    assert "now: 'yesterday' is not an ISO 8601 instant" in line
    assert "ManualEvent" not in line


@pytest.mark.parametrize("argv", [["runs"], ["explain", "d1"], ["migrate"]])
def test_a_database_url_naming_a_missing_database_is_a_configuration_problem(
    server_dsn: str, argv: list[str]
) -> None:
    missing = psycopg.conninfo.make_conninfo(server_dsn, dbname="duly_no_such_database")
    completed = cli(*argv, DATABASE_URL=missing)
    assert completed.returncode == ExitStatus.CONFIGURATION, completed.stderr
    line = _one_line(completed.stderr)
    assert "error: configuration: " in line
    assert "the server answers but refused the connection" in line
    assert 'database "duly_no_such_database" does not exist' in line
    assert "unreachable" not in line


def test_explain_of_a_faulted_duty_exits_with_a_status_of_its_own(
    conn: Conn, database: str, tmp_path: Path
) -> None:
    insert_duties(conn, [duty("good"), duty("mars", timezone="Mars/Olympus")])
    faulted = cli("explain", "mars", "--now", CLOCK)
    assert faulted.returncode == ExitStatus.DUTY_FAULTED, faulted.stderr
    assert "fault: invalid_cadence" in faulted.stdout
    assert "Mars/Olympus" in _one_line(faulted.stderr)
    assert cli("explain", "good", "--now", CLOCK).returncode == ExitStatus.OK
    assert cli("explain", "nobody", "--now", CLOCK).returncode == ExitStatus.UNKNOWN_DUTY
    as_json = cli("explain", "mars", "--now", CLOCK, "--json")
    assert as_json.returncode == ExitStatus.DUTY_FAULTED
    assert json.loads(as_json.stdout)["skip"]["fault"] is True
    # The console's query, through invoke, answers with the same status.
    query = tmp_path / "query.json"
    query.write_text(json.dumps({"query": "explain", "duty_id": "mars", "now": CLOCK}))
    assert cli("invoke", str(query)).returncode == ExitStatus.DUTY_FAULTED


def test_a_paused_duty_explains_as_a_skip_with_status_zero(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("resting", status="paused")])
    assert cli("explain", "resting", "--now", CLOCK).returncode == ExitStatus.OK


def test_a_dry_run_says_would_create_in_its_report_and_in_the_runs_table(
    conn: Conn, database: str
) -> None:
    insert_duties(conn, [duty("d1")])
    backfill = str(EVENTS_DIR / "backfill-13-months.json")
    dry = cli("invoke", "--json", "--dry-run", backfill)
    assert dry.returncode == ExitStatus.OK, dry.stderr
    report = json.loads(dry.stdout)
    # tasks_created keeps its figure for readers written before the clearer field.
    assert report["tasks_would_create"] == report["tasks_created"] == 13
    real = json.loads(cli("invoke", "--json", backfill).stdout)
    assert (real["tasks_would_create"], real["tasks_created"]) == (None, 13)

    table = cli("runs").stdout.splitlines()
    assert "would create 13" in table[2]  # the older, dry run
    assert "would create" not in table[1]
    listed = json.loads(cli("runs", "--json").stdout)
    assert [row["tasks_would_create"] for row in listed] == [None, 13]


def test_the_explain_table_shows_the_due_rule_and_why_the_current_period_is_owed_early(
    conn: Conn, database: str
) -> None:
    # Due on the 20th (the 1st + 19 days), rolled to a business day in Scotland, shown 7
    # days before: at the 5th the current period is owed although its visible_from is the 13th.
    insert_duties(
        conn,
        [duty("vat", frequency="monthly", due_offset_days=19, lead_days=7, due_roll="following",
              holiday_calendar="GB-SCT", grace_days=3)],
    )  # fmt: skip
    clock = "2026-08-05T01:00:00Z"
    planned = cli("explain", "vat", "--now", clock)
    assert planned.returncode == ExitStatus.OK, planned.stderr
    header = planned.stdout.splitlines()[:3]
    rule = next(line for line in header if "due" in line)
    assert "period_start + 19 day(s)" in rule
    assert "roll following" in rule
    assert "calendar GB-SCT" in rule
    assert "lead 7 day(s)" in rule
    assert "grace 3 day(s)" in rule
    row = next(line for line in planned.stdout.splitlines() if line.lstrip().startswith("2026-08 "))
    assert "would create" in row
    assert "current period: owed from its first day, before its visible date" in row
    explained = json.loads(cli("explain", "vat", "--now", clock, "--json").stdout)
    assert explained["due_rule"]["holiday_calendar"] == "GB-SCT"
    assert explained["current_period"] == "2026-08"

    assert cli("invoke", "-", stdin=json.dumps({"now": clock})).returncode == ExitStatus.OK
    # Created by the run at that clock (created_at is the server's time, not the run's clock).
    conn.execute("UPDATE duly_task SET created_at = %s", (clock,))
    created = cli("explain", "vat", "--now", clock)
    row = next(line for line in created.stdout.splitlines() if line.lstrip().startswith("2026-08 "))
    assert "exists" in row
    assert "current period: owed from its first day, before its visible date" in row
