"""Due dates after the period, business-day rolls and grace (docs/contract.md#due-dates)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch_fn.engine import (
    FREQUENCIES,
    ROLLS,
    due_date_for,
    is_business_day,
    late_after_for,
    period_days,
    period_key_for,
    start_of_day,
)
from dispatch_fn.errors import (
    InvalidDayCountError,
    OffsetOutOfRangeError,
    PeriodError,
    UnknownHolidayCalendarError,
    UnknownRollError,
    YearOutOfRangeError,
)

CALENDARS = (None, "US", "US-CA", "DE-BY", "GB-SCT", "CN", "SA", "JP", "BR", "IN")


def after(frequency: str, key: str, months: int, days: int, **rest: Any) -> date:
    return due_date_for(
        frequency, key, "UTC", "after_period_end", days, due_offset_months=months, **rest
    )


# --- after_period_end ---


@pytest.mark.parametrize(
    ("frequency", "key", "months", "days", "due"),
    [
        # The three shapes docs/contract.md#due-dates names.
        ("quarterly", "2026-Q3", 0, 20, date(2026, 10, 20)),
        ("monthly", "2026-08", 0, 15, date(2026, 9, 15)),
        ("annual", "2026", 4, 0, date(2027, 4, 30)),
        # Month-end stays month-end, whatever the target month's length.
        ("monthly", "2026-02", 1, 0, date(2026, 3, 31)),
        ("monthly", "2026-01", 1, 0, date(2026, 2, 28)),
        ("monthly", "2024-02", 12, 0, date(2025, 2, 28)),
        ("annual", "2023", 14, 0, date(2025, 2, 28)),
        ("daily", "2024-02-29", 12, 0, date(2025, 2, 28)),
        ("weekly", "2027-W04", 1, 0, date(2027, 2, 28)),  # ends Sunday 2027-01-31
        # Any other day keeps its day of the month, clamped to the month.
        ("daily", "2024-01-30", 1, 0, date(2024, 2, 29)),
        ("daily", "2024-02-28", 12, 0, date(2025, 2, 28)),
        ("weekly", "2026-W05", 1, 0, date(2026, 3, 1)),  # ends Sunday 2026-02-01
        ("fortnightly", "2026-W33", 0, 1, date(2026, 8, 24)),
        ("semiannual", "2026-H1", 2, 10, date(2026, 9, 10)),
        # The bounds of the ranges.
        ("monthly", "2026-08", 24, 366, date(2028, 8, 31) + timedelta(days=366)),
        ("monthly", "2026-08", 0, 0, date(2026, 8, 31)),
    ],
)
def test_after_period_end_moves_months_then_days_from_the_last_day(
    frequency: str, key: str, months: int, days: int, due: date
) -> None:
    assert after(frequency, key, months, days) == due


def test_after_period_end_is_not_clamped_into_the_period() -> None:
    first, last = period_days("monthly", "2026-08")
    due = after("monthly", "2026-08", 0, 15)
    assert not first <= due <= last


def test_a_due_date_past_year_9999_is_refused() -> None:
    with pytest.raises(YearOutOfRangeError, match="9999"):
        after("monthly", "9999-11", 2, 0)


# --- rolls on named dates ---


@pytest.mark.parametrize(
    ("roll", "due"),
    [
        ("none", date(2023, 9, 30)),
        ("following", date(2023, 10, 2)),
        ("preceding", date(2023, 9, 29)),
        ("modified_following", date(2023, 9, 29)),
    ],
)
def test_a_saturday_quarter_end_rolls_onto_a_weekday(roll: str, due: date) -> None:
    assert due_date_for("quarterly", "2023-Q3", "UTC", "period_end", 0, due_roll=roll) == due


def test_2026_12_31_is_a_us_business_day_but_new_year_is_not() -> None:
    assert due_date_for(
        "annual", "2026", "UTC", "period_end", 0, due_roll="following", holiday_calendar="US"
    ) == date(2026, 12, 31)
    # One day after the year: New Year's Day, a Friday, rolls to Monday.
    assert after("annual", "2026", 0, 1, due_roll="following", holiday_calendar="US") == date(
        2027, 1, 4
    )
    assert after("annual", "2026", 0, 1, due_roll="preceding", holiday_calendar="US") == date(
        2026, 12, 31
    )


def test_the_observed_holiday_of_the_us_calendar_counts() -> None:
    # 2028-01-01 is a Saturday; the US observes it on Friday 2027-12-31.
    assert not is_business_day(date(2027, 12, 31), "US")
    assert is_business_day(date(2027, 12, 31))


def test_saudi_arabia_rests_on_friday_and_saturday() -> None:
    friday = date(2026, 7, 31)
    assert is_business_day(friday)
    assert not is_business_day(friday, "SA")
    assert is_business_day(friday + timedelta(days=2), "SA")  # Sunday
    assert due_date_for(
        "monthly", "2026-07", "UTC", "period_end", 0, due_roll="following", holiday_calendar="SA"
    ) == date(2026, 8, 2)
    assert due_date_for("monthly", "2026-07", "UTC", "period_end", 0, due_roll="following") == date(
        2026, 7, 31
    )


def test_modified_following_turns_back_at_a_month_end() -> None:
    # 2026-01-31 is a Saturday; Monday is in February, so Friday the 30th.
    assert due_date_for(
        "monthly", "2026-01", "UTC", "period_end", 0, due_roll="modified_following"
    ) == date(2026, 1, 30)
    # Mid-month it simply follows.
    assert due_date_for(
        "monthly", "2026-01", "UTC", "period_start", 16, due_roll="modified_following"
    ) == date(2026, 1, 19)


def test_a_subdivision_adds_its_own_holidays() -> None:
    epiphany = date(2026, 1, 6)  # a Tuesday: a holiday in Bavaria, not in Berlin
    assert not is_business_day(epiphany, "DE-BY")
    assert is_business_day(epiphany, "DE-BE")
    assert due_date_for(
        "monthly", "2026-01", "UTC", "period_start", 5, due_roll="following",
        holiday_calendar="DE-BY",
    ) == date(2026, 1, 7)  # fmt: skip


def test_a_roll_may_leave_the_period() -> None:
    # The 1st of August 2026 is a Saturday; preceding lands in July.
    assert due_date_for(
        "monthly", "2026-08", "UTC", "period_start", 0, due_roll="preceding"
    ) == date(2026, 7, 31)


def test_a_clamped_date_is_rolled_after_the_clamp() -> None:
    # period_start + 30 in February 2026 clamps to Saturday the 28th, then rolls.
    assert due_date_for(
        "monthly", "2026-02", "UTC", "period_start", 30, due_roll="following"
    ) == date(2026, 3, 2)


def test_feb_29_with_a_month_offset_and_a_roll() -> None:
    # Feb 2024 + 12 months: Friday 2025-02-28, a business day in Britain.
    assert after("monthly", "2024-02", 12, 0, due_roll="following", holiday_calendar="GB-SCT") == (
        date(2025, 2, 28)
    )


# --- grace ---


@pytest.mark.parametrize(
    ("due", "grace", "late"),
    [
        (date(2026, 8, 5), 0, date(2026, 8, 5)),
        (date(2026, 8, 5), 7, date(2026, 8, 12)),
        (date(2026, 1, 28), 7, date(2026, 2, 4)),
        (date(2024, 2, 25), 7, date(2024, 3, 3)),
        (date(2026, 12, 31), 366, date(2028, 1, 1)),
    ],
)
def test_late_after_is_the_due_date_plus_grace_calendar_days(
    due: date, grace: int, late: date
) -> None:
    assert late_after_for(due, grace) == late


# --- refusals ---


@pytest.mark.parametrize(
    ("call", "error", "named"),
    [
        (lambda: due_date_for("monthly", "2026-08", "UTC", "period_start", 0,
                              due_offset_months=1), OffsetOutOfRangeError, "due_offset_months 1"),
        (lambda: due_date_for("monthly", "2026-08", "UTC", "period_end", 0,
                              due_offset_months=-1), OffsetOutOfRangeError, "due_offset_months -1"),
        (lambda: after("monthly", "2026-08", 25, 0), OffsetOutOfRangeError, "25"),
        (lambda: after("monthly", "2026-08", -1, 0), OffsetOutOfRangeError, "-1"),
        (lambda: after("monthly", "2026-08", 0, 367), OffsetOutOfRangeError, "367"),
        (lambda: after("monthly", "2026-08", 0, -1), OffsetOutOfRangeError, "-1"),
        (lambda: after("monthly", "2026-08", True, 0), InvalidDayCountError, "True"),
        (lambda: after("monthly", "2026-08", 1.5, 0), InvalidDayCountError, "1.5"),  # type: ignore[arg-type]
        (lambda: after("monthly", "2026-08", 0, 0, due_roll="next"), UnknownRollError, "'next'"),
        (lambda: after("monthly", "2026-08", 0, 0, due_roll=None), UnknownRollError, "None"),
        (lambda: after("monthly", "2026-08", 0, 0, holiday_calendar="XX"),
         UnknownHolidayCalendarError, "'XX'"),
        (lambda: after("monthly", "2026-08", 0, 0, holiday_calendar="US-ZZ"),
         UnknownHolidayCalendarError, "'US-ZZ'"),
        (lambda: after("monthly", "2026-08", 0, 0, holiday_calendar="us"),
         UnknownHolidayCalendarError, "'us'"),
        (lambda: after("monthly", "2026-08", 0, 0, holiday_calendar=7),
         UnknownHolidayCalendarError, "7"),
        (lambda: late_after_for(date(2026, 8, 5), 367), OffsetOutOfRangeError, "367"),
        (lambda: late_after_for(date(2026, 8, 5), -1), OffsetOutOfRangeError, "-1"),
        (lambda: late_after_for(date(2026, 8, 5), True), InvalidDayCountError, "True"),
        (lambda: late_after_for(date(9999, 12, 30), 2), YearOutOfRangeError, "9999"),
    ],
)  # fmt: skip
def test_out_of_range_and_unknown_values_are_refused_by_name(
    call: Any, error: type[PeriodError], named: str
) -> None:
    with pytest.raises(error) as refused:
        call()
    assert isinstance(refused.value, ValueError)
    assert named in str(refused.value)


def test_a_huge_calendar_value_is_quoted_briefly() -> None:
    with pytest.raises(UnknownHolidayCalendarError) as refused:
        after("monthly", "2026-08", 0, 0, holiday_calendar="X" * 100_000)
    assert len(str(refused.value)) < 400


# --- properties ---

KEYS = st.tuples(st.sampled_from(FREQUENCIES), st.dates(date(1700, 1, 1), date(9990, 12, 31))).map(
    lambda pair: (pair[0], period_key_for(pair[0], start_of_day(pair[1], "UTC"), "UTC"))
)
RULES = st.fixed_dictionaries(
    {
        "due_anchor": st.sampled_from(["period_start", "period_end", "after_period_end"]),
        "days": st.integers(0, 366),
        "months": st.integers(0, 24),
        "holiday_calendar": st.sampled_from(CALENDARS),
    }
)


def _due(key: tuple[str, str], rule: dict[str, Any], roll: str) -> date:
    frequency, period_key = key
    anchor = rule["due_anchor"]
    return due_date_for(
        frequency,
        period_key,
        "UTC",
        anchor,
        rule["days"] if anchor != "period_end" else -rule["days"],
        due_offset_months=rule["months"] if anchor == "after_period_end" else 0,
        due_roll=roll,
        holiday_calendar=rule["holiday_calendar"],
    )


@settings(max_examples=300, deadline=None)
@given(key=KEYS, rule=RULES, roll=st.sampled_from(ROLLS[1:]))
def test_a_rolled_date_is_a_business_day_of_its_calendar(
    key: tuple[str, str], rule: dict[str, Any], roll: str
) -> None:
    assert is_business_day(_due(key, rule, roll), rule["holiday_calendar"])


@settings(max_examples=300, deadline=None)
@given(key=KEYS, rule=RULES)
def test_following_never_moves_back_and_preceding_never_forward(
    key: tuple[str, str], rule: dict[str, Any]
) -> None:
    unrolled = _due(key, rule, "none")
    assert _due(key, rule, "following") >= unrolled
    assert _due(key, rule, "preceding") <= unrolled


@settings(max_examples=300, deadline=None)
@given(key=KEYS, rule=RULES)
def test_modified_following_stays_in_the_month_of_the_unrolled_date(
    key: tuple[str, str], rule: dict[str, Any]
) -> None:
    unrolled = _due(key, rule, "none")
    rolled = _due(key, rule, "modified_following")
    assert (rolled.year, rolled.month) == (unrolled.year, unrolled.month)


@settings(max_examples=300, deadline=None)
@given(key=KEYS, rule=RULES)
def test_after_period_end_dates_are_after_the_period(
    key: tuple[str, str], rule: dict[str, Any]
) -> None:
    _, last = period_days(*key)
    due = _due(key, {**rule, "due_anchor": "after_period_end"}, "none")
    assert due >= last
    assert (due > last) == (rule["days"] > 0 or rule["months"] > 0)


@settings(max_examples=300, deadline=None)
@given(key=KEYS, rule=RULES, roll=st.sampled_from(ROLLS))
def test_due_dates_never_move_back_from_one_period_to_the_next(
    key: tuple[str, str], rule: dict[str, Any], roll: str
) -> None:
    # The next owed day (docs/adr/0012-duty-account.md) rests on this: the
    # period after a duty's candidates becomes owed no later than any after it.
    frequency, period_key = key
    following = period_key_for(
        frequency,
        start_of_day(period_days(frequency, period_key)[1] + timedelta(days=1), "UTC"),
        "UTC",
    )
    assert _due(key, rule, roll) <= _due((frequency, following), rule, roll)
