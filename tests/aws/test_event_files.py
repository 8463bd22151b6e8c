"""Every payload in events/ runs through the handler against the demo organisation."""

from __future__ import annotations

import pytest
from aws_lambda_powertools import Metrics

from dispatch_fn.cli.demo import seed
from support import EVENTS_DIR, Conn, Invoke, last_dispatched, load_event, task_count


@pytest.fixture
def demo_org(conn: Conn) -> Conn:
    seed(conn)
    return conn


def test_every_event_file_has_a_test_here() -> None:
    covered = {
        "scheduler.json", "scheduled-event.json", "console.json", "backfill-13-months.json",
        "backfill-dry-run.json", "backfill-scoped.json", "query-runs.json", "query-explain.json",
    }  # fmt: skip
    assert {path.name for path in EVENTS_DIR.glob("*.json")} == covered


@pytest.mark.parametrize("name", ["scheduler.json", "scheduled-event.json"])
def test_the_schedules_payloads_run_at_the_schedules_own_time(
    demo_org: Conn, invoke: Invoke, name: str
) -> None:
    report = invoke(load_event(name))
    assert (report["mode"], report["now"]) == ("scheduled", "2026-11-29T01:00:00+00:00")
    assert report["tasks_created"] == task_count(demo_org) > 0
    assert report["degraded"] is True  # the demo keeps one duty on Mars
    assert invoke(load_event(name))["tasks_created"] == 0


def test_the_console_payload_plans_todays_run_and_writes_nothing(
    demo_org: Conn, invoke: Invoke
) -> None:
    metrics = Metrics(namespace="Duly", service="duly-dispatcher")
    metrics.clear_metrics()
    report = invoke(load_event("console.json"), metrics=metrics)
    assert (report["mode"], report["dry_run"]) == ("scheduled", True)
    assert report["tasks_would_create"] > 0
    assert task_count(demo_org) == 0
    assert all(mark is None for mark in last_dispatched(demo_org).values())
    # Not a heartbeat: the alarm that watches scheduled runs hears nothing of it.
    assert "ScheduledRunsCompleted" not in metrics.metric_set


def test_the_13_month_backfill_and_its_dry_run_agree(demo_org: Conn, invoke: Invoke) -> None:
    dry = invoke(load_event("backfill-dry-run.json"))
    assert task_count(demo_org) == 0
    assert all(mark is None for mark in last_dispatched(demo_org).values())
    real = invoke(load_event("backfill-13-months.json"))
    assert (dry["dry_run"], real["dry_run"]) == (True, False)
    assert dry["tasks_created"] == real["tasks_created"] == task_count(demo_org) > 0
    assert real["window"] == {"from": "2025-10-01", "to": "2026-10-31"}


def test_the_scoped_backfill_touches_only_its_duties(demo_org: Conn, invoke: Invoke) -> None:
    event = load_event("backfill-scoped.json")
    report = invoke(event)
    touched = demo_org.execute("SELECT DISTINCT duty_id FROM duly_task ORDER BY 1").fetchall()
    assert [row[0] for row in touched] == sorted(event["duty_ids"])
    assert report["duties_read"] == len(event["duty_ids"])
    assert report["tasks_created"] == task_count(demo_org) == 13 + 5  # months + quarters


def test_the_query_payloads_answer_without_running(demo_org: Conn, invoke: Invoke) -> None:
    invoke(load_event("scheduler.json"))
    runs = invoke(load_event("query-runs.json"))
    explained = invoke(load_event("query-explain.json"))
    assert [run["mode"] for run in runs["runs"]] == ["scheduled"]
    assert explained["explain"]["duty_id"] == "duty-gb-vat-quarterly"
    assert explained["explain"]["found"] is True
