"""What a run's page statements are told: rolled days, group weights, page sizes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from dispatch_fn.engine import ROLLS, periods
from dispatch_fn.planning import page_plan, plan

NOW = datetime(2026, 3, 14, 9, tzinfo=UTC)
SATURDAY, SUNDAY = 5, 6


@dataclass(frozen=True)
class Rule:
    due_anchor: str
    due_roll: str
    holiday_calendar: str | None = None


@dataclass(frozen=True)
class Group:
    frequency: str | None
    timezone: str
    lead_bucket: int


FIRST_DAYS = st.dates(date(2000, 1, 1), date(2100, 12, 31))


def _weekend_days(first: date, last: date) -> list[date]:
    days = (first + timedelta(days=n) for n in range((last - first).days + 1))
    return [day for day in days if day.weekday() in {SATURDAY, SUNDAY}]


@given(first=FIRST_DAYS, length=st.integers(0, 120), roll=st.sampled_from(ROLLS))
def test_without_a_calendar_every_weekend_day_rolls_to_the_weekdays_either_side(
    first: date, length: int, roll: str
) -> None:
    last = first + timedelta(days=length)
    rolled = page_plan.rolled_days([first], [last], [Rule("period_start", roll)])
    if roll == "none":
        assert rolled == []
        return
    weekend = _weekend_days(first, last)
    assert [each.day for each in rolled] == weekend
    for each in rolled:
        assert each.calendar == ""
        monday = each.day + timedelta(days=7 - each.day.weekday())
        friday = each.day - timedelta(days=each.day.weekday() - 4)
        assert (each.following, each.preceding) == (monday, friday)


@given(first=FIRST_DAYS)
def test_a_due_date_after_the_period_is_rolled_as_far_as_the_engine_lets_it_reach(
    first: date,
) -> None:
    rolled = page_plan.rolled_days([first], [first], [Rule("after_period_end", "following")])
    reach = periods.MAX_MONTHS_AFTER_PERIOD * 31 + periods.MAX_DAYS_AFTER_PERIOD
    last = first + timedelta(days=reach)
    assert [each.day for each in rolled] == _weekend_days(first, last)


def test_no_rule_that_rolls_and_no_period_mean_no_rolled_days() -> None:
    day = date(2026, 3, 14)
    assert page_plan.rolled_days([day], [day], [Rule("period_end", "none")]) == []
    assert page_plan.rolled_days([], [], [Rule("period_end", "following")]) == []


def test_a_groups_weight_is_its_periods_and_the_one_after_summed_over_its_schedules() -> None:
    monthly = plan.schedule_for("monthly", "UTC", NOW)
    daily = plan.schedule_for("daily", "UTC", NOW)
    assert monthly.after is not None
    assert daily.after is not None
    ready = [
        (Group("monthly", "UTC", 3), monthly),
        (Group("monthly", "UTC", 3), monthly),  # a catch-up statement's second clock
        (Group("daily", "UTC", 0), daily),
        (Group(None, "UTC", 0), daily),  # refused: never weighed
    ]

    weights = page_plan.weights(ready)

    assert weights == {
        "monthly": {"UTC": {"3": 2 * (len(monthly.periods) + 1)}},
        "daily": {"UTC": {"0": len(daily.periods) + 1}},
    }
    assert page_plan.heaviest(weights) == max(
        2 * (len(monthly.periods) + 1), len(daily.periods) + 1
    )
    assert page_plan.heaviest({}) == 0


# Which page statement writes: the probing variant where rows mostly exist


def test_a_page_probes_first_once_the_last_page_found_two_thirds_of_its_rows_present() -> None:
    assert page_plan.rows_mostly_present(owed=9, created=0)
    assert page_plan.rows_mostly_present(owed=9, created=2)
    assert not page_plan.rows_mostly_present(owed=9, created=3)
    assert not page_plan.rows_mostly_present(owed=9, created=9)


def test_a_page_that_owed_nothing_never_says_that_rows_were_present() -> None:
    assert not page_plan.rows_mostly_present(owed=0, created=0)


def test_a_run_probes_from_its_first_page_only_at_a_clock_dispatched_already() -> None:
    assert page_plan.probes_from_the_start(NOW, NOW)
    assert page_plan.probes_from_the_start(NOW + timedelta(days=1), NOW)
    assert not page_plan.probes_from_the_start(NOW - timedelta(days=1), NOW)
    assert not page_plan.probes_from_the_start(None, NOW)


@given(
    zone=st.sampled_from(
        [
            "UTC",
            "America/Los_Angeles",
            "America/Santiago",
            "America/Havana",
            "Antarctica/Troll",
            "Australia/Lord_Howe",
            "Pacific/Apia",
            "Pacific/Kiritimati",
            "Asia/Kathmandu",
            "Europe/Berlin",
        ]
    ),
    today=st.dates(date(1990, 1, 1), date(2060, 12, 31)),
    ahead=st.integers(0, 400),
)
def test_a_day_begins_no_earlier_than_its_midnight_less_the_zones_widest_offset(
    zone: str, today: date, ahead: int
) -> None:
    # The instant a scheduled run first reads a duty for its next owed day
    # (migration 0016) must never come after the day begins in its zone.
    offset, until = page_plan.widest_utc_offset(zone, today)
    day = today + timedelta(days=ahead)
    assert day <= until
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    assert midnight - timedelta(minutes=offset) <= periods.start_of_day(day, zone)


def test_the_widest_offset_of_a_zone_is_its_summer_one() -> None:
    assert page_plan.widest_utc_offset("America/Los_Angeles", date(2026, 11, 20))[0] == -7 * 60
    assert page_plan.widest_utc_offset("Antarctica/Troll", date(2026, 1, 5))[0] == 2 * 60
    assert page_plan.widest_utc_offset("Asia/Kathmandu", date(2026, 1, 5))[0] == 5 * 60 + 45
