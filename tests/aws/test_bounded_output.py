"""What the handler says stays small and its own: reports, log lines, one invocation's keys."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from dispatch_fn.errors import EventError
from dispatch_fn.run import EXPLAIN_BYTES, FAULT_LIST_LIMIT
from support import CLOCK, Conn, Invoke, duty, insert_duties

# CloudWatch Logs takes events of at most 256 KB; Lambda answers at most 6 MB.
LOG_EVENT_BYTES = 256 * 1024


@dataclass
class Context:
    aws_request_id: str


def _log_lines(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_a_refused_event_on_a_warm_container_logs_its_own_request_id_and_no_earlier_keys(
    conn: Conn, deployed: Invoke, capfd: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("d1")])
    deployed({"now": CLOCK, "dry_run": True}, Context("req-first"))
    capfd.readouterr()
    with pytest.raises(EventError):
        deployed({"to": "2026-01-01"}, Context("req-second"))
    (refused,) = _log_lines(capfd.readouterr().err)
    assert refused["message"] == "event refused"
    assert refused["request_id"] == "req-second"
    for stale in ("mode", "clock", "dry_run"):
        assert stale not in refused, stale


def test_every_line_of_an_invocation_carries_that_invocations_keys(
    conn: Conn, deployed: Invoke, capfd: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("d1")])
    deployed({"from": "2026-01-01", "to": "2026-01-31", "now": CLOCK}, Context("req-a"))
    capfd.readouterr()
    deployed({"now": "2026-08-22T01:00:00Z", "dry_run": True}, None)
    lines = _log_lines(capfd.readouterr().err)
    assert [line["message"] for line in lines] == ["run started", "run finished"]
    for line in lines:
        assert line.get("request_id") is None  # no context, so no request id: not req-a's
        assert (line["mode"], line["clock"], line["dry_run"]) == (
            "scheduled",
            "2026-08-22T01:00:00+00:00",
            True,
        )


def test_the_largest_scope_accepted_gives_a_small_report_with_its_count(
    conn: Conn, invoke: Invoke, capfd: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("duty-00000001")])
    # As many ids as a continuation can carry (events.MAX_SCOPE_BYTES).
    ids = [f"duty-{n:08d}-{'x' * 23}" for n in range(5_900)]
    report = invoke({"now": CLOCK, "dry_run": True, "duty_ids": ids})
    assert report["scope"]["duty_ids_count"] == 5_900
    assert report["scope"]["duty_ids"] == ids[:10]
    assert len(json.dumps(report)) < 4_000
    for line in capfd.readouterr().err.splitlines():
        assert len(line.encode()) < 8_000


def test_the_fault_list_is_capped_and_says_how_many_more_there_are(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(f"mars-{n:03d}", timezone="Mars/Olympus") for n in range(150)])
    report = invoke({"now": CLOCK, "dry_run": True})
    assert len(report["faults"]) == FAULT_LIST_LIMIT
    assert report["fault_counts"]["invalid_cadence"] == 150
    assert report["faults_omitted"] == 150 - FAULT_LIST_LIMIT
    assert "organization_id" in report["faults_hint"]


def test_a_complete_fault_list_omits_nothing(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("mars", timezone="Mars/Olympus"), duty("good")])
    report = invoke({"now": CLOCK})
    assert (len(report["faults"]), report["faults_omitted"], report["faults_hint"]) == (1, 0, None)


def test_faults_about_huge_stored_values_stay_within_a_log_event(
    conn: Conn, invoke: Invoke, capfd: pytest.CaptureFixture[str]
) -> None:
    # What a user can store: a zone name of 100,000 characters, on many duties.
    huge_zone = "Mars/" + "\U0001f680" * 100_000
    insert_duties(conn, [duty(f"d{n:03d}", timezone=huge_zone) for n in range(120)])
    report = invoke({"now": CLOCK, "dry_run": True})
    assert report["fault_counts"]["invalid_cadence"] == 120
    assert report["faults"][0]["detail"].endswith("...")
    assert len(json.dumps(report)) < LOG_EVENT_BYTES // 2
    for line in capfd.readouterr().err.splitlines():
        assert len(line.encode()) < LOG_EVENT_BYTES


def test_a_dry_runs_explanations_stop_at_the_response_budget_and_say_how_many_are_left(
    conn: Conn, invoke: Invoke
) -> None:
    ids = [f"daily-{n}" for n in range(4)]
    insert_duties(conn, [duty(duty_id, frequency="daily") for duty_id in ids])
    # Five years of daily periods: about 400 KB of explanation per duty.
    window = {"from": "2021-09-01", "to": "2026-08-31", "now": CLOCK, "dry_run": True}
    report = invoke({**window, "duty_ids": ids})
    assert list(report["explain"]) == ids[: len(report["explain"])]
    assert 0 < len(report["explain"]) < len(ids)
    assert report["explain_omitted"] == len(ids) - len(report["explain"])
    assert "python -m dispatch_fn explain" in report["explain_hint"]
    assert len(json.dumps(report)) <= EXPLAIN_BYTES + 10_000


def test_a_small_explanation_is_whole(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("d1"), duty("d2")])
    report = invoke({"now": CLOCK, "dry_run": True, "duty_ids": ["d1", "d2"]})
    assert (sorted(report["explain"]), report["explain_omitted"]) == (["d1", "d2"], 0)
    assert report["explain_hint"] is None
