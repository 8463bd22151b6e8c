"""Named clock hazards, each pinned to a real zone and date from tzdata 2026.6."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from dispatch_fn.engine import period_bounds, period_key_for, periods_between, start_of_day


def utc(  # noqa: PLR0917 - mirrors datetime's own positional fields
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def hours(bounds_start: datetime, bounds_end: datetime) -> float:
    return (bounds_end - bounds_start) / timedelta(hours=1)


# --- Europe/Berlin: the ordinary spring-forward and fall-back, not at midnight ---


def test_berlin_spring_forward_day_is_23_hours_from_midnight_to_midnight() -> None:
    bounds = period_bounds("daily", "2026-03-29", "Europe/Berlin")
    assert bounds.start == utc(2026, 3, 28, 23)  # 00:00 CET
    assert bounds.end == utc(2026, 3, 29, 22)  # 00:00 CEST
    assert hours(*bounds) == 23


def test_berlin_non_existent_0230_does_not_disturb_the_day_key() -> None:
    # 02:00-03:00 local does not exist; 01:30 UTC is 03:30 CEST.
    assert period_key_for("daily", utc(2026, 3, 29, 0, 59, 59), "Europe/Berlin") == "2026-03-29"
    assert period_key_for("daily", utc(2026, 3, 29, 1, 30), "Europe/Berlin") == "2026-03-29"


def test_berlin_fall_back_day_is_25_hours() -> None:
    bounds = period_bounds("daily", "2026-10-25", "Europe/Berlin")
    assert bounds.start == utc(2026, 10, 24, 22)  # 00:00 CEST
    assert bounds.end == utc(2026, 10, 25, 23)  # 00:00 CET
    assert hours(*bounds) == 25


def test_berlin_both_occurrences_of_0230_belong_to_the_same_day() -> None:
    first, second = utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)
    assert period_key_for("daily", first, "Europe/Berlin") == "2026-10-25"
    assert period_key_for("daily", second, "Europe/Berlin") == "2026-10-25"


def test_berlin_month_containing_spring_forward_is_one_hour_short() -> None:
    bounds = period_bounds("monthly", "2026-03", "Europe/Berlin")
    assert bounds.start == utc(2026, 2, 28, 23)
    assert bounds.end == utc(2026, 3, 31, 22)
    assert hours(*bounds) == 31 * 24 - 1


# --- America/Santiago 2026-09-06: local midnight does not exist ---


def test_santiago_day_starts_at_first_instant_after_the_midnight_gap() -> None:
    bounds = period_bounds("daily", "2026-09-06", "America/Santiago")
    # Clocks jump from 24:00 -04 on the 5th to 01:00 -03 on the 6th.
    assert bounds.start == utc(2026, 9, 6, 4)
    assert (bounds.start.hour, bounds.start.minute) == (1, 0)
    assert bounds.start.utcoffset() == timedelta(hours=-3)
    assert hours(*bounds) == 23


def test_santiago_first_instant_after_the_gap_is_keyed_the_6th() -> None:
    start = period_bounds("daily", "2026-09-06", "America/Santiago").start
    assert period_key_for("daily", start, "America/Santiago") == "2026-09-06"
    assert period_key_for("daily", start - timedelta(microseconds=1), "America/Santiago") == (
        "2026-09-05"
    )


def test_santiago_previous_day_ends_where_the_6th_starts() -> None:
    before = period_bounds("daily", "2026-09-05", "America/Santiago")
    after = period_bounds("daily", "2026-09-06", "America/Santiago")
    assert before.end == after.start
    assert hours(*before) == 24


def test_santiago_week_containing_the_gap_starts_on_monday_midnight() -> None:
    bounds = period_bounds("weekly", "2026-W36", "America/Santiago")
    assert bounds.start == utc(2026, 8, 31, 4)  # Monday 00:00 -04
    assert bounds.end == utc(2026, 9, 7, 3)  # Monday 00:00 -03
    assert hours(*bounds) == 7 * 24 - 1


def test_start_of_day_applies_the_same_rule_as_period_starts() -> None:
    assert start_of_day(date(2026, 9, 6), "America/Santiago") == utc(2026, 9, 6, 4)


# --- Atlantic/Azores 2026-10-25 and America/Havana 2025-11-02: midnight twice ---
# Both leave DST at 01:00 local, back to 00:00, so midnight is ambiguous. (In
# tzdata 2026.6 Havana keeps -04 through November 2026, so its 2026 fall-back
# no longer exists; older host tz data still has it.)


@pytest.mark.parametrize(
    ("zone", "key", "first_midnight", "offset_hours"),
    [
        ("Atlantic/Azores", "2026-10-25", utc(2026, 10, 25, 0), 0),
        ("America/Havana", "2025-11-02", utc(2025, 11, 2, 4), -4),
    ],
    ids=["azores-2026", "havana-2025"],
)
def test_fall_back_midnight_takes_its_first_occurrence(
    zone: str, key: str, first_midnight: datetime, offset_hours: int
) -> None:
    bounds = period_bounds("daily", key, zone)
    assert bounds.start == first_midnight  # not the second midnight, an hour later
    assert (bounds.start.hour, bounds.start.utcoffset()) == (0, timedelta(hours=offset_hours))
    assert hours(*bounds) == 25


def test_azores_both_midnights_and_the_repeated_hour_are_keyed_the_25th() -> None:
    for instant in (utc(2026, 10, 25, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1)):
        assert period_key_for("daily", instant, "Atlantic/Azores") == "2026-10-25"
    assert period_key_for("daily", utc(2026, 10, 24, 23, 59, 59), "Atlantic/Azores") == (
        "2026-10-24"
    )


def test_azores_previous_day_and_month_end_at_the_first_midnight() -> None:
    assert period_bounds("daily", "2026-10-24", "Atlantic/Azores").end == utc(2026, 10, 25, 0)
    assert period_bounds("weekly", "2026-W43", "Atlantic/Azores").end == utc(2026, 10, 26, 1)


def test_start_of_day_takes_the_first_of_two_midnights() -> None:
    assert start_of_day(date(2026, 10, 25), "Atlantic/Azores") == utc(2026, 10, 25, 0)


# --- America/Toronto 1919-03-31: a gap that straddles midnight ---


def test_toronto_1919_gap_across_midnight_starts_the_day_at_0030() -> None:
    # Clocks jumped from 23:30 EST on the 30th to 00:30 EDT on the 31st.
    bounds = period_bounds("daily", "1919-03-31", "America/Toronto")
    assert bounds.start == utc(1919, 3, 31, 4, 30)
    assert (bounds.start.hour, bounds.start.minute) == (0, 30)
    assert period_bounds("daily", "1919-03-30", "America/Toronto").end == bounds.start


# --- Pacific/Apia 2011-12-30: a whole day skipped ---


def test_apia_skipped_day_is_an_empty_period() -> None:
    bounds = period_bounds("daily", "2011-12-30", "Pacific/Apia")
    assert bounds.start == bounds.end == utc(2011, 12, 30, 10)


def test_apia_days_either_side_of_the_skipped_day_touch() -> None:
    before = period_bounds("daily", "2011-12-29", "Pacific/Apia")
    after = period_bounds("daily", "2011-12-31", "Pacific/Apia")
    assert before.end == after.start == utc(2011, 12, 30, 10)
    assert after.start.utcoffset() == timedelta(hours=14)


def test_apia_no_instant_is_keyed_the_skipped_day() -> None:
    assert period_key_for("daily", utc(2011, 12, 30, 9, 59, 59), "Pacific/Apia") == "2011-12-29"
    assert period_key_for("daily", utc(2011, 12, 30, 10), "Pacific/Apia") == "2011-12-31"


def test_apia_skipped_day_is_left_out_of_periods_between() -> None:
    keys = periods_between("daily", utc(2011, 12, 29), utc(2011, 12, 31, 12), "Pacific/Apia")
    assert keys == ["2011-12-28", "2011-12-29", "2011-12-31", "2012-01-01"]


def test_apia_week_holding_the_skipped_day_is_six_days_long() -> None:
    bounds = period_bounds("weekly", "2011-W52", "Pacific/Apia")
    assert bounds.start == utc(2011, 12, 26, 10)  # Monday 00:00 at -10
    assert bounds.end == utc(2012, 1, 1, 10)  # next Monday 00:00 at +14
    assert hours(*bounds) == 6 * 24


def test_start_of_skipped_day_equals_start_of_next_day() -> None:
    skipped = start_of_day(date(2011, 12, 30), "Pacific/Apia")
    assert skipped == start_of_day(date(2011, 12, 31), "Pacific/Apia")


# --- Offsets that are not whole hours ---


@pytest.mark.parametrize(
    ("key", "length_hours"),
    [("2026-04-05", 24.5), ("2026-10-04", 23.5), ("2026-07-01", 24)],
    ids=["dst-ends-half-hour-back", "dst-starts-half-hour-on", "ordinary-day"],
)
def test_lord_howe_half_hour_dst_changes_day_length_by_30_minutes(
    key: str, length_hours: float
) -> None:
    assert hours(*period_bounds("daily", key, "Australia/Lord_Howe")) == length_hours


def test_lord_howe_day_starts_at_local_midnight_on_either_offset() -> None:
    bounds = period_bounds("daily", "2026-04-05", "Australia/Lord_Howe")
    assert bounds.start == utc(2026, 4, 4, 13)  # 00:00 +11
    assert bounds.end == utc(2026, 4, 5, 13, 30)  # 00:00 +10:30


def test_kathmandu_quarter_hour_offset_moves_the_day_boundary() -> None:
    assert period_key_for("daily", utc(2026, 8, 20, 18, 14, 59), "Asia/Kathmandu") == "2026-08-20"
    assert period_key_for("daily", utc(2026, 8, 20, 18, 15), "Asia/Kathmandu") == "2026-08-21"
    bounds = period_bounds("daily", "2026-08-21", "Asia/Kathmandu")
    assert bounds.start == utc(2026, 8, 20, 18, 15)
    assert bounds.start.utcoffset() == timedelta(hours=5, minutes=45)


# --- America/St_Johns 1990-10-28: clocks went back across midnight ---


def test_st_johns_1990_repeated_hour_keeps_its_calendar_day_after_that_days_end() -> None:
    """Where the local date runs backwards, key and bounds cannot both hold (ADR 0001).

    At 00:01 NDT clocks went back to 23:01 NST, so 23:01-23:59 on the 27th was
    lived twice. The 28th starts at the first midnight (02:30Z); the repeat
    still shows the 27th, so it keeps the 27th's key while lying after the
    27th's end.
    """
    zone = "America/St_Johns"
    assert start_of_day(date(1990, 10, 28), zone) == utc(1990, 10, 28, 2, 30)
    repeated = utc(1990, 10, 28, 3)  # 23:31 NST on the 27th, second time round
    assert period_key_for("daily", repeated, zone) == "1990-10-27"
    assert period_bounds("daily", "1990-10-27", zone).end <= repeated
    assert periods_between("daily", utc(1990, 10, 28, 2, 30, 30), repeated, zone) == ["1990-10-28"]
