"""`python -m dispatch_fn runs` filtered by mode and status, and `runs show ID`: one run."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from dispatch_fn.cli import ExitStatus
from dispatch_fn.db import ledger
from support import CLOCK, EVENTS_DIR, NOW, Conn, cli, duty, insert_duties


@pytest.fixture
def two_runs(conn: Conn, database: str) -> dict[str, int]:
    """A scheduled run, marked failed afterwards, and a completed backfill."""
    insert_duties(conn, [duty("d1")])
    ids: dict[str, int] = {}
    for name, argv in [
        ("scheduled", ["--now", CLOCK]),
        ("backfill", [str(EVENTS_DIR / "backfill-13-months.json")]),
    ]:
        # A real scheduled run now, from standard input (events/console.json is a dry run).
        event = argv if name == "backfill" else ["-", *argv]
        completed = cli("invoke", "--json", *event, stdin="{}")
        assert completed.returncode == ExitStatus.OK, completed.stderr
        ids[name] = json.loads(completed.stdout)["run_id"]
    conn.execute("UPDATE duly_dispatch_run SET status = 'failed', error = 'boom' WHERE id = %s",
                 (ids["scheduled"],))  # fmt: skip
    return ids


def _listed(*argv: str) -> list[dict[str, object]]:
    completed = cli("runs", "--json", *argv)
    assert completed.returncode == ExitStatus.OK, completed.stderr
    listed: list[dict[str, object]] = json.loads(completed.stdout)
    return listed


def test_runs_filters_by_mode_and_by_status(two_runs: dict[str, int]) -> None:
    assert [run["id"] for run in _listed("--mode", "backfill")] == [two_runs["backfill"]]
    assert [run["id"] for run in _listed("--status", "failed")] == [two_runs["scheduled"]]
    assert _listed("--mode", "backfill", "--status", "failed") == []
    assert {run["id"] for run in _listed()} == set(two_runs.values())


def test_a_filter_matching_nothing_says_so_in_the_table(two_runs: dict[str, int]) -> None:
    completed = cli("runs", "--status", "incomplete")
    assert completed.returncode == ExitStatus.OK
    assert completed.stdout.strip() == "no runs with status incomplete"


@pytest.mark.parametrize(
    ("argv", "named"),
    [(["--status", "finished"], "--status"), (["--mode", "hourly"], "--mode")],
)
def test_an_unknown_status_or_mode_is_a_usage_error(
    database: str, argv: list[str], named: str
) -> None:
    completed = cli("runs", *argv)
    assert completed.returncode == ExitStatus.REFUSED
    assert f"argument {named}: invalid choice: {argv[1]!r}" in completed.stderr
    assert "choose from" in completed.stderr
    assert completed.stdout == ""


def test_runs_show_gives_one_runs_whole_record_with_its_set_asides(
    conn: Conn, two_runs: dict[str, int]
) -> None:
    run_id = two_runs["backfill"]
    ledger.record_set_aside(conn, run_id, [(None, "d9", "locked")], owed_from=NOW)
    completed = cli("runs", "show", str(run_id), "--json")
    assert completed.returncode == ExitStatus.OK, completed.stderr
    record = json.loads(completed.stdout)
    assert record["id"] == run_id
    assert record["mode"] == "backfill"
    assert record["status"] == "completed"
    # The window's 13 months, one of which the scheduled run had already created.
    assert (record["report"]["tasks_created"], record["report"]["tasks_existing"]) == (12, 1)
    assert record["set_aside"] == [
        {"duty_id": "d9", "organization_id": None, "reason": "locked",
         "owed_from": record["set_aside"][0]["owed_from"], "repaid_by": None}
    ]  # fmt: skip
    assert datetime.fromisoformat(record["set_aside"][0]["owed_from"]) == NOW

    text = cli("runs", "show", str(run_id))
    assert text.returncode == ExitStatus.OK
    assert "set aside (1):" in text.stdout
    assert "d9  locked" in text.stdout
    assert '"tasks_created": 12' in text.stdout


def test_runs_show_lists_a_duty_refused_while_judged_afresh_apart_from_the_set_aside(
    conn: Conn, two_runs: dict[str, int]
) -> None:
    # The ledger keeps a duty whose row the server refused while the run
    # judged it afresh (migration 0025): a fault, which the report does not
    # count as set aside, and neither does `runs show`.
    run_id = two_runs["backfill"]
    ledger.record_set_aside(
        conn, run_id, [(None, "d8", "refused"), (None, "d9", "locked")], owed_from=NOW
    )
    record = json.loads(cli("runs", "show", str(run_id), "--json").stdout)
    text = cli("runs", "show", str(run_id)).stdout

    # Before: both under set_aside, and "set aside (2):".
    assert [entry["duty_id"] for entry in record["set_aside"]] == ["d9"]
    assert [entry["duty_id"] for entry in record["refused_afresh"]] == ["d8"]
    assert "set aside (1):" in text
    assert "refused while judged afresh, owed that judgement (1):" in text
    assert text.index("d8  refused") > text.index("owed that judgement (1):")


def test_runs_show_of_an_unknown_id_exits_with_its_own_status_and_one_line(
    two_runs: dict[str, int],
) -> None:
    missing = max(two_runs.values()) + 100
    completed = cli("runs", "show", str(missing))
    assert completed.returncode == ExitStatus.UNKNOWN_RUN
    assert completed.stdout == ""
    assert completed.stderr.splitlines() == [
        f"error: no run {missing}: `runs` lists the recorded ones"
    ]


@pytest.mark.parametrize("text", ["abc", "0", "-3"])
def test_runs_show_refuses_an_id_that_is_not_a_positive_number(database: str, text: str) -> None:
    completed = cli("runs", "show", text)
    assert completed.returncode == ExitStatus.REFUSED
    assert "argument ID" in completed.stderr
