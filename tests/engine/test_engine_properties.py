"""Rules that hold for every frequency, zone and instant (hypothesis)."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dispatch_fn.engine import (
    FREQUENCIES,
    PeriodBounds,
    due_date_for,
    local_date,
    period_bounds,
    period_key_for,
    periods_between,
)
from dispatch_fn.errors import YearOutOfRangeError

ZONES = (
    "UTC",
    "Europe/Berlin",
    "Europe/London",
    "Europe/Dublin",  # negative DST in winter since 1971
    "Europe/Lisbon",
    "Europe/Moscow",
    "Europe/Istanbul",
    "Atlantic/Azores",  # fall-back midnight every October
    "America/Santiago",  # spring-forward midnight every September
    "America/Havana",
    "America/Asuncion",
    "America/St_Johns",  # went back across midnight 1987-2010
    "America/New_York",
    "America/Los_Angeles",
    "America/Sao_Paulo",
    "America/Mexico_City",
    "America/Caracas",
    "America/Toronto",  # 1919 gap straddling midnight
    "America/Sitka",  # 1867: the date line moved, a day was lived twice
    "America/Nuuk",
    "America/Scoresbysund",
    "Pacific/Apia",  # 2011-12-30 skipped
    "Pacific/Kiritimati",  # +14, 1994-12-31 skipped
    "Pacific/Chatham",  # +12:45 / +13:45
    "Pacific/Honolulu",
    "Pacific/Kwajalein",  # 1993-08-21 skipped
    "Pacific/Tongatapu",
    "Pacific/Pago_Pago",  # -11, 1892-07-04 lived twice
    "Australia/Lord_Howe",  # 30-minute DST
    "Australia/Sydney",
    "Australia/Adelaide",
    "Asia/Kathmandu",  # +05:45
    "Asia/Kolkata",
    "Asia/Shanghai",
    "Asia/Tokyo",
    "Asia/Tehran",
    "Asia/Manila",  # 1844-12-31 skipped
    "Asia/Gaza",
    "Asia/Beirut",
    "Africa/Casablanca",  # DST suspended each Ramadan
    "Africa/Cairo",
    "Antarctica/Troll",  # two-hour DST
    "Antarctica/Casey",
)

# Days on which a zone's clocks do something to midnight, probed densely.
HAZARD_DAYS = (
    ("Europe/Berlin", date(2026, 3, 29)),
    ("Europe/Berlin", date(2026, 10, 25)),
    ("America/Santiago", date(2026, 9, 6)),
    ("Atlantic/Azores", date(2026, 10, 25)),
    ("America/Havana", date(2025, 11, 2)),
    ("Pacific/Apia", date(2011, 12, 30)),
    ("Pacific/Apia", date(1892, 7, 4)),
    ("America/St_Johns", date(1990, 10, 28)),
    ("America/Toronto", date(1919, 3, 31)),
    ("America/Sitka", date(1867, 10, 18)),
    ("Pacific/Kwajalein", date(1993, 8, 21)),
    ("Asia/Manila", date(1844, 12, 31)),
    ("Pacific/Kiritimati", date(1994, 12, 31)),
    ("Australia/Lord_Howe", date(2026, 4, 5)),
    ("Australia/Lord_Howe", date(2026, 10, 4)),
    ("Asia/Kathmandu", date(1986, 1, 1)),
    ("Antarctica/Casey", date(2010, 3, 5)),
)

PROPERTY = settings(max_examples=1000, deadline=None)

_recent = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 12, 31))
# Capped before the weeks that run into year 10000 (tested at the edges instead).
LATEST = datetime(9999, 12, 20, tzinfo=UTC)
_anywhen = st.datetimes(min_value=datetime(1600, 1, 1), max_value=LATEST.replace(tzinfo=None))
instants = st.one_of(_recent, _recent, _anywhen).map(lambda naive: naive.replace(tzinfo=UTC))
frequencies = st.sampled_from(FREQUENCIES)
zones = st.sampled_from(ZONES)


@st.composite
def hazard_instants(draw: st.DrawFn) -> tuple[str, datetime]:
    """An instant within 36 hours of a hazardous local midnight, and its zone."""
    zone, day = draw(st.sampled_from(HAZARD_DAYS))
    seconds = draw(st.integers(min_value=-36 * 3600, max_value=36 * 3600))
    return zone, datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(seconds=seconds)


cases = st.one_of(
    st.tuples(zones, instants),
    hazard_instants(),
)


def last_day(frequency: str, key: str) -> date:
    return due_date_for(frequency, key, "UTC", "period_end", 0)


def key_of_day(frequency: str, day: date) -> str:
    """A day's key: keys are calendar-only, so any instant showing that day will do."""
    return period_key_for(frequency, datetime(day.year, day.month, day.day, 12, tzinfo=UTC), "UTC")


def bounds_or_none(frequency: str, key: str, zone: str) -> PeriodBounds | None:
    """Bounds, or None for a period ending on 9999-12-31, whose end is refused."""
    if last_day(frequency, key) == date(9999, 12, 31):
        try:
            period_bounds(frequency, key, zone)
        except YearOutOfRangeError:
            return None
        raise AssertionError(f"bounds of {key!r} should be refused")
    return period_bounds(frequency, key, zone)


def keyed_period(frequency: str, zone: str, instant: datetime) -> tuple[str, PeriodBounds]:
    """The key of ``instant`` and its bounds.

    Examples in a period ending 9999-12-31 are discarded: those bounds are
    refused, which ``bounds_or_none`` itself checks.
    """
    key = period_key_for(frequency, instant, zone)
    bounds = bounds_or_none(frequency, key, zone)
    assume(bounds is not None)
    assert bounds is not None  # for the type checker; assume() already discarded None
    return key, bounds


def date_ran_backwards(instant: datetime, zone: str) -> bool:
    """Whether some instant in the previous 26 hours showed a later local date.

    Only there (America/St_Johns 1987-2010, Alaska 1867) can an instant's
    calendar-day key and the half-open partition disagree (ADR 0001).
    """
    today = local_date(instant, zone)
    return any(
        local_date(instant - timedelta(minutes=minutes), zone) > today
        for minutes in range(1, 26 * 60 + 1)
    )


@PROPERTY
@given(frequencies, cases)
def test_key_of_an_instant_names_a_period_whose_bounds_contain_it(
    frequency: str, case: tuple[str, datetime]
) -> None:
    zone, instant = case
    _, bounds = keyed_period(frequency, zone, instant)
    if not bounds.start <= instant < bounds.end:
        assert bounds.end <= instant
        assert date_ran_backwards(instant, zone)


@PROPERTY
@given(frequencies, cases)
def test_bounds_tile_each_end_is_the_next_start(frequency: str, case: tuple[str, datetime]) -> None:
    zone, instant = case
    key, bounds = keyed_period(frequency, zone, instant)
    try:
        following = key_of_day(frequency, last_day(frequency, key) + timedelta(days=1))
    except YearOutOfRangeError:
        return  # the next week runs into year 10000
    following_bounds = bounds_or_none(frequency, following, zone)
    if following_bounds is not None:
        assert bounds.end == following_bounds.start
    assert bounds.start <= bounds.end


@PROPERTY
@given(frequencies, cases)
def test_start_of_every_non_empty_period_is_keyed_that_period(
    frequency: str, case: tuple[str, datetime]
) -> None:
    zone, instant = case
    key, bounds = keyed_period(frequency, zone, instant)
    assert bounds.start < bounds.end  # it holds ``instant``, so it is not empty
    assert period_key_for(frequency, bounds.start, zone) == key


@PROPERTY
@given(st.sampled_from(HAZARD_DAYS), st.integers(min_value=-3, max_value=3))
def test_daily_periods_near_hazards_are_empty_only_when_no_instant_shows_the_day(
    hazard: tuple[str, date], shift: int
) -> None:
    zone, day = hazard
    key = (day + timedelta(days=shift)).isoformat()
    bounds = period_bounds("daily", key, zone)
    if bounds.start == bounds.end:
        # Skipped: the instant just before shows an earlier day, the one at
        # the boundary a later one.
        assert local_date(bounds.start - timedelta(microseconds=1), zone).isoformat() < key
        assert local_date(bounds.start, zone).isoformat() > key
    else:
        assert period_key_for("daily", bounds.start, zone) == key


@PROPERTY
@given(frequencies, cases, st.integers(min_value=0, max_value=800 * 86400))
def test_periods_between_is_ascending_contiguous_and_agrees_at_both_ends(
    frequency: str, case: tuple[str, datetime], seconds: int
) -> None:
    zone, start = case
    room = max(0.0, (LATEST - start).total_seconds())
    end = start + timedelta(seconds=min(seconds, room))
    try:
        keys = periods_between(frequency, start, end, zone)
        last_key = period_key_for(frequency, end, zone)
    except YearOutOfRangeError:
        return  # ``end`` ran past the supported weeks of 9999
    first_key = period_key_for(frequency, start, zone)
    assert keys == sorted(set(keys))
    assert keys[0] == first_key
    if local_date(end, zone) < local_date(start, zone):
        assert keys == [first_key]  # clocks went back over midnight between them
        return
    assert keys[-1] == last_key
    for earlier, later in itertools.pairwise(keys):
        earlier_bounds = bounds_or_none(frequency, earlier, zone)
        later_bounds = bounds_or_none(frequency, later, zone)
        assert earlier_bounds is not None
        if later_bounds is None:
            break  # the period ending 9999-12-31 has no bounds to compare
        assert earlier_bounds.start < earlier_bounds.end
        # Contiguous: only empty periods (skipped days) may lie between.
        assert earlier_bounds.end == later_bounds.start


@PROPERTY
@given(
    frequencies,
    cases,
    st.sampled_from(("period_start", "period_end")),
    st.integers(min_value=-400, max_value=400),
)
def test_every_due_date_lies_inside_its_period(
    frequency: str, case: tuple[str, datetime], anchor: str, offset: int
) -> None:
    zone, instant = case
    key = period_key_for(frequency, instant, zone)
    first = due_date_for(frequency, key, zone, "period_start", 0)
    last = due_date_for(frequency, key, zone, "period_end", 0)
    due = due_date_for(frequency, key, zone, anchor, offset)
    assert first <= due <= last
    assert key_of_day(frequency, due) == key
    unclamped = (first if anchor == "period_start" else last).toordinal() + offset
    if first.toordinal() <= unclamped <= last.toordinal():
        assert due.toordinal() == unclamped
