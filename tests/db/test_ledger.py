"""The run ledger: one duly_dispatch_run row per invocation, and the `runs` command.

See docs/contract.md#ledger.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from dispatch_fn.aws import app
from dispatch_fn.cli import main
from dispatch_fn.db import apply_migrations, ledger
from dispatch_fn.db.sql import statement_text
from dispatch_fn.engine import local_dates
from dispatch_fn.errors import EventError
from dispatch_fn.planning import RunRequest, Scope
from dispatch_fn.run import RunFailedError, dispatch_recorded
from support import CLOCK, Conn, Invoke, duty, insert_duties, task_keys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _runs(conn: Conn) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        cursor.execute("SELECT * FROM duly_dispatch_run ORDER BY id")
        return list(cursor.fetchall())


@pytest.fixture
def database(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("DATABASE_URL", db_url)
    yield db_url
    app._connections.discard()


def test_a_completed_run_is_recorded_with_its_clock_scope_timings_and_report(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("a"), duty("b", organization_id="org-2")])
    report = invoke({"now": CLOCK, "organization_id": "org-2"}, _Context("req-1"))
    [row] = _runs(conn)
    assert report["run_id"] == row["id"]
    assert (row["mode"], row["clock"].isoformat(), row["status"]) == (
        "scheduled",
        "2026-08-21T01:00:00+00:00",
        "completed",
    )
    assert (row["organization_id"], row["duty_ids"], row["dry_run"]) == ("org-2", None, False)
    assert (row["window_from"], row["window_to"], row["request_id"]) == (None, None, "req-1")
    assert row["started_at"] <= row["finished_at"]
    assert row["report"]["tasks_created"] == report["tasks_created"] == 1
    assert row["report"]["run_id"] == row["id"]
    assert row["error"] is None


def test_a_backfill_and_a_dry_run_are_recorded_too(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("a")])
    invoke({"from": "2026-01-01", "to": "2026-03-31", "now": CLOCK, "duty_ids": ["a"]})
    dry = invoke({"now": CLOCK, "dry_run": True})
    backfill, dry_row = _runs(conn)
    assert (backfill["mode"], str(backfill["window_from"]), str(backfill["window_to"])) == (
        "backfill",
        "2026-01-01",
        "2026-03-31",
    )
    assert backfill["duty_ids"] == ["a"]
    assert (dry_row["dry_run"], dry_row["status"], dry["run_id"]) == (True, "completed", 2)


def test_a_scheduled_run_records_the_zones_whose_day_the_engine_judges_otherwise_than_the_server(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("a")])
    invoke({"now": "2026-06-29T22:30:00Z"})
    invoke({"now": "2026-06-29T22:30:00Z", "dry_run": True})
    invoke({"from": "2026-01-01", "to": "2026-01-31", "now": "2026-06-29T22:30:00Z"})
    scheduled, dry, backfill = _runs(conn)
    clock = datetime.fromisoformat("2026-06-29T22:30:00+00:00")
    engine = {zone: day.isoformat() for zone, day in local_dates(clock).items()}
    server = dict(
        conn.execute(
            "SELECT zone, duly_server_day(%s, zone)::text FROM unnest(%s::text[]) AS zone",
            (clock, list(engine)),
        ).fetchall()
    )

    assert scheduled["local_days"] == {
        zone: day for zone, day in engine.items() if day != server[zone]
    }
    # The server reads `CET` as the fixed abbreviation (+01:00); the engine
    # as the zone, on summer time here.
    assert scheduled["local_days"]["CET"] == "2026-06-30"
    # The trigger's marks read their days from it (migration 0020).
    placed = conn.execute(
        "SELECT duly_local_day(%s, 'CET'), duly_local_day(%s, 'Europe/Berlin'),"
        " (%s::timestamptz AT TIME ZONE 'CET')::date",
        (clock, clock, clock),
    ).fetchone()
    assert placed is not None
    assert [str(day) for day in placed] == ["2026-06-30", "2026-06-30", "2026-06-29"]
    assert (dry["local_days"], backfill["local_days"]) == (None, None)


def test_the_migration_step_records_the_engine_days_of_the_latest_clocks_recorded_before_0020(
    conn: Conn, invoke: Invoke
) -> None:
    # Runs before migration 0020 recorded no days: an edit made after the
    # upgrade, before the next scheduled run, would fall on the server's day.
    insert_duties(conn, [duty("other")])
    invoke({"now": "2026-06-28T22:30:00Z"})
    invoke({"now": "2026-06-29T22:30:00Z"})
    conn.execute("UPDATE duly_dispatch_run SET local_days = NULL")
    apply_migrations(conn)
    earlier, latest = (row["local_days"] for row in _runs(conn))
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0, timezone="CET")])
    invoke({"now": "2026-06-30T22:30:00Z"})

    # No duty's latest clock: left as it was.
    assert earlier is None
    assert latest["CET"] == "2026-06-30"
    # Added after the run of 06-30 (the engine's day; the server's 06-29).
    assert task_keys(conn, "d1") == ["2026-07-01"]


def test_the_migration_step_records_one_clock_a_scope_however_long_the_ledger(
    conn: Conn, invoke: Invoke
) -> None:
    # Only a scope's latest clock can be a duty's latest (duly_latest_scheduled_clock).
    insert_duties(conn, [duty("a")])
    for day in (27, 28, 29):
        invoke({"now": f"2026-06-{day}T22:30:00Z", "organization_id": "org-1"})
    conn.execute("UPDATE duly_dispatch_run SET local_days = NULL")
    apply_migrations(conn)

    assert [row["local_days"] is not None for row in _runs(conn)] == [False, False, True]


def test_an_incomplete_run_is_recorded_as_incomplete(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("a")])
    report = invoke({"now": CLOCK}, _Context("req-2", remaining_ms=0))
    [row] = _runs(conn)
    assert report["complete"] is False
    assert row["status"] == "incomplete"
    assert row["report"]["complete"] is False


def test_a_failed_run_is_recorded_as_failed_with_its_error(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("a")])
    # The database refuses the page's insert, as a full disk or a bad migration would.
    conn.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
                 " $$ BEGIN RAISE EXCEPTION 'no room for %', NEW.duty_id; END $$")  # fmt: skip
    conn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON duly_task FOR EACH ROW EXECUTE FUNCTION refuse()"
    )
    with pytest.raises(RunFailedError):
        invoke({"now": CLOCK})
    [row] = _runs(conn)
    assert row["status"] == "failed"
    assert "no room for a" in row["error"]
    assert row["report"]["run_id"] == row["id"]


def test_a_refused_event_runs_nothing_and_records_nothing(conn: Conn, invoke: Invoke) -> None:
    with pytest.raises(EventError):
        invoke({"to": "2026-01-01"})
    assert _runs(conn) == []


def test_a_killed_run_stays_running_and_reads_as_abandoned_after_the_timeout(
    conn: Conn, db_url: str
) -> None:
    insert_duties(conn, [duty(f"d{n:03}", frequency="daily", lead_days=30) for n in range(300)])
    # Every task insert sleeps, so the run is surely mid-page when it is killed.
    conn.execute("CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS"
                 " $$ BEGIN PERFORM pg_sleep(0.01); RETURN NEW; END $$")  # fmt: skip
    conn.execute(
        "CREATE TRIGGER slow BEFORE INSERT ON duly_task FOR EACH ROW EXECUTE FUNCTION slow()"
    )
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dispatch_fn",
            "invoke",
            "-",
        ],
        env={**os.environ, "DATABASE_URL": db_url, "DISPATCH_CHUNK_SIZE": "50"},
        # A real scheduled run now (events/console.json is a dry run, which writes no task).
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert child.stdin is not None
    child.stdin.write(b"{}")
    child.stdin.close()
    try:
        deadline = time.monotonic() + 60
        while not _runs(conn) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    [row] = _runs(conn)
    assert (row["status"], row["finished_at"]) == ("running", None)
    [fresh] = ledger.recent(conn, 5)
    assert fresh.shown_status == "running"
    conn.execute(
        "UPDATE duly_dispatch_run SET started_at = started_at - %s - interval '1 second'",
        (ledger.FUNCTION_TIMEOUT,),
    )
    [stale] = ledger.recent(conn, 5)
    assert stale.shown_status == "abandoned"


def test_the_runs_command_prints_the_newest_run_first_as_a_table(
    conn: Conn, database: str, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("a"), duty("bad", timezone="Mars/Olympus")])
    invoke({"now": "2026-08-20T01:00:00Z"})
    invoke({"now": CLOCK})
    capsys.readouterr()
    assert main(["runs", "--limit", "5"]) == 0
    header, newest, older = capsys.readouterr().out.splitlines()
    assert header.split() == [
        "id", "clock", "mode", "status", "created", "existing", "faults", "duration", "notes",
    ]  # fmt: skip
    # The second run owes "a" nothing: its account says August is dispatched.
    assert newest.split()[:7] == [
        "2", "2026-08-21T01:00:00+00:00", "scheduled", "completed", "0", "0", "1",
    ]  # fmt: skip
    assert older.split()[:7] == [
        "1", "2026-08-20T01:00:00+00:00", "scheduled", "completed", "1", "0", "1",
    ]  # fmt: skip


def test_the_runs_command_speaks_json_and_honours_the_limit(
    conn: Conn, database: str, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("a")])
    for clock in ("2026-08-19T01:00:00Z", "2026-08-20T01:00:00Z", CLOCK):
        invoke({"now": clock})
    capsys.readouterr()
    assert main(["runs", "--limit", "2", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [run["id"] for run in runs] == [3, 2]
    assert runs[0]["clock"] == "2026-08-21T01:00:00+00:00"
    assert runs[0]["status"] == "completed"
    assert (runs[0]["tasks_created"], runs[0]["tasks_existing"]) == (0, 0)
    assert runs[0]["duration_s"] >= 0


def test_the_runs_command_says_so_when_the_ledger_is_empty(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs"]) == 0
    assert capsys.readouterr().out.strip() == "no runs recorded yet"


class _Context:
    """What the handler reads from Lambda's context object."""

    def __init__(self, request_id: str, remaining_ms: int = 600_000) -> None:
        self.aws_request_id = request_id
        self._remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining_ms


def test_a_run_whose_ledger_is_unreachable_fails_before_its_first_page(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("a")])
    conn.execute("ALTER TABLE duly_dispatch_run RENAME TO gone")
    with pytest.raises(RunFailedError, match="run not started"):
        invoke({"now": CLOCK})
    assert conn.execute("SELECT count(*) FROM duly_task").fetchone() == (0,)


def test_the_ledger_statements_are_files_a_dba_can_read() -> None:
    for module in (ledger,):
        source = inspect.getsource(module)
        for keyword in ("SELECT ", "INSERT ", "UPDATE ", " FROM duly_"):
            assert keyword not in source, (module.__name__, keyword)
    for name in ("run_start", "run_finish", "run_latest_completed_clock", "run_continued",
                 "run_recent"):  # fmt: skip
        text = statement_text(name)
        assert text.startswith("-- "), name
        assert set(re.findall(r"(?<!%\()\{(\w+)\}", text)) <= {"scope"}, name


def test_a_run_needs_autocommit_connections_so_its_ledger_rows_commit_alone(db_url: str) -> None:
    with psycopg.connect(db_url) as in_transaction:
        with pytest.raises(ValueError, match="autocommit"):
            dispatch_recorded(
                [in_transaction],
                RunRequest(now=datetime.fromisoformat(CLOCK)),
            )
        assert in_transaction.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_run_whose_wall_clock_is_ahead_of_the_server_s_never_ends_before_it_started(
    conn: Conn,
) -> None:
    ahead = datetime.now(UTC) + timedelta(minutes=30)
    run_id = ledger.start(
        conn, RunRequest(now=ahead), request_id=None, continues_run=None, started_at=ahead
    )
    ledger.finish(conn, run_id, "completed", {})
    started, finished = conn.execute(
        "SELECT started_at, finished_at FROM duly_dispatch_run WHERE id = %s", (run_id,)
    ).fetchone()  # type: ignore[misc]
    assert started == ahead
    assert finished >= started


def test_the_previous_run_owes_afresh_what_each_link_of_its_chain_set_aside_up_to_its_mark(
    conn: Conn,
) -> None:
    at = datetime.fromisoformat(CLOCK)
    first = ledger.start(conn, RunRequest(now=at), request_id=None, continues_run=None, rules="r")
    ledger.record_set_aside(
        conn,
        first,
        [(None, "a", "locked"), ("org-1", "b", "locked"), (None, "p", "locked")],
        owed_from=at,
        afresh={(None, "a"), ("org-1", "b"), (None, "p")},
    )
    # Stopped at m: its continuation reads p again, and judges it itself.
    ledger.finish(conn, first, "incomplete", {"last_duty_id": "m"}, "stopped by its deadline")
    link = ledger.start(
        conn,
        RunRequest(now=at, scope=Scope(resume_after="m"), continuation=1),
        request_id=None,
        continues_run=first,
        rules="r",
    )
    ledger.record_set_aside(
        conn,
        link,
        [(None, "x", "locked"), (None, "z", "timed_out")],
        owed_from=at,
        afresh={(None, "x")},
    )
    ledger.finish(conn, link, "completed", {"last_duty_id": "z"})

    # z was not judged afresh: its run owed it no fresh judgement. Before: p
    # too, judged afresh by the continuation and once more by the next run.
    # Each owes the judgement made at its run's clock (plan.account_judged).
    assert ledger.previous_judgement(conn) == ledger.PreviousJudgement(
        rules="r", afresh=((None, "a"), ("org-1", "b"), (None, "x")), owed_at=(at, at, at)
    )


def test_a_duty_set_aside_again_owes_the_judgement_an_earlier_run_owed_it(conn: Conn) -> None:
    at = datetime.fromisoformat(CLOCK)
    first = ledger.start(conn, RunRequest(now=at), request_id=None, continues_run=None, rules="r")
    ledger.record_set_aside(
        conn, first, [(None, "a", "locked")], owed_from=at, afresh={(None, "a")}
    )
    ledger.finish(conn, first, "completed", {})
    later = at + timedelta(days=1)
    again = ledger.start(
        conn, RunRequest(now=later), request_id=None, continues_run=None, rules="r"
    )
    ledger.record_set_aside(
        conn,
        again,
        [(None, "a", "locked"), (None, "b", "locked")],
        owed_from=later,
        afresh={(None, "a"), (None, "b")},
        judged_at=lambda key: at if key == (None, "a") else None,
    )
    ledger.finish(conn, again, "completed", {})

    # a still owes the first run's judgement; b, the second's.
    assert ledger.previous_judgement(conn) == ledger.PreviousJudgement(
        rules="r", afresh=((None, "a"), (None, "b")), owed_at=(at, later)
    )


def test_a_completed_run_that_set_nothing_aside_owes_nothing_afresh(conn: Conn) -> None:
    at = datetime.fromisoformat(CLOCK)
    before = ledger.start(conn, RunRequest(now=at), request_id=None, continues_run=None, rules="r")
    ledger.record_set_aside(
        conn, before, [(None, "a", "locked")], owed_from=at, afresh={(None, "a")}
    )
    ledger.finish(conn, before, "completed", {})
    after = ledger.start(
        conn, RunRequest(now=at + timedelta(days=1)), request_id=None, continues_run=None, rules="r"
    )
    ledger.finish(conn, after, "completed", {})

    assert ledger.previous_judgement(conn) == ledger.PreviousJudgement(rules="r", afresh=())
