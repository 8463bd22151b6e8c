"""Every invalid input is refused with its own ValueError subclass and a message
that shows the offending value (repr) and the expected shape."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from dispatch_fn.engine import (
    check_day_count,
    due_date_for,
    local_date,
    period_bounds,
    period_key_for,
    periods_between,
    start_of_day,
    visible_from_for,
    zone,
)
from dispatch_fn.errors import (
    InvalidDateError,
    InvalidDayCountError,
    MalformedPeriodKeyError,
    NaiveDatetimeError,
    PeriodError,
    UnknownAnchorError,
    UnknownFrequencyError,
    UnknownTimezoneError,
    YearOutOfRangeError,
)

NOON = datetime(2026, 8, 21, 12, tzinfo=UTC)
NAIVE = datetime(2026, 8, 21, 12)


def refused(call: Callable[[], object], error: type[PeriodError], *fragments: str) -> PeriodError:
    with pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, ValueError)
    for fragment in fragments:
        assert fragment in str(caught.value)
    return caught.value


# --- strict keys: near misses are refused, never repaired ---


@pytest.mark.parametrize(
    ("frequency", "key"),
    [
        ("weekly", "2026-W4"),
        ("weekly", "2026-w04"),
        ("weekly", "2026W04"),
        ("weekly", " 2026-W04"),
        ("weekly", "2026-W04\n"),
        ("daily", "2026-8-21"),
        ("daily", "2026-08-21T00:00"),
        ("daily", "20260821"),
        ("daily", "２０２６-08-21"),  # full-width digits  # noqa: RUF001
        ("monthly", "2026-8"),
        ("quarterly", "2026-Q"),
        ("quarterly", "2026-Q03"),
        ("annual", "26"),
        ("annual", "+2026"),
        ("semiannual", "2026-S1"),
    ],
)
def test_keys_of_the_wrong_shape_are_malformed(frequency: str, key: str) -> None:
    refused(lambda: period_bounds(frequency, key, "UTC"), MalformedPeriodKeyError, repr(key))


@pytest.mark.parametrize(
    ("frequency", "key", "why"),
    [
        ("quarterly", "2026-Q5", "Q1-Q4"),
        ("quarterly", "2026-Q0", "Q1-Q4"),
        ("semiannual", "2026-H3", "H1-H2"),
        ("monthly", "2026-13", "01-12"),
        ("monthly", "2026-00", "01-12"),
        ("weekly", "2026-W54", "W01-W53"),
        ("weekly", "2025-W53", "W01-W52"),  # 2025 has 52 ISO weeks
        ("weekly", "2026-W00", "W01-W53"),
        ("fortnightly", "2026-W02", "even"),
        ("fortnightly", "2025-W53", "W01-W52"),
        ("daily", "2026-02-30", "not a calendar date"),
        ("daily", "2025-02-29", "not a calendar date"),
        ("daily", "2026-04-31", "not a calendar date"),
    ],
)
def test_near_miss_keys_are_refused_not_repaired(frequency: str, key: str, why: str) -> None:
    refused(lambda: period_bounds(frequency, key, "UTC"), MalformedPeriodKeyError, repr(key), why)
    refused(
        lambda: due_date_for(frequency, key, "UTC", "period_start", 0),
        MalformedPeriodKeyError,
        repr(key),
    )


def test_a_key_of_another_frequency_is_malformed() -> None:
    refused(lambda: period_bounds("monthly", "2026-Q3", "UTC"), MalformedPeriodKeyError, "YYYY-MM")


def test_non_string_key_is_malformed() -> None:
    refused(lambda: period_bounds("annual", 2026, "UTC"), MalformedPeriodKeyError, "2026")  # type: ignore[arg-type]


# --- years outside 1583-9999 ---


@pytest.mark.parametrize(
    ("frequency", "key"),
    [("daily", "1582-12-31"), ("annual", "0000"), ("weekly", "1582-W52"), ("monthly", "1000-01")],
)
def test_keys_outside_1583_9999_are_refused(frequency: str, key: str) -> None:
    refused(
        lambda: period_bounds(frequency, key, "UTC"), YearOutOfRangeError, repr(key), "1583-9999"
    )


def test_an_instant_whose_local_date_is_1582_is_refused() -> None:
    instant = datetime(1583, 1, 1, 5, tzinfo=UTC)  # still 1582 in Los Angeles
    assert period_key_for("daily", instant, "UTC") == "1583-01-01"
    refused(
        lambda: period_key_for("daily", instant, "America/Los_Angeles"),
        YearOutOfRangeError,
        "1582",
        "1583-9999",
    )


def test_an_instant_whose_local_date_would_be_10000_is_refused() -> None:
    instant = datetime(9999, 12, 31, 12, tzinfo=UTC)  # already 10000 in Kiritimati (+14)
    refused(
        lambda: period_key_for("daily", instant, "Pacific/Kiritimati"),
        YearOutOfRangeError,
        "Pacific/Kiritimati",
        "1583-9999",
    )


def test_instants_at_the_datetime_limits_are_refused() -> None:
    refused(
        lambda: period_key_for("daily", datetime.min.replace(tzinfo=UTC), "UTC"),
        YearOutOfRangeError,
    )
    late = datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))
    refused(lambda: periods_between("daily", NOON, late, "UTC"), YearOutOfRangeError)


def test_days_outside_1583_9999_are_refused() -> None:
    refused(lambda: start_of_day(date(1582, 12, 31), "UTC"), YearOutOfRangeError, "1582")
    refused(lambda: visible_from_for(date(1, 1, 1), 0), YearOutOfRangeError, "0001-01-01")


def test_visible_from_leaving_the_range_is_refused() -> None:
    refused(lambda: visible_from_for(date(1583, 1, 3), 3), YearOutOfRangeError, "1583-01-03")
    refused(lambda: visible_from_for(date(9999, 12, 30), -2), YearOutOfRangeError, "-2")
    refused(lambda: visible_from_for(date(2026, 1, 1), 10**30), YearOutOfRangeError)


# --- zones ---


@pytest.mark.parametrize(
    "name",
    [
        "Mars/Olympus_Mons",
        "",
        "utc",
        "europe/berlin",
        "Europe/Berlin ",
        "../../etc/passwd",
        "/usr/share/zoneinfo/UTC",
        "Europe/../UTC",
        "Europe//Berlin",
        "Europe",
        "zone.tab",
        "tzdata.zi",
        "__init__.py",
        "EST5EDT\x00",
        "+05:00",
    ],
)
def test_unknown_zone_names_are_refused(name: str) -> None:
    refused(lambda: period_key_for("daily", NOON, name), UnknownTimezoneError, repr(name))
    refused(lambda: zone(name), UnknownTimezoneError, repr(name), "IANA")


@pytest.mark.parametrize("name", [None, 0, b"UTC", ["UTC"], {"UTC": 1}])
def test_non_string_zones_are_refused(name: object) -> None:
    refused(lambda: zone(name), UnknownTimezoneError, repr(name))  # type: ignore[arg-type]


def test_due_date_for_validates_the_zone_although_it_does_not_use_it() -> None:
    refused(
        lambda: due_date_for("monthly", "2026-08", "Nowhere/City", "period_start", 0),
        UnknownTimezoneError,
        "'Nowhere/City'",
    )


# --- frequencies and anchors ---


@pytest.mark.parametrize("frequency", ["hourly", "Daily", "biweekly", "", None, 7])
def test_unknown_frequencies_are_refused(frequency: object) -> None:
    error = refused(
        lambda: period_key_for(frequency, NOON, "UTC"),  # type: ignore[arg-type]
        UnknownFrequencyError,
        repr(frequency),
        "daily, weekly, fortnightly, monthly, quarterly, semiannual, annual",
    )
    assert str(error).startswith("unknown frequency")


def test_every_entry_point_checks_the_frequency() -> None:
    for call in (
        lambda: period_bounds("hourly", "2026", "UTC"),
        lambda: due_date_for("hourly", "2026", "UTC", "period_start", 0),
        lambda: periods_between("hourly", NOON, NOON, "UTC"),
    ):
        refused(call, UnknownFrequencyError, "'hourly'")


@pytest.mark.parametrize("anchor", ["start", "period_middle", "PERIOD_END", None])
def test_unknown_anchors_are_refused(anchor: object) -> None:
    refused(
        lambda: due_date_for("monthly", "2026-08", "UTC", anchor, 0),  # type: ignore[arg-type]
        UnknownAnchorError,
        repr(anchor),
        "'period_start', 'period_end', 'after_period_end'",
    )


# --- instants ---


def test_naive_datetimes_are_refused_everywhere() -> None:
    for call in (
        lambda: period_key_for("daily", NAIVE, "UTC"),
        lambda: periods_between("daily", NAIVE, NOON, "UTC"),
        lambda: periods_between("daily", NOON, NAIVE, "UTC"),
        lambda: local_date(NAIVE, "UTC"),
    ):
        refused(call, NaiveDatetimeError, repr(NAIVE), "aware")


@pytest.mark.parametrize("value", [date(2026, 8, 21), "2026-08-21T12:00:00Z", 1_787_313_600, None])
def test_non_datetimes_are_refused_as_instants(value: object) -> None:
    refused(
        lambda: period_key_for("daily", value, "UTC"),  # type: ignore[arg-type]
        NaiveDatetimeError,
        repr(value),
    )


def test_datetimes_are_refused_as_calendar_days() -> None:
    refused(lambda: start_of_day(NOON, "UTC"), InvalidDateError, repr(NOON))
    refused(lambda: visible_from_for(NOON, 7), InvalidDateError, repr(NOON))
    refused(lambda: visible_from_for("2026-08-21", 7), InvalidDateError, "'2026-08-21'")  # type: ignore[arg-type]


# --- day counts ---


@pytest.mark.parametrize("count", [True, False, 1.0, 7.5, "7", None, 2**0.5])
def test_non_integer_and_boolean_day_counts_are_refused(count: object) -> None:
    refused(
        lambda: due_date_for("monthly", "2026-08", "UTC", "period_start", count),  # type: ignore[arg-type]
        InvalidDayCountError,
        "due_offset_days",
        repr(count),
        "int",
    )
    refused(
        lambda: visible_from_for(date(2026, 8, 21), count),  # type: ignore[arg-type]
        InvalidDayCountError,
        "lead_days",
        repr(count),
    )


@pytest.mark.parametrize("count", [True, 3.0, "3"])
def test_check_day_count_names_the_field_and_the_value(count: object) -> None:
    refused(
        lambda: check_day_count(count, "lead_days"), InvalidDayCountError, "lead_days", repr(count)
    )


@pytest.mark.parametrize("count", [0, 7, -3, 10**12])
def test_check_day_count_passes_plain_ints_through(count: int) -> None:
    assert check_day_count(count, "lead_days") == count


def test_every_refusal_is_a_period_error_and_a_value_error() -> None:
    for error in (
        UnknownFrequencyError,
        UnknownTimezoneError,
        NaiveDatetimeError,
        InvalidDayCountError,
        UnknownAnchorError,
        MalformedPeriodKeyError,
        YearOutOfRangeError,
        InvalidDateError,
    ):
        assert issubclass(error, PeriodError)
        assert issubclass(error, ValueError)
