"""Between two scheduled runs nothing falls through: the pure planner.

Each duty keeps its own account (docs/contract.md#account): a run owes what
became owed since the account's day, whatever the time between runs.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch_fn.engine import FREQUENCIES, ROLLS, periods
from dispatch_fn.errors import ScheduleIntervalError
from dispatch_fn.planning.plan import (
    Account,
    Cadence,
    NotOwed,
    Period,
    Schedule,
    Window,
    account_after,
    became_owed_on,
    next_owed_from,
    owed_in_window,
    owed_verdict,
    period_after,
    period_holding,
    plan_dispatch,
    schedule_for,
)
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


def test_the_schedule_reaches_back_past_the_horizon_and_holds_the_current_day() -> None:
    schedule = schedule_for(
        "daily", "America/Nuuk", datetime(2026, 3, 29, 1, tzinfo=UTC), catch_up_days=2
    )
    # Nuuk's today at that clock is the 29th (its 28th was 23 hours long):
    # what became owed on it and the two days before is owed still; the day
    # before those, the horizon's, is there to be counted if it lapsed.
    assert schedule.horizon == date(2026, 3, 26)
    assert schedule.origin == date(2026, 3, 27)
    assert [(p.key, p.current) for p in schedule.periods] == [
        ("2026-03-26", False),
        ("2026-03-27", False),
        ("2026-03-28", False),
        ("2026-03-29", True),
    ]


def test_a_horizon_of_no_days_still_reaches_back_one_day() -> None:
    schedule = schedule_for(
        "daily", "UTC", datetime(2026, 8, 21, 1, tzinfo=UTC), lead_horizon=3, catch_up_days=0
    )
    assert schedule.horizon == date(2026, 8, 19)
    # The horizon's own day is there to be counted if it lapsed, never owed.
    assert [p.key for p in schedule.periods] == [
        "2026-08-19", "2026-08-20", "2026-08-21", "2026-08-22", "2026-08-23", "2026-08-24",
    ]  # fmt: skip


def test_a_past_period_is_owed_only_if_it_became_owed_after_the_accounts_day() -> None:
    past = Period("2026-03-28", date(2026, 3, 28), date(2026, 3, 28), current=False)
    schedule = Schedule(
        date(2026, 3, 29), (past,), horizon=date(2026, 3, 22), origin=date(2026, 3, 27)
    )
    kept_through_27 = Account(through=date(2026, 3, 27))
    assert owed_verdict(past, date(2026, 3, 28), schedule, kept_through_27) is None
    # Owed on the 28th and kept through the 28th: an earlier run created it.
    assert owed_verdict(past, date(2026, 3, 28), schedule, Account(date(2026, 3, 28))) == (
        NotOwed.DISPATCHED
    )
    # No account kept yet: owed if it became owed after the scheduled clock
    # before the run, whose local day is the 27th.
    assert owed_verdict(past, date(2026, 3, 28), schedule) is None
    assert owed_verdict(past, date(2026, 3, 27), schedule, lead_days=1) == (
        NotOwed.NOT_DISPATCHABLE
    )
    # Paused after the 27th's clock: the 28th became owed while it was paused.
    paused = Account(through=date(2026, 3, 27), paused_on=date(2026, 3, 27))
    assert owed_verdict(past, date(2026, 3, 28), schedule, paused) == NotOwed.NOT_DISPATCHABLE


def test_a_past_period_owed_before_the_horizon_is_counted_not_owed() -> None:
    past = Period("2026-03-20", date(2026, 3, 20), date(2026, 3, 20), current=False)
    schedule = Schedule(date(2026, 3, 29), (past,), horizon=date(2026, 3, 22))
    account = Account(through=date(2026, 3, 10))
    assert owed_verdict(past, date(2026, 3, 20), schedule, account) == NotOwed.BEYOND_HORIZON


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
    frequency=st.sampled_from(FREQUENCIES),
)
def test_runs_every_interval_create_every_period_of_their_span_whatever_the_frequency(
    zone: str, start: datetime, hours: int, frequency: str
) -> None:
    every = timedelta(hours=hours)
    first = start.replace(tzinfo=UTC)
    clocks = _clocks(first, first + timedelta(days=40), every)
    made = _union([duty("d1", frequency=frequency, timezone=zone, lead_days=0)], clocks, every)
    assert set(periods.periods_between(frequency, clocks[0], clocks[-1], zone)) == made["d1"]


def _accounted_union(
    duty_row: dict[str, object], clocks: list[datetime], every: timedelta, catch_up_days: int
) -> set[str]:
    """Every key a sequence of runs creates for one duty, its account carried between them."""
    made: set[str] = set()
    row = dict(duty_row)
    for clock in clocks:
        plan = plan_dispatch([row], clock, interval=every, catch_up_days=catch_up_days)
        made.update(str(draft["period_key"]) for draft in plan.drafts)
        schedule = schedule_for(
            str(row["frequency"]),
            str(row["timezone"]),
            clock,
            lead_horizon=int(str(row["lead_days"])),
            previous=clock - every,
            catch_up_days=catch_up_days,
        )
        kept = account_after(Account.of(row), schedule, owed=bool(plan.drafts))
        row["dispatch_through"] = kept.through
        row["dispatch_paused_on"] = kept.paused_on
        row["dispatch_changed_on"] = kept.changed_on
    return made


@settings(max_examples=150, deadline=None)
@given(
    zone=st.sampled_from(DST_HEAVY),
    start=st.datetimes(min_value=datetime(2010, 1, 1), max_value=datetime(2030, 12, 31)),
    hours=st.sampled_from(INTERVAL_HOURS),
    outage=st.integers(min_value=0, max_value=6 * 24),
    lead=st.integers(min_value=-2, max_value=3),
)
def test_an_outage_within_the_horizon_loses_no_day_whatever_the_interval(
    zone: str, start: datetime, hours: int, outage: int, lead: int
) -> None:
    # Runs every interval, then none for `outage` hours (under the horizon's
    # seven days), then runs again: every local day from the first run's to
    # the last run's is created (issue 37: an hourly schedule lost a short day).
    every = timedelta(hours=hours)
    first = start.replace(tzinfo=UTC)
    before = _clocks(first, first + timedelta(days=1), every)
    resumed = before[-1] + timedelta(hours=outage) + every
    after = _clocks(resumed, resumed + timedelta(days=1), every)
    clocks = before + after
    made = _accounted_union(
        duty("d1", frequency="daily", timezone=zone, lead_days=lead), clocks, every, 7
    )
    span = set(periods.periods_between("daily", clocks[0], clocks[-1], zone))
    assert span <= made


def test_an_hourly_schedule_owes_berlins_short_day_after_an_outage_across_it() -> None:
    every = timedelta(hours=1)
    # Runs until 2026-03-28 22:00 UTC, then nothing until 2026-03-29 21:00 UTC:
    # under a day, across Berlin's 23-hour 2026-03-29.
    clocks = [
        *_clocks(
            datetime(2026, 3, 28, 20, tzinfo=UTC), datetime(2026, 3, 28, 22, tzinfo=UTC), every
        ),
        *_clocks(
            datetime(2026, 3, 29, 21, tzinfo=UTC), datetime(2026, 3, 29, 23, tzinfo=UTC), every
        ),
    ]
    made = _accounted_union(
        duty("d1", frequency="daily", timezone="Europe/Berlin", lead_days=0), clocks, every, 7
    )
    assert "2026-03-29" in made


@given(
    frequency=st.sampled_from(sorted(FREQUENCIES)),
    zone=st.sampled_from(["UTC", "Pacific/Kiritimati", "America/Nuuk", "Australia/Lord_Howe"]),
    now=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
    ),
    lead=st.integers(-5, 400),
)
def test_a_schedule_names_the_period_after_its_last_for_the_next_owed_day(
    frequency: str, zone: str, now: datetime, lead: int
) -> None:
    schedule = schedule_for(frequency, zone, now, lead_horizon=lead)

    assert schedule.after is not None
    assert schedule.after.first_day == schedule.periods[-1].last_day + timedelta(days=1)
    assert not schedule.after.current
    assert schedule.after.key == periods.period_key_for(
        frequency, periods.start_of_day(schedule.after.first_day, zone), zone
    )


def test_a_backfill_and_the_calendars_end_have_no_period_after() -> None:
    window = Window(date(2026, 1, 1), date(2026, 3, 31))
    now = datetime(2026, 4, 1, 1, tzinfo=UTC)
    assert schedule_for("monthly", "UTC", now, window).after is None
    end = datetime(9999, 12, 30, 12, tzinfo=UTC)
    assert schedule_for("monthly", "UTC", end).after is None


def _next_owed_walked(
    cadence: Cadence,
    start: Period,
    window: tuple[date | None, date | None],
    after: date | None = None,
) -> date | None:
    """next_owed_from's answer found the long way: every period from ``start``, none skipped."""
    period: Period | None = start
    for _ in range(6000):
        assert period is not None
        due = cadence.due_date(period)
        became = became_owed_on(
            period, periods.visible_from_for(due, cadence.lead_days), cadence.lead_days, window[0]
        )
        if owed_in_window(cadence, period, due, became, window) and (
            after is None or became > after
        ):
            return became
        if window[1] is not None and period.first_day > window[1] + timedelta(days=400):
            return None
        period = period_after(str(cadence.frequency), period.key, cadence.timezone)
    return None


@settings(max_examples=60, deadline=None)
@given(
    frequency=st.sampled_from(FREQUENCIES),
    anchor=st.sampled_from(periods.ANCHORS),
    roll=st.sampled_from(ROLLS),
    offset=st.integers(0, 366),
    months=st.integers(0, 24),
    lead=st.integers(0, 120),
    opens=st.none() | st.integers(-800, 3000),
    lasts=st.none() | st.integers(0, 800),
    through=st.none() | st.integers(0, 400),
)
def test_the_next_owed_day_is_the_first_period_from_the_start_that_the_window_lets_be_owed(  # noqa: PLR0917 - hypothesis passes each drawn value by name
    frequency: str,
    anchor: str,
    roll: str,
    offset: int,
    months: int,
    lead: int,
    opens: int | None,
    lasts: int | None,
    through: int | None,
) -> None:
    cadence = Cadence.of(
        duty(
            "d",
            frequency=frequency,
            due_anchor=anchor,
            due_roll=roll,
            due_offset_days=offset if anchor == "after_period_end" else 0,
            due_offset_months=months if anchor == "after_period_end" else 0,
            lead_days=lead,
            timezone="Europe/Berlin",
        )
    )
    start = period_holding(frequency, date(2026, 11, 20), "Europe/Berlin")
    assert start is not None
    effective_from = None if opens is None else date(2026, 11, 20) + timedelta(days=opens)
    effective_to = (
        None if lasts is None else (effective_from or date(2026, 11, 20)) + timedelta(days=lasts)
    )
    window = (effective_from, effective_to)
    # An account dispatched through a day: what became owed by it is passed over.
    after = None if through is None else date(2026, 11, 20) + timedelta(days=through)

    assert next_owed_from(cadence, start, window, after=after) == _next_owed_walked(
        cadence, start, window, after
    )
