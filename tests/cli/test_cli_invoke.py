"""`python -m dispatch_fn invoke`: a bar and a summary on a terminal, JSON otherwise, standard
input, and one documented exit status per kind of failure, each a one-line message."""

from __future__ import annotations

import argparse
import io
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from dispatch_fn.cli import ExitStatus, invoke, main
from support import EVENTS_DIR, Conn, Terminal, cli, duty, insert_duties, task_count


def _one_line_error(completed: subprocess.CompletedProcess[str]) -> str:
    """The command's only output on stderr: one line, never a traceback."""
    assert completed.stdout == ""
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def _args(event: str, *flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    invoke.register(parser.add_subparsers())
    return parser.parse_args(["invoke", event, *flags])


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_an_event_on_standard_input_runs_like_a_file(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1")])
    event = (EVENTS_DIR / "backfill-13-months.json").read_text()
    completed = cli("invoke", "-", stdin=event, DATABASE_URL=database)
    assert completed.returncode == ExitStatus.OK, completed.stderr
    assert json.loads(completed.stdout)["tasks_created"] == task_count(conn) == 13


def test_a_refused_event_exits_2_with_one_line(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1")])
    completed = cli("invoke", "-", stdin='{"to": "2026-01-01"}', DATABASE_URL=database)
    assert completed.returncode == ExitStatus.REFUSED
    assert "event refused: 'to' without 'from'" in _one_line_error(completed)
    assert task_count(conn) == 0


@pytest.mark.parametrize("text", ["", "{not json", "[1, 2"])
def test_an_event_that_is_not_json_exits_2(database: str, text: str) -> None:
    completed = cli("invoke", "-", stdin=text, DATABASE_URL=database)
    assert completed.returncode == ExitStatus.REFUSED
    assert "cannot read event '-'" in _one_line_error(completed)


def test_a_missing_event_file_exits_2(database: str, tmp_path: Path) -> None:
    completed = cli("invoke", str(tmp_path / "absent.json"), DATABASE_URL=database)
    assert completed.returncode == ExitStatus.REFUSED
    assert "absent.json" in _one_line_error(completed)


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("DISPATCH_WORKERS", "0", "DISPATCH_WORKERS='0'"),
        ("DATABASE_URL", "nonsense=1", 'invalid connection option "nonsense"'),
    ],
)
def test_a_configuration_error_exits_3(database: str, name: str, value: str, named: str) -> None:
    completed = cli("invoke", str(EVENTS_DIR / "scheduler.json"), **{name: value})
    assert completed.returncode == ExitStatus.CONFIGURATION
    assert named in _one_line_error(completed)


def test_a_database_that_cannot_be_reached_exits_4(database: str) -> None:
    url = f"postgresql://duly@127.0.0.1:{_closed_port()}/duly"
    completed = cli("invoke", str(EVENTS_DIR / "scheduler.json"), DATABASE_URL=url)
    assert completed.returncode == ExitStatus.DATABASE_UNREACHABLE
    assert "database unreachable: connection failed" in _one_line_error(completed)


@pytest.fixture
def unmigrated(server_dsn: str, template_database: str) -> Iterator[str]:
    """A database whose duties table is gone: a run on it is recorded, then fails at its first page.

    The run ledger stays, so the failure is the run's own, not the ledger's.
    """
    name = "duly_unmigrated_cli"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_database)
            )
        )
    dsn = psycopg.conninfo.make_conninfo(server_dsn, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE duly_duty CASCADE")
    yield dsn
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_a_run_that_fails_exits_5(unmigrated: str) -> None:
    completed = cli("invoke", str(EVENTS_DIR / "scheduler.json"), DATABASE_URL=unmigrated)
    assert completed.returncode == ExitStatus.FAILED
    assert "run failed: run failed after 0 committed page(s)" in _one_line_error(completed)
    assert 'relation "duly_duty" does not exist' in completed.stderr


def test_help_lists_the_environment_and_the_exit_statuses() -> None:
    for argv in (["--help"], ["invoke", "--help"]):
        completed = cli(*argv)
        assert completed.returncode == 0
        for variable in ("DATABASE_URL", "DB_SECRET_ARN", "DISPATCH_WORKERS", "DULY_PGDATA"):
            assert variable in completed.stdout, (argv, variable)
        for status, meaning in [(2, "refused"), (3, "configuration"),
                                (4, "could not be reached"), (5, "failed")]:  # fmt: skip
            assert any(
                line.split()[:1] == [str(status)] and meaning in line
                for line in completed.stdout.splitlines()
            ), (argv, status)


def test_on_a_terminal_it_draws_a_bar_and_ends_with_a_summary(
    conn: Conn, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(5)])
    monkeypatch.setenv("DISPATCH_CHUNK_SIZE", "2")
    stdout, stderr = Terminal(), Terminal()
    status = invoke.run(
        _args(str(EVENTS_DIR / "backfill-13-months.json")), stdout=stdout, stderr=stderr
    )
    assert status == 0
    summary = stdout.getvalue()
    assert summary.startswith("## invoke: backfill at clock")
    (row,) = [line for line in summary.splitlines() if "tasks created" in line]
    assert row.split() == ["tasks", "created", "65"]  # 5 duties x 13 months
    bar = stderr.getvalue()
    assert "5/5" in bar
    assert "created=65" in bar


def test_on_a_terminal_json_is_still_there_when_asked(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1")])
    stdout, stderr = Terminal(), Terminal()
    status = invoke.run(
        _args(str(EVENTS_DIR / "scheduler.json"), "--json", "--no-progress"),
        stdout=stdout,
        stderr=stderr,
    )
    assert status == 0
    assert json.loads(stdout.getvalue())["tasks_created"] == 2
    assert stderr.getvalue() == ""


def test_off_a_terminal_there_is_no_bar(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1")])
    stdout, stderr = io.StringIO(), io.StringIO()
    assert invoke.run(_args(str(EVENTS_DIR / "scheduler.json")), stdout=stdout, stderr=stderr) == 0
    assert json.loads(stdout.getvalue())["tasks_created"] == 2
    assert stderr.getvalue() == ""


def test_main_returns_the_exit_status(database: str, tmp_path: Path) -> None:
    event = tmp_path / "bad.json"
    event.write_text('{"from": "2026-02-01", "to": "2026-01-01"}')
    assert main(["invoke", str(event)]) == ExitStatus.REFUSED
