"""Key spellings, ISO week-years, fortnights and the 1583-9999 edges."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from dispatch_fn.engine import (
    FREQUENCIES,
    PeriodBounds,
    due_date_for,
    period_bounds,
    period_key_for,
    periods_between,
    zone,
)
from dispatch_fn.errors import YearOutOfRangeError


def noon(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 12, tzinfo=UTC)


def test_frequencies_are_exactly_the_seven_in_spec_order() -> None:
    assert FREQUENCIES == (
        "daily",
        "weekly",
        "fortnightly",
        "monthly",
        "quarterly",
        "semiannual",
        "annual",
    )


@pytest.mark.parametrize(
    ("frequency", "key"),
    [
        ("daily", "2026-08-21"),
        ("weekly", "2026-W34"),
        ("fortnightly", "2026-W33"),
        ("monthly", "2026-08"),
        ("quarterly", "2026-Q3"),
        ("semiannual", "2026-H2"),
        ("annual", "2026"),
    ],
)
def test_key_spelling_for_2026_08_21(frequency: str, key: str) -> None:
    assert period_key_for(frequency, noon(2026, 8, 21), "UTC") == key
    assert len(key) <= 16


@pytest.mark.parametrize(
    ("day", "key"),
    [
        (date(2027, 1, 1), "2026-W53"),
        (date(2021, 1, 3), "2020-W53"),
        (date(2026, 1, 1), "2026-W01"),
        (date(2024, 12, 30), "2025-W01"),
        (date(2026, 12, 28), "2026-W53"),
        (date(2027, 1, 4), "2027-W01"),
    ],
)
def test_weekly_keys_use_the_iso_week_year(day: date, key: str) -> None:
    assert period_key_for("weekly", noon(day.year, day.month, day.day), "UTC") == key


def test_iso_week_starts_monday_and_lasts_seven_days() -> None:
    bounds = period_bounds("weekly", "2026-W53", "UTC")
    assert bounds == PeriodBounds(
        noon(2026, 12, 28) - timedelta(hours=12), noon(2027, 1, 4) - timedelta(hours=12)
    )
    assert bounds.start.weekday() == 0


@pytest.mark.parametrize(
    ("day", "key"),
    [
        (date(2026, 1, 1), "2026-W01"),  # W01 always starts a fortnight
        (date(2026, 1, 11), "2026-W01"),  # Sunday of W02 belongs to W01's fortnight
        (date(2026, 1, 12), "2026-W03"),
        (date(2026, 12, 27), "2026-W51"),  # Sunday of W52
        (date(2026, 12, 28), "2026-W53"),  # 53-week year: W53 stands alone
        (date(2027, 1, 3), "2026-W53"),
        (date(2027, 1, 4), "2027-W01"),
        (date(2025, 12, 28), "2025-W51"),  # 52-week year: W51+W52
    ],
)
def test_fortnights_start_on_odd_iso_weeks(day: date, key: str) -> None:
    assert period_key_for("fortnightly", noon(day.year, day.month, day.day), "UTC") == key


def test_fortnight_w53_is_one_week() -> None:
    bounds = period_bounds("fortnightly", "2026-W53", "UTC")
    assert bounds.end - bounds.start == timedelta(days=7)
    assert bounds.end == period_bounds("fortnightly", "2027-W01", "UTC").start


def test_ordinary_fortnight_is_two_weeks_and_ends_where_the_next_starts() -> None:
    bounds = period_bounds("fortnightly", "2026-W51", "UTC")
    assert bounds.end - bounds.start == timedelta(days=14)
    assert bounds.end == period_bounds("fortnightly", "2026-W53", "UTC").start


@pytest.mark.parametrize(
    ("frequency", "key", "first", "last"),
    [
        ("monthly", "2024-02", date(2024, 2, 1), date(2024, 2, 29)),
        ("quarterly", "2026-Q1", date(2026, 1, 1), date(2026, 3, 31)),
        ("quarterly", "2026-Q4", date(2026, 10, 1), date(2026, 12, 31)),
        ("semiannual", "2026-H1", date(2026, 1, 1), date(2026, 6, 30)),
        ("semiannual", "2026-H2", date(2026, 7, 1), date(2026, 12, 31)),
        ("annual", "2026", date(2026, 1, 1), date(2026, 12, 31)),
    ],
)
def test_month_based_periods_cover_whole_months(
    frequency: str, key: str, first: date, last: date
) -> None:
    assert due_date_for(frequency, key, "UTC", "period_start", 0) == first
    assert due_date_for(frequency, key, "UTC", "period_end", 0) == last
    bounds = period_bounds(frequency, key, "UTC")
    assert bounds.start.date() == first
    assert bounds.end.date() == last + timedelta(days=1)


def test_keys_sort_chronologically_within_a_frequency() -> None:
    for frequency in FREQUENCIES:
        keys = periods_between(frequency, noon(1999, 6, 1), noon(2031, 6, 1), "UTC")
        assert keys == sorted(keys)


def test_periods_between_is_inclusive_at_both_ends() -> None:
    keys = periods_between("monthly", noon(2026, 1, 31), noon(2026, 4, 1), "Asia/Shanghai")
    assert keys == ["2026-01", "2026-02", "2026-03", "2026-04"]


def test_periods_between_with_end_before_start_is_empty() -> None:
    assert periods_between("daily", noon(2026, 4, 2), noon(2026, 4, 1), "UTC") == []


def test_periods_between_the_same_instant_is_its_own_period() -> None:
    assert periods_between("quarterly", noon(2026, 8, 21), noon(2026, 8, 21), "UTC") == ["2026-Q3"]


def test_periods_between_compares_instants_not_wall_times() -> None:
    start = datetime(2026, 4, 2, 1, tzinfo=UTC)  # wall clock reads 01:00 on the 2nd
    end = datetime(2026, 4, 1, 23, 30, tzinfo=timezone(timedelta(hours=-7)))  # 06:30Z on the 2nd
    assert periods_between("daily", start, end, "America/Los_Angeles") == ["2026-04-01"]


def test_periods_between_orders_repeated_wall_times_by_instant() -> None:
    azores = zone("Atlantic/Azores")
    second_0030 = datetime(2026, 10, 25, 0, 30, fold=1, tzinfo=azores)  # 01:30Z
    first_0045 = datetime(2026, 10, 25, 0, 45, fold=0, tzinfo=azores)  # 00:45Z
    assert periods_between("daily", second_0030, first_0045, "Atlantic/Azores") == []
    assert periods_between("daily", first_0045, second_0030, "Atlantic/Azores") == ["2026-10-25"]


def test_periods_between_a_13_month_daily_window_has_every_day_once() -> None:
    keys = periods_between("daily", noon(2026, 1, 15), noon(2027, 2, 14), "Europe/Berlin")
    assert len(keys) == len(set(keys)) == 396
    assert keys[0] == "2026-01-15"
    assert keys[-1] == "2027-02-14"


# --- the 1583-9999 edges ---


def test_first_supported_day_is_1583_01_01() -> None:
    assert period_key_for("daily", noon(1583, 1, 1), "UTC") == "1583-01-01"
    assert period_bounds("daily", "1583-01-01", "UTC").start == datetime(1583, 1, 1, tzinfo=UTC)


def test_first_supported_day_starts_in_1582_utc_east_of_greenwich() -> None:
    # Reading local 1583-01-01 is allowed; the instant itself is 1582 in UTC.
    bounds = period_bounds("annual", "1583", "Asia/Tokyo")
    assert bounds.start.year == 1583
    assert bounds.start.astimezone(UTC).year == 1582


def test_days_before_the_first_iso_week_of_1583_are_refused_for_weekly() -> None:
    # 1583-01-01 is a Saturday, so its ISO week belongs to week-year 1582.
    with pytest.raises(YearOutOfRangeError, match="1582"):
        period_key_for("weekly", noon(1583, 1, 1), "UTC")
    assert period_key_for("weekly", noon(1583, 1, 3), "UTC") == "1583-W01"
    assert period_key_for("fortnightly", noon(1583, 1, 3), "UTC") == "1583-W01"


@pytest.mark.parametrize(
    ("frequency", "key"),
    [
        ("daily", "9999-12-31"),
        ("monthly", "9999-12"),
        ("quarterly", "9999-Q4"),
        ("semiannual", "9999-H2"),
        ("annual", "9999"),
    ],
)
def test_last_periods_have_keys_and_due_dates_but_no_bounds(frequency: str, key: str) -> None:
    """Their end would be the start of 10000-01-01, which is refused, not invented."""
    assert period_key_for(frequency, noon(9999, 12, 31), "UTC") == key
    assert due_date_for(frequency, key, "UTC", "period_end", 0) == date(9999, 12, 31)
    with pytest.raises(YearOutOfRangeError, match="10000"):
        period_bounds(frequency, key, "UTC")


def test_last_complete_day_still_has_bounds() -> None:
    bounds = period_bounds("daily", "9999-12-30", "Pacific/Kiritimati")
    assert bounds.end.astimezone(UTC) == datetime(9999, 12, 30, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("frequency", "key"), [("weekly", "9999-W52"), ("fortnightly", "9999-W51")]
)
def test_weeks_running_into_10000_are_refused_everywhere(frequency: str, key: str) -> None:
    with pytest.raises(YearOutOfRangeError, match=key):
        period_key_for(frequency, noon(9999, 12, 31), "UTC")
    with pytest.raises(YearOutOfRangeError, match=key):
        due_date_for(frequency, key, "UTC", "period_start", 0)
    with pytest.raises(YearOutOfRangeError, match=key):
        period_bounds(frequency, key, "UTC")


def test_periods_between_reaches_the_last_supported_day() -> None:
    keys = periods_between("daily", noon(9999, 12, 29), noon(9999, 12, 31), "UTC")
    assert keys == ["9999-12-29", "9999-12-30", "9999-12-31"]
