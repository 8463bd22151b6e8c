"""`python -m dispatch_fn demo` shows the user's acceptance point: one UTC run, local periods;
and it keeps to its own rows: nothing a user created is deleted or dispatched by it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from dispatch_fn.aws import app
from dispatch_fn.cli import ExitStatus, main
from dispatch_fn.cli.demo import ORGANIZATION, run_demo
from support import EVENTS_DIR, Conn, duty, insert_duties, task_keys


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    yield
    app._connections.discard()


def test_the_demo_shows_which_period_shanghai_and_los_angeles_got_on_one_utc_run(
    quiet: None, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # 01:00 UTC on December 1st: 09:00 on the 1st in Shanghai, 17:00 on November 30th in LA.
    run_demo(db_url, datetime(2026, 12, 1, 1, 0, tzinfo=UTC))
    out = capsys.readouterr().out
    section = out.split("## Shanghai and Los Angeles on the same UTC run", 1)[1].split("\n## ")[0]
    rows = {line.split()[0]: line.split() for line in section.splitlines()[2:] if line.strip()}
    assert rows["duty-sh-daily"][1:5] == ["Asia/Shanghai", "Tue", "2026-12-01", "09:00"]
    assert rows["duty-sh-daily"][6:9] == ["2026-12-01", "2026-11-30", "in"]
    assert rows["duty-sh-monthly"][6:8] == ["2026-12", "2026-11"]
    assert rows["duty-la-weekly"][1:5] == ["America/Los_Angeles", "Mon", "2026-11-30", "17:00"]
    assert rows["duty-la-weekly"][6] == "2026-W49"
    # Each duty got its own local period, as a task.
    assert rows["duty-sh-daily"][-1] == "2026-12-01"
    assert rows["duty-sh-monthly"][-1] == "2026-12"


def test_the_demo_keeps_what_a_user_created_in_the_demo_organisation(
    quiet: None, db_url: str, conn: Conn, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
    insert_duties(conn, [duty("my-own-duty", organization_id=ORGANIZATION)])
    run_demo(db_url, clock)
    mine = task_keys(conn, "my-own-duty")
    assert mine  # the demo's runs, scoped to org-demo, dispatch it too
    capsys.readouterr()

    run_demo(db_url, clock)  # seeding again replaces the demo's own rows only
    assert conn.execute("SELECT count(*) FROM duly_duty WHERE id = 'my-own-duty'").fetchone() == (
        1,
    )
    assert task_keys(conn, "my-own-duty") == mine
    out = capsys.readouterr().out
    assert f"{ORGANIZATION} also holds 1 duty the demo did not seed (my-own-duty)" in out


def test_the_demo_dispatches_no_other_organisation(
    quiet: None, db_url: str, conn: Conn, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("elsewhere", organization_id="org-real")])
    run_demo(db_url, datetime(2026, 12, 1, 1, 0, tzinfo=UTC))
    assert task_keys(conn, "elsewhere") == []


def test_the_demo_says_its_broken_duty_is_on_purpose_where_the_fault_shows(
    quiet: None, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_demo(db_url, datetime(2026, 12, 1, 1, 0, tzinfo=UTC))
    out = capsys.readouterr().out
    faults = [line for line in out.splitlines() if "fault: duty-broken-zone" in line]
    assert faults
    assert all("on purpose" in line for line in faults)
    assert "duty-broken-zone is now paused" in out


@pytest.mark.parametrize(
    "event",
    ["backfill-13-months.json", "backfill-dry-run.json", "scheduler.json", "console.json"],
)
def test_the_readmes_next_steps_after_the_demo_succeed(
    quiet: None, db_url: str, database: str, event: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_demo(db_url, datetime(2026, 12, 1, 1, 0, tzinfo=UTC))
    capsys.readouterr()
    status = main(["invoke", "--json", str(EVENTS_DIR / event)])
    report = json.loads(capsys.readouterr().out)
    assert status == ExitStatus.OK, report
    assert report["degraded"] is False
