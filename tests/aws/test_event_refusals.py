"""Hostile and malformed events: each an EventError naming its field, bounded, writing nothing."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch_fn.errors import EventError
from support import CLOCK, Conn, Invoke, duty, insert_duties, last_dispatched, task_count

# Far more than any refusal needs to say, far less than the value it refuses.
MESSAGE_LIMIT = 600
RULE_ENVELOPE = {"detail-type": "Scheduled Event", "source": "aws.events", "time": CLOCK}
SCHEDULER_ENVELOPE = {"scheduled_time": CLOCK}
MANUAL_FIELDS = {
    "dry_run": True,
    "from": "2026-01-01",
    "to": "2026-01-31",
    "now": CLOCK,
    "organization_id": "org-1",
    "duty_ids": ["d1"],
    "resume_after": "d0",
    "continuation": 1,
}


def _nested_list(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


def _refused(conn: Conn, invoke: Invoke, event: object) -> str:
    insert_duties(conn, [duty("d1")])
    with pytest.raises(EventError) as refused:
        invoke(event)
    assert task_count(conn) == 0
    assert last_dispatched(conn) == {"d1": None}
    message = str(refused.value)
    assert len(message) <= MESSAGE_LIMIT, len(message)
    return message


@pytest.mark.parametrize("field", ["now", "from", "to", "organization_id", "dry_run", "duty_ids"])
def test_a_value_nested_2000_deep_is_refused_by_field_not_by_recursion(
    conn: Conn, invoke: Invoke, field: str
) -> None:
    assert field in _refused(conn, invoke, {field: _nested_list(2000)})


@pytest.mark.parametrize(
    "clock",
    [
        "0001-01-01T00:30:00+01:00",
        "0001-01-01T00:00:00+00:00",
        "9999-12-31T23:00:00-05:00",
        "9999-12-31T23:59:59-00:01",
        "1582-12-31T23:59:59Z",
        "1583-01-01T00:30:00+01:00",
    ],
)
def test_a_clock_outside_the_calendar_years_is_refused(
    conn: Conn, invoke: Invoke, clock: str
) -> None:
    message = _refused(conn, invoke, {"now": clock})
    assert "now" in message
    assert "1583" in message


@pytest.mark.parametrize("envelope", ["scheduled_time", "time"])
def test_a_schedule_envelope_clock_outside_the_calendar_years_is_refused(
    conn: Conn, invoke: Invoke, envelope: str
) -> None:
    event = (
        {"scheduled_time": "1200-01-01T00:00:00Z"}
        if envelope == "scheduled_time"
        else {**RULE_ENVELOPE, "time": "0001-01-01T00:00:00+01:00"}
    )
    assert envelope in _refused(conn, invoke, event)


@pytest.mark.parametrize(
    "event", [{"from": "1582-12-01", "to": "1583-01-31"}, {"from": "0001-01-01"}]
)
def test_a_window_outside_the_calendar_years_is_refused(
    conn: Conn, invoke: Invoke, event: dict[str, Any]
) -> None:
    message = _refused(conn, invoke, event)
    assert "from" in message
    assert "1583" in message


def test_a_clock_at_the_last_instant_of_9999_with_from_alone_does_not_overflow(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1")])
    report = invoke({"from": "9999-12-01", "now": "9999-12-31T23:59:59Z", "dry_run": True})
    assert report["window"] == {"from": "9999-12-01", "to": None}


@pytest.mark.parametrize(
    "event",
    [
        {"organization_id": "org\x00-1"},
        {"duty_ids": ["d1", "d\x001"]},
        {"resume_after": "d\x00"},
    ],
)
def test_a_nul_character_in_an_identifier_is_refused_before_the_database(
    conn: Conn, invoke: Invoke, event: dict[str, Any]
) -> None:
    message = _refused(conn, invoke, event)
    (field,) = event
    assert field in message
    assert "NUL" in message


@pytest.mark.parametrize("field", ["now", "from", "organization_id", "resume_after"])
def test_a_one_megabyte_value_is_quoted_by_a_short_prefix(
    conn: Conn, invoke: Invoke, field: str
) -> None:
    message = _refused(conn, invoke, {field: "x" * 1_000_000})
    assert field in message
    assert "xxxxxxxx" in message
    assert "1000000 characters" in message


def test_a_one_megabyte_unknown_field_name_is_quoted_by_a_short_prefix(
    conn: Conn, invoke: Invoke
) -> None:
    message = _refused(conn, invoke, {"y" * 1_000_000: 1})
    assert "unknown field" in message


def test_a_hundred_thousand_problems_are_summarised_not_listed(conn: Conn, invoke: Invoke) -> None:
    message = _refused(conn, invoke, {f"field-{n}": n for n in range(100_000)})
    assert "more" in message


def test_a_huge_integer_is_refused_without_printing_its_digits(conn: Conn, invoke: Invoke) -> None:
    assert "now" in _refused(conn, invoke, {"now": 10**5000})


@pytest.mark.parametrize("field", sorted(MANUAL_FIELDS))
@pytest.mark.parametrize("envelope", [RULE_ENVELOPE, SCHEDULER_ENVELOPE], ids=["rule", "scheduler"])
def test_a_schedule_envelope_carrying_a_manual_field_is_refused(
    conn: Conn, invoke: Invoke, envelope: dict[str, Any], field: str
) -> None:
    message = _refused(conn, invoke, {**envelope, field: MANUAL_FIELDS[field]})
    assert field in message
    assert "manual" in message


def test_an_event_carrying_both_schedule_envelopes_is_refused(conn: Conn, invoke: Invoke) -> None:
    message = _refused(conn, invoke, {**RULE_ENVELOPE, **SCHEDULER_ENVELOPE})
    assert "scheduled_time" in message


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (0, "1 to 20"),
        (21, "1 to 20"),
        (-1, "1 to 20"),
        (True, "boolean"),
        ("3", "integer"),
        (2.0, "integer"),
        (None, "integer"),
    ],
)
def test_continuation_is_a_count_from_1_to_20(
    conn: Conn, invoke: Invoke, value: object, named: str
) -> None:
    message = _refused(conn, invoke, {"now": CLOCK, "resume_after": "d0", "continuation": value})
    assert "continuation" in message
    assert named in message


@pytest.mark.parametrize(
    ("value", "named"),
    [("", "empty"), (7, "string"), ("d" * 5000, "characters"), (["d1"], "string")],
)
def test_resume_after_is_a_short_duty_id(
    conn: Conn, invoke: Invoke, value: object, named: str
) -> None:
    message = _refused(conn, invoke, {"now": CLOCK, "resume_after": value})
    assert "resume_after" in message
    assert named in message


def test_more_duty_ids_than_the_cap_are_refused_with_the_setting_that_raises_it(
    conn: Conn, invoke: Invoke
) -> None:
    message = _refused(conn, invoke, {"duty_ids": [f"d{n}" for n in range(100_000)]})
    assert "duty_ids" in message
    assert "100000" in message
    assert "DISPATCH_MAX_DUTY_IDS" in message


@pytest.mark.parametrize(
    "event",
    [
        {"organization_id": "org-\ud800"},
        {"duty_ids": ["d1", "\udfff"]},
        {"resume_after": "d\ud800"},
        {"now": CLOCK, "dry_run": True, "organization_id": "\udc80" * 3000},
    ],
)
def test_a_lone_surrogate_in_an_identifier_is_refused_before_the_ledger(
    conn: Conn, invoke: Invoke, event: dict[str, Any]
) -> None:
    message = _refused(conn, invoke, event)
    field = next(name for name in event if name in ("organization_id", "duty_ids", "resume_after"))
    assert field in message
    assert "UTF-8" in message
    # The message itself can be printed and logged: it holds no surrogate.
    message.encode("utf-8")
    assert conn.execute("SELECT count(*) FROM duly_dispatch_run").fetchone() == (0,)


@pytest.mark.parametrize(
    "event",
    [
        {**RULE_ENVELOPE, "detail": {"note": "\ud800"}},
        {**RULE_ENVELOPE, "resources": ["arn:\udfff"]},
        {"\ud800": 1},
    ],
    ids=["envelope-detail", "envelope-list", "field-name"],
)
def test_a_lone_surrogate_anywhere_in_the_event_is_refused(
    conn: Conn, invoke: Invoke, event: dict[str, Any]
) -> None:
    message = _refused(conn, invoke, event)
    assert "UTF-8" in message
    message.encode("utf-8")


def test_a_clock_late_on_9999_12_31_owes_the_days_since_the_account_without_overflow(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0)])
    invoke({"now": "9999-12-28T01:00:00Z"})
    # That run's clock is ahead of today's wall clock, so it kept no account
    # (docs/contract.md#account); the scheduled run at it, in its day, would have.
    conn.execute("UPDATE duly_duty SET dispatch_through = '9999-12-28'")
    report = invoke({"now": "9999-12-31T23:00:00Z"})
    assert report["complete"] is True
    assert (report["duties_owing"], report["beyond_horizon"]) == (1, 0)
    # The account's day (12-28), then the days since: 12-29, 12-30, 12-31.
    assert task_count(conn) == 4
    row = conn.execute("SELECT status FROM duly_dispatch_run ORDER BY id DESC LIMIT 1").fetchone()
    assert row == ("completed",)


def test_the_schedule_at_the_calendars_end_reaches_back_the_horizon_and_stops_there() -> None:
    from datetime import UTC, datetime  # noqa: PLC0415 - this test alone needs them

    from dispatch_fn.planning.plan import schedule_for  # noqa: PLC0415

    schedule = schedule_for("daily", "UTC", datetime(9999, 12, 31, 23, tzinfo=UTC), lead_horizon=30)
    # From the horizon's own day, there to be counted if it lapsed.
    assert [period.key for period in schedule.periods] == [
        f"9999-12-{day}" for day in range(23, 32)
    ]
