"""The metrics the alarms and the dashboard watch are the ones the handler publishes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from samtranslator.yaml_helper import yaml_parse

from dispatch_fn.errors import EventError
from dispatch_fn.run import RunFailedError
from support import CLOCK, Conn, Invoke, duty, insert_duties

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


@pytest.fixture(autouse=True)
def _metrics_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    # `python -m dispatch_fn invoke` run in-process (test_cli) turns metrics off
    # in os.environ for the rest of the session, and Powertools keeps what it did
    # not flush; these tests read exactly one invocation's metrics.
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    from dispatch_fn.aws import app  # noqa: PLC0415 - the handler's own Metrics instance

    app.metrics.clear_metrics()


def _published(capfd: pytest.CaptureFixture[str]) -> dict[str, float]:
    """Each EMF metric the invocation printed, with its one value."""
    values: dict[str, float] = {}
    for line in capfd.readouterr().out.splitlines():
        if '"_aws"' not in line:
            continue
        blob = json.loads(line)
        if "ColdStart" in blob:  # Powertools' own, per execution environment
            continue
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            assert directive["Namespace"] == "Duly"
            # The alarms watch the service-only set; the second adds the run's mode.
            assert directive["Dimensions"][0] == ["service"]
            for metric in directive["Metrics"]:
                (values[metric["Name"]],) = blob[metric["Name"]]
    return values


def test_a_scheduled_run_is_a_heartbeat(
    conn: Conn, deployed: Invoke, capfd: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("d1")])
    capfd.readouterr()
    deployed({"scheduled_time": CLOCK})
    assert _published(capfd)["ScheduledRunsCompleted"] == 1


def test_a_scheduled_run_that_created_nothing_is_still_a_heartbeat(
    conn: Conn, deployed: Invoke, capfd: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("d1")])
    deployed({"scheduled_time": CLOCK})
    capfd.readouterr()
    deployed({"scheduled_time": CLOCK})
    assert _published(capfd)["ScheduledRunsCompleted"] == 1


@pytest.mark.parametrize(
    "event",
    [
        pytest.param({"from": "2026-01-01", "to": "2026-03-31"}, id="backfill"),
        pytest.param({"now": CLOCK, "dry_run": True}, id="dry-run"),
    ],
)
def test_backfills_and_dry_runs_are_not_heartbeats(
    conn: Conn, deployed: Invoke, capfd: pytest.CaptureFixture[str], event: dict[str, Any]
) -> None:
    insert_duties(conn, [duty("d1")])
    capfd.readouterr()
    deployed(event)
    # A dry run publishes no run metric at all (docs/contract.md#metrics), the heartbeat included.
    assert _published(capfd).get("ScheduledRunsCompleted", 0) == 0


def _watched_metric_names() -> set[str]:
    template = yaml_parse(TEMPLATE.read_text("utf-8"))
    resources = template["Resources"].values()
    names = {
        r["Properties"]["MetricName"]
        for r in resources
        if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"]["Namespace"] == "Duly"
    }
    for resource in resources:
        if resource["Type"] == "AWS::CloudWatch::Dashboard":
            body = resource["Properties"]["DashboardBody"]["Fn::Sub"]
            names |= set(re.findall(r'\["Duly", "([A-Za-z]+)"', body))
    return names


def test_every_metric_an_alarm_or_the_dashboard_watches_is_published(
    conn: Conn, deployed: Invoke, capfd: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("d1")])
    capfd.readouterr()
    deployed({"scheduled_time": CLOCK})
    published = set(_published(capfd))
    with pytest.raises(EventError):
        deployed({"unknown_field": 1})
    published |= set(_published(capfd))
    # A run that fails: the dispatcher's role (this test's database only) loses INSERT.
    insert_duties(conn, [duty("d2", frequency="weekly")])
    conn.execute(
        "DO $$ BEGIN EXECUTE format('REVOKE INSERT ON duly_task FROM %I', duly_dispatcher_role());"
        " END $$"
    )
    with pytest.raises(RunFailedError):
        deployed({"scheduled_time": "2026-09-21T01:00:00Z"})
    failed = _published(capfd)
    assert (failed["FailedRuns"], failed.get("ScheduledRunsCompleted")) == (1, None)
    published |= set(failed)
    watched = _watched_metric_names()
    assert {"ScheduledRunsCompleted", "Degraded", "TasksCreated", "FailedRuns"} <= watched
    assert watched <= published
