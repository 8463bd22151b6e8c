"""Between two scheduled runs nothing falls through: the pure planner.

See docs/contract.md#between-runs.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch_fn.engine import periods
from dispatch_fn.errors import ScheduleIntervalError
from dispatch_fn.planning.plan import Period, is_owed, plan_dispatch, schedule_for
from support import duty

# Zones whose offsets move across local midnight, by half hours, by whole
# days, or by two hours at once.
DST_HEAVY = (
    "America/Nuuk",
    "America/Scoresbysund",
    "Pacific/Apia",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Asia/Tehran",
    "Antarctica/Troll",
    "Europe/London",
    "Pacific/Chatham",
)
INTERVAL_HOURS = (1, 2, 3, 4, 6, 8, 12, 24)


def _clocks(first: datetime, last: datetime, every: timedelta) -> list[datetime]:
    clocks = [first]
    while clocks[-1] + every <= last:
        clocks.append(clocks[-1] + every)
    return clocks


def _union(
    duties: list[dict[str, object]], clocks: list[datetime], every: timedelta
) -> dict[str, set[str]]:
    made: dict[str, set[str]] = {}
    for clock in clocks:
        for draft in plan_dispatch(duties, clock, interval=every).drafts:
            made.setdefault(str(draft["duty_id"]), set()).add(str(draft["period_key"]))
    return made


def test_greenlands_skipped_day_is_owed_by_the_first_daily_run_after_it_began() -> None:
    duties = [duty(z, frequency="daily", timezone=z, lead_days=0) for z in DST_HEAVY[:2]]
    before = plan_dispatch(duties, datetime(2026, 3, 28, 1, tzinfo=UTC))
    after = plan_dispatch(duties, datetime(2026, 3, 29, 1, tzinfo=UTC))
    assert sorted(d["period_key"] for d in before.drafts) == ["2026-03-27"] * 2
    assert sorted(d["period_key"] for d in after.drafts) == ["2026-03-28"] * 2 + ["2026-03-29"] * 2


def test_the_schedule_holds_the_past_day_and_the_first_day_after_the_previous_clock() -> None:
    schedule = schedule_for("daily", "America/Nuuk", datetime(2026, 3, 29, 1, tzinfo=UTC))
    assert schedule.threshold == date(2026, 3, 28)
    assert [(p.key, p.current, p.past) for p in schedule.periods] == [
        ("2026-03-28", False, True),
        ("2026-03-29", True, False),
    ]


def test_an_ordinary_day_has_no_past_periods() -> None:
    schedule = schedule_for("daily", "UTC", datetime(2026, 8, 21, 1, tzinfo=UTC), lead_horizon=3)
    assert [p.past for p in schedule.periods] == [False] * 4
    assert schedule.threshold == date(2026, 8, 21)


def test_a_past_period_is_owed_only_if_it_became_visible_after_the_previous_clock() -> None:
    past = Period("2026-03-28", date(2026, 3, 28), date(2026, 3, 28), current=False, past=True)
    today, threshold = date(2026, 3, 29), date(2026, 3, 28)
    assert is_owed(past, date(2026, 3, 28), today, threshold)
    # Visible before the previous clock: the run at that clock owed it already.
    assert not is_owed(past, date(2026, 3, 27), today, threshold)
    # A negative lead makes it visible later still: owed from its own start.
    assert is_owed(past, date(2026, 3, 31), today, threshold)


def test_a_duty_whose_past_day_was_visible_earlier_is_not_owed_it_again() -> None:
    # Lead 1: Nuuk's 03-28 was visible to the 03-28 run (today 03-27), which created it.
    lead_one = [duty("d1", frequency="daily", timezone="America/Nuuk", lead_days=1)]
    earlier = plan_dispatch(lead_one, datetime(2026, 3, 28, 1, tzinfo=UTC))
    later = plan_dispatch(lead_one, datetime(2026, 3, 29, 1, tzinfo=UTC))
    assert [d["period_key"] for d in earlier.drafts] == ["2026-03-27", "2026-03-28"]
    assert [d["period_key"] for d in later.drafts] == ["2026-03-29", "2026-03-30"]


def test_an_unpaused_daily_duty_is_owed_only_its_current_day() -> None:
    plan = plan_dispatch(
        [duty("d1", frequency="daily", lead_days=0)], datetime(2026, 8, 21, 1, tzinfo=UTC)
    )
    assert [d["period_key"] for d in plan.drafts] == ["2026-08-21"]


@pytest.mark.parametrize("interval", [timedelta(0), timedelta(hours=-1), timedelta(hours=25)])
def test_an_interval_outside_a_day_is_refused(interval: timedelta) -> None:
    with pytest.raises(ScheduleIntervalError, match="schedule interval"):
        plan_dispatch([duty("d1")], datetime(2026, 8, 21, 1, tzinfo=UTC), interval=interval)


@settings(max_examples=150, deadline=None)
@given(
    zone=st.sampled_from(DST_HEAVY),
    start=st.datetimes(min_value=datetime(2010, 1, 1), max_value=datetime(2030, 12, 31)),
    hours=st.sampled_from(INTERVAL_HOURS),
    days=st.integers(min_value=1, max_value=12),
    lead=st.integers(min_value=-2, max_value=3),
)
def test_runs_every_interval_create_every_day_of_their_span(
    zone: str, start: datetime, hours: int, days: int, lead: int
) -> None:
    every = timedelta(hours=hours)
    first = start.replace(tzinfo=UTC)
    clocks = _clocks(first, first + timedelta(days=days), every)
    made = _union([duty("d1", frequency="daily", timezone=zone, lead_days=lead)], clocks, every)
    span = set(periods.periods_between("daily", clocks[0], clocks[-1], zone))
    last_today = periods.local_date(clocks[-1], zone)
    reach = periods.periods_between(
        "daily", clocks[0], periods.start_of_day(last_today + timedelta(max(lead, 0)), zone), zone
    )
    assert span <= made["d1"] <= set(reach)


@settings(max_examples=60, deadline=None)
@given(
    zone=st.sampled_from(DST_HEAVY),
    start=st.datetimes(min_value=datetime(2010, 1, 1), max_value=datetime(2030, 12, 31)),
    hours=st.sampled_from(INTERVAL_HOURS),
    frequency=st.sampled_from(periods.FREQUENCIES),
)
def test_runs_every_interval_create_every_period_of_their_span_whatever_the_frequency(
    zone: str, start: datetime, hours: int, frequency: str
) -> None:
    every = timedelta(hours=hours)
    first = start.replace(tzinfo=UTC)
    clocks = _clocks(first, first + timedelta(days=40), every)
    made = _union([duty("d1", frequency=frequency, timezone=zone, lead_days=0)], clocks, every)
    assert set(periods.periods_between(frequency, clocks[0], clocks[-1], zone)) == made["d1"]
