"""Every local command: exit 0 only for what succeeded, one status per kind of failure.

See docs/contract.md#exit-statuses.

Each failure is one line on stderr, never a traceback; the statuses are
``exit_status.ExitStatus``, and the README and docs/handler.md list them.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dispatch_fn.cli import ExitStatus, invoke
from dispatch_fn.run import Progress
from runtimes import Scripted
from support import CLOCK, EVENTS_DIR, Conn, cli, duty, insert_duties, task_count

ROOT = Path(__file__).resolve().parents[2]


def _one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _args(event: str, *flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    invoke.register(parser.add_subparsers())
    return parser.parse_args(["invoke", event, *flags])


def _event_file(tmp_path: Path, event: dict[str, Any]) -> str:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    return str(path)


def test_the_exit_statuses_are_distinct_and_zero_means_only_success() -> None:
    values = [status.value for status in ExitStatus]
    assert len(values) == len(set(values))
    assert [s for s in ExitStatus if s == 0] == [ExitStatus.OK]
    kinds = (
        ExitStatus.REFUSED, ExitStatus.CONFIGURATION, ExitStatus.DATABASE_UNREACHABLE,
        ExitStatus.INCOMPLETE, ExitStatus.DEGRADED, ExitStatus.UNKNOWN_DUTY,
    )  # fmt: skip
    assert len(set(kinds)) == len(kinds)
    assert ExitStatus.OK not in kinds


@pytest.mark.parametrize(
    "argv",
    [
        ["migrate"],
        ["invoke", str(EVENTS_DIR / "scheduler.json")],
        ["demo"],
        ["runs"],
        ["runs", "--json"],
        ["explain", "d1"],
    ],
    ids=lambda argv: "-".join(argv[:2]).replace(str(EVENTS_DIR) + "/", ""),
)
def test_every_command_exits_database_unreachable_with_one_line_when_the_database_is_down(
    argv: list[str],
) -> None:
    url = f"postgresql://duly@127.0.0.1:{_closed_port()}/duly"
    completed = cli(*argv, DATABASE_URL=url)
    assert completed.returncode == ExitStatus.DATABASE_UNREACHABLE, completed.stderr
    assert "database unreachable" in _one_line(completed.stderr)


@pytest.mark.parametrize("argv", [["migrate"], ["runs"], ["explain", "d1"]])
def test_every_command_exits_configuration_for_a_database_url_libpq_cannot_use(
    argv: list[str],
) -> None:
    completed = cli(*argv, DATABASE_URL="nonsense=1")
    assert completed.returncode == ExitStatus.CONFIGURATION, completed.stderr
    assert 'invalid connection option "nonsense"' in _one_line(completed.stderr)


def test_explain_of_an_unknown_duty_has_a_status_of_its_own(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1")])
    completed = cli("explain", "nobody", "--now", CLOCK)
    assert completed.returncode == ExitStatus.UNKNOWN_DUTY
    assert "unknown" in completed.stdout
    assert cli("explain", "d1", "--now", CLOCK).returncode == ExitStatus.OK


def test_explain_refuses_a_bad_clock_with_the_refused_status(database: str) -> None:
    completed = cli("explain", "d1", "--to", "2026-01-01")
    assert completed.returncode == ExitStatus.REFUSED
    assert "'to' without 'from'" in _one_line(completed.stderr)


def test_invoke_exits_degraded_for_a_run_that_faulted_a_duty(
    conn: Conn, database: str, tmp_path: Path
) -> None:
    insert_duties(conn, [duty("d1"), duty("mars", timezone="Mars/Olympus")])
    completed = cli("invoke", _event_file(tmp_path, {"now": CLOCK}))
    assert completed.returncode == ExitStatus.DEGRADED, completed.stderr
    report = json.loads(completed.stdout)
    assert (report["complete"], report["degraded"]) == (True, True)
    assert report["tasks_created"] == task_count(conn) > 0
    assert "degraded" in _one_line(completed.stderr)


def test_invoke_exits_incomplete_for_a_run_that_stopped_before_its_last_page(
    conn: Conn, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(3)])
    monkeypatch.setenv("DISPATCH_CHUNK_SIZE", "1")
    asked = iter([False])
    # The run's own stop check says "time is up" after its first page: a real
    # run on the real database, stopped the way a deadline stops it.
    stopping = Scripted(lambda: next(asked, True))
    stdout, stderr = io.StringIO(), io.StringIO()
    status = invoke.run(
        _args(_event_file(tmp_path, {"now": CLOCK})),
        stdout=stdout,
        stderr=stderr,
        adjust_runtime=lambda built: replace(built, budget=stopping),
    )
    assert status == ExitStatus.INCOMPLETE
    report = json.loads(stdout.getvalue())
    assert report["complete"] is False
    assert 0 < task_count(conn) < 3
    assert "incomplete" in _one_line(stderr.getvalue())


@pytest.mark.parametrize(
    "scope",
    [{"organization_id": "org-nobody"}, {"duty_ids": ["nobody", "no-one"]}],
    ids=["organization", "duty-ids"],
)
def test_a_scope_that_matches_no_duty_is_said_plainly(
    conn: Conn, database: str, tmp_path: Path, scope: dict[str, Any]
) -> None:
    insert_duties(conn, [duty("d1")])
    completed = cli("invoke", _event_file(tmp_path, {"now": CLOCK, **scope}))
    assert completed.returncode == ExitStatus.NO_DUTY_IN_SCOPE, completed.stderr
    report = json.loads(completed.stdout)
    assert report["scope_matched"] is False
    assert "no duty matches" in report["scope_note"]
    assert "no duty matches the scope" in _one_line(completed.stderr)
    assert task_count(conn) == 0


def test_a_scope_that_matches_a_duty_and_an_unscoped_run_say_so(
    conn: Conn, database: str, tmp_path: Path
) -> None:
    insert_duties(conn, [duty("d1"), duty("d2", organization_id="org-2")])
    scoped = cli("invoke", _event_file(tmp_path, {"now": CLOCK, "organization_id": "org-2"}))
    assert scoped.returncode == ExitStatus.OK, scoped.stderr
    assert json.loads(scoped.stdout)["scope_matched"] is True
    assert json.loads(scoped.stdout)["scope_note"] is None
    unscoped = cli("invoke", _event_file(tmp_path, {"now": CLOCK}))
    assert unscoped.returncode == ExitStatus.OK, unscoped.stderr
    assert json.loads(unscoped.stdout)["scope_matched"] is None


def test_ctrl_c_during_a_local_run_marks_its_ledger_row_failed_interrupted(
    conn: Conn, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(4)])
    monkeypatch.setenv("DISPATCH_CHUNK_SIZE", "1")

    def interrupt(_: Progress) -> None:
        raise KeyboardInterrupt

    # Ctrl-C arrives while the run's progress is drawn, after its first page.
    stdout, stderr = io.StringIO(), io.StringIO()
    status = invoke.run(
        _args(_event_file(tmp_path, {"now": CLOCK})),
        stdout=stdout,
        stderr=stderr,
        adjust_runtime=lambda built: replace(built, on_progress=interrupt),
    )
    assert status == ExitStatus.INTERRUPTED
    assert "interrupted" in _one_line(stderr.getvalue())
    rows = conn.execute(
        "SELECT status, error, finished_at IS NOT NULL FROM duly_dispatch_run"
    ).fetchall()
    assert rows == [("failed", "interrupted", True)]
    # What was committed before the interruption stays; a re-run completes it.
    assert 0 < task_count(conn) < 4
    again = invoke.run(_args(_event_file(tmp_path, {"now": CLOCK})), stdout=io.StringIO())
    assert again == ExitStatus.OK
    assert task_count(conn) == 4


def test_help_and_the_docs_list_every_exit_status() -> None:
    completed = cli("invoke", "--help")
    assert completed.returncode == 0
    readme = (ROOT / "README.md").read_text("utf-8")
    handler_doc = (ROOT / "docs" / "handler.md").read_text("utf-8")
    for status in ExitStatus:
        listed = re.compile(rf"^\s*{status.value}\s+\S", re.MULTILINE)
        assert listed.search(completed.stdout), status
        row = re.compile(rf"^\| `?{status.value}`? \| `{status.name}` \|", re.MULTILINE)
        assert row.search(readme), status
        assert row.search(handler_doc), status


def test_invoke_answers_a_query_event_as_json_with_the_explain_status(
    conn: Conn, database: str, tmp_path: Path
) -> None:
    insert_duties(conn, [duty("d1")])
    runs = cli("invoke", _event_file(tmp_path, {"query": "runs"}))
    missing = cli("invoke", _event_file(tmp_path, {"query": "explain", "duty_id": "nobody"}))

    assert (runs.returncode, json.loads(runs.stdout)) == (
        ExitStatus.OK,
        {"runs": [], "runs_omitted": 0, "runs_hint": None},
    )
    assert missing.returncode == ExitStatus.UNKNOWN_DUTY
    assert json.loads(missing.stdout) == {"explain": {"duty_id": "nobody", "found": False}}
