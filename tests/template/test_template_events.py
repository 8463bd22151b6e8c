"""The ready payloads in ``events/`` are valid JSON of the shapes docs/contract.md#events accepts.

These check the files alone; running each through the handler is the handler
tests' job.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest

MANUAL_FIELDS = {"now", "from", "to", "dry_run", "organization_id", "duty_ids"}
MAX_WINDOW_DAYS = 1827
THIRTEEN_MONTHS = {"from": "2025-10-01", "to": "2026-10-31"}

EXPECTED_FILES = {
    "scheduler.json",
    "scheduled-event.json",
    "console.json",
    "backfill-13-months.json",
    "backfill-dry-run.json",
    "backfill-scoped.json",
    "query-runs.json",
    "query-explain.json",
}


@pytest.fixture(scope="module")
def events_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "events"


def _load(events_dir: Path, name: str) -> dict[str, Any]:
    loaded = json.loads((events_dir / name).read_text("utf-8"))
    assert isinstance(loaded, dict), f"{name} must hold a JSON object"
    return loaded


def _utc_instant(value: object) -> datetime:
    assert isinstance(value, str)
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() is not None, f"{value!r} has no UTC offset"
    return parsed


def _window(event: dict[str, Any]) -> tuple[date, date]:
    first, last = date.fromisoformat(event["from"]), date.fromisoformat(event["to"])
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", event["from"])
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", event["to"])
    assert first <= last
    assert (last - first).days + 1 <= MAX_WINDOW_DAYS
    return first, last


def test_events_directory_holds_exactly_the_documented_payloads(events_dir: Path) -> None:
    assert {path.name for path in events_dir.iterdir() if path.is_file()} == EXPECTED_FILES
    # Beside them, only the environments sam local invoke --env-vars takes.
    assert {path.name for path in events_dir.iterdir() if path.is_dir()} == {"env"}
    assert {path.name for path in (events_dir / "env").iterdir()} == {"local-postgres.json"}


def test_scheduler_payload_carries_only_the_scheduled_time(events_dir: Path) -> None:
    event = _load(events_dir, "scheduler.json")
    assert event == {"scheduled_time": "2026-11-29T01:00:00Z"}
    assert _utc_instant(event["scheduled_time"]).hour == 1


def test_classic_scheduled_event_is_a_complete_eventbridge_envelope(events_dir: Path) -> None:
    event = _load(events_dir, "scheduled-event.json")
    assert set(event) == {
        "version",
        "id",
        "detail-type",
        "source",
        "account",
        "time",
        "region",
        "resources",
        "detail",
    }
    assert event["version"] == "0"
    assert event["detail-type"] == "Scheduled Event"
    assert event["source"] == "aws.events"
    assert event["detail"] == {}
    assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", event["id"])
    assert re.fullmatch(r"\d{12}", event["account"])
    _utc_instant(event["time"])
    (rule_arn,) = event["resources"]
    assert rule_arn.startswith(f"arn:aws:events:{event['region']}:{event['account']}:rule/")


def test_console_payload_is_a_dry_run_that_writes_nothing(events_dir: Path) -> None:
    # The sample a console user pastes first: today's scheduled run, planned, not written.
    assert _load(events_dir, "console.json") == {"dry_run": True}


def test_thirteen_month_backfill_covers_october_to_october_inclusive(events_dir: Path) -> None:
    event = _load(events_dir, "backfill-13-months.json")
    assert event == THIRTEEN_MONTHS
    first, last = _window(event)
    months = (last.year - first.year) * 12 + last.month - first.month + 1
    assert months == 13
    assert first.day == 1
    assert (last.month, last.day) == (10, 31)


def test_dry_run_backfill_is_the_thirteen_month_window_writing_nothing(events_dir: Path) -> None:
    event = _load(events_dir, "backfill-dry-run.json")
    assert event == {**THIRTEEN_MONTHS, "dry_run": True}


def test_scoped_backfill_names_one_organisation_and_some_duties(events_dir: Path) -> None:
    event = _load(events_dir, "backfill-scoped.json")
    assert set(event) == {"from", "to", "organization_id", "duty_ids"}
    _window(event)
    assert event["organization_id"] == "org-demo"
    duty_ids = event["duty_ids"]
    assert isinstance(duty_ids, list)
    assert duty_ids
    assert len(set(duty_ids)) == len(duty_ids)
    assert all(isinstance(d, str) and d.startswith("duty-") for d in duty_ids)


QUERIES = {"query-runs.json", "query-explain.json"}


@pytest.mark.parametrize(
    "name", sorted(EXPECTED_FILES - {"scheduler.json", "scheduled-event.json"} - QUERIES)
)
def test_manual_payloads_use_only_fields_the_contract_accepts(events_dir: Path, name: str) -> None:
    assert set(_load(events_dir, name)) <= MANUAL_FIELDS


def test_the_query_payloads_use_only_the_fields_each_query_accepts(events_dir: Path) -> None:
    assert _load(events_dir, "query-runs.json") == {"query": "runs", "limit": 5}
    explain = _load(events_dir, "query-explain.json")
    assert explain["query"] == "explain"
    assert set(explain) <= {"query", "duty_id", "now", "from", "to"}
