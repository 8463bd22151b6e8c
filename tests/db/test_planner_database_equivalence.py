"""The database path inserts exactly what the pure planner plans, for any duties and clock.

The duties are drawn from the engine's own enumerations (frequencies,
anchors, rolls, the planner's forms), so a new member cannot fall silently
into a SQL ``ELSE``; and from any account (docs/contract.md#account): kept or
not, paused, changed, behind the horizon, ahead of the clock.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch_fn.engine import ANCHORS, FREQUENCIES, ROLLS
from dispatch_fn.planning import RunRequest
from dispatch_fn.planning.plan import (
    FORMS,
    Account,
    Plan,
    SkipReason,
    Window,
    account_after,
    plan_dispatch,
    schedule_for,
)
from dispatch_fn.run import dispatch
from runtimes import runtime
from support import assert_run_is_the_plan, duty, insert_duties, multiset, task_rows

ZONES = (
    "UTC", "Asia/Shanghai", "America/Los_Angeles", "Europe/Berlin", "America/Santiago",
    "Pacific/Auckland", "Pacific/Apia", "Australia/Lord_Howe", "Asia/Kathmandu",
    "Pacific/Kiritimati", "Pacific/Pago_Pago", "America/Nuuk", "America/Scoresbysund",
    "Antarctica/Troll", "Mars/Olympus",
)  # fmt: skip
# Hours since the previous scheduled clock: ScheduleIntervalHours' values.
INTERVALS = st.sampled_from([1, 2, 3, 4, 6, 8, 12, 24, 24, 24]).map(lambda h: timedelta(hours=h))
DAYS = st.dates(date(2010, 1, 1), date(2035, 12, 31))
# The calendar's first and last years (docs/contract.md#periods: 1583-9999), where a lead, an
# offset, a roll or a grace can carry a date out of the calendar.
FIRST_YEARS = (date(1583, 1, 1), date(1584, 12, 31))
LAST_YEARS = (date(9998, 1, 1), date(9999, 12, 31))
EDGE_DAYS = st.dates(*FIRST_YEARS) | st.dates(*LAST_YEARS)
# A lead as most duties have one, or one reaching far past a period (the
# schema allows -3660 to 3660).
LEADS = st.integers(-3, 45) | st.integers(-400, 400)
CALENDARS = (None, None, "US", "US-CA", "DE-BY", "GB-SCT", "CN", "SA", "Atlantis")
REVIEWS = ("approved",) * 6 + ("to_review", "to_confirm", "returned", None)
# Bucket edges (plan.LEAD_THRESHOLDS) and leads of years, either sign.
WILD_LEADS = (-3_660, -400, 63, 64, 65, 400, 1_000, 3_660)


@st.composite
def due_rules(draw: st.DrawFn) -> dict[str, Any]:
    """Anchor, offsets, roll, calendar and grace: mostly valid, sometimes out of range."""
    anchor = draw(st.sampled_from(ANCHORS))
    if anchor == "after_period_end":
        days = draw(st.integers(0, 40) | st.integers(-3, 400))
        months = draw(st.integers(0, 4) | st.integers(-1, 26))
    else:
        days = draw(st.integers(-40, 40))
        months = draw(st.just(0) | st.integers(-1, 2))
    return {
        "due_anchor": anchor,
        "due_offset_days": days,
        "due_offset_months": months,
        "due_roll": draw(st.sampled_from(["none", *ROLLS]) | st.just("sideways")),
        "holiday_calendar": draw(st.sampled_from(CALENDARS)),
        "grace_days": draw(st.integers(0, 30) | st.integers(-2, 400)),
        "review_status": draw(st.sampled_from(REVIEWS)),
    }


@st.composite
def duties(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 12))
    rows = []
    for n in range(count):
        start = draw(st.none() | DAYS | EDGE_DAYS)
        end = draw(st.none() | DAYS | EDGE_DAYS)
        rows.append(
            duty(
                f"d{n:02}",
                organization_id=draw(st.sampled_from(["org-a", "org-b"])),
                owner_id=draw(st.sampled_from(["ann", "bob"])),
                business_unit_id=draw(st.none() | st.just("bu-1")),
                form=draw(st.sampled_from(["recurring"] * 6 + [*FORMS, "bogus"])),
                status=draw(st.sampled_from(["active"] * 6 + ["paused", "retired"])),
                frequency=draw(st.sampled_from([*FREQUENCIES, None, "hourly"])),
                timezone=draw(st.sampled_from(ZONES)),
                # Now and then a wild lead, which gets a lead bucket of its own.
                lead_days=draw(LEADS | st.sampled_from(WILD_LEADS)),
                **draw(due_rules()),
                effective_from=start,
                effective_to=end,
            )
        )
    return rows


# A far day an edit with no scheduled clock in the ledger places a change at.
FAR = date(9999, 12, 31)


@st.composite
def accounts(draw: st.DrawFn, today: date) -> dict[str, date | None]:
    """A duty's account around ``today``: none, kept lately or long ago, paused, changed."""

    def near(days: int | None) -> date | None:
        if days is None:
            return None
        try:
            return today + timedelta(days=days)
        except OverflowError:
            return None

    far = draw(st.booleans())
    changed = near(draw(st.none() | st.integers(-12, 0)))
    return {
        "dispatch_through": near(draw(st.none() | st.integers(-12, 2))),
        "dispatch_paused_on": near(draw(st.none() | st.integers(-12, 0))),
        "dispatch_changed_on": FAR if far and changed is not None else changed,
    }


def _set_accounts(conn: psycopg.Connection[Any], rows: list[dict[str, Any]]) -> None:
    # The owner writes the account columns, which the trigger does not watch.
    for row in rows:
        conn.execute(
            "UPDATE duly_duty SET dispatch_through = %s, dispatch_paused_on = %s,"
            " dispatch_changed_on = %s WHERE id = %s AND organization_id = %s",
            (
                row.get("dispatch_through"),
                row.get("dispatch_paused_on"),
                row.get("dispatch_changed_on"),
                row["id"],
                row["organization_id"],
            ),
        )


@st.composite
def runs(draw: st.DrawFn) -> tuple[datetime, Window | None]:
    """A clock and a window, mostly in this century, sometimes at either end of the calendar."""
    edge = draw(st.sampled_from([None, None, FIRST_YEARS, LAST_YEARS]))
    low, high = (date(2011, 1, 1), date(2034, 12, 31)) if edge is None else edge
    now = draw(
        st.datetimes(
            datetime.combine(low, time()), datetime.combine(high, time.max), timezones=st.just(UTC)
        )
    )
    if draw(st.booleans()):
        return now, None
    first = draw(DAYS if edge is None else st.dates(*edge))
    last = draw(
        st.none()
        | st.dates(first, date.fromordinal(min(first.toordinal() + 400, date.max.toordinal())))
    )
    return now, Window(first, last)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    duties=duties(),
    run=runs(),
    chunk=st.integers(1, 5),
    workers=st.integers(1, 3),
    page_rows=st.none() | st.integers(1, 400),
    interval=INTERVALS,
    data=st.data(),
)
def test_database_path_inserts_exactly_the_planned_rows(  # noqa: PLR0917 - hypothesis draws
    conn: psycopg.Connection[Any],
    helpers: list[psycopg.Connection[Any]],
    duties: list[dict[str, Any]],
    run: tuple[datetime, Window | None],
    chunk: int,
    workers: int,
    page_rows: int | None,
    interval: timedelta,
    data: st.DataObject,
) -> None:
    conn.execute("TRUNCATE duly_task, duly_duty")
    insert_duties(conn, duties)
    now, window = run
    today = now.date()
    duties = [{**row, **data.draw(accounts(today))} for row in duties]
    _set_accounts(conn, duties)
    plan = plan_dispatch(duties, now, window, interval=interval)

    report = dispatch(
        [conn, *helpers[: workers - 1]],
        RunRequest(now=now, window=window, interval=interval),
        runtime(chunk_size=chunk, page_rows=page_rows),
    )

    assert_run_is_the_plan(conn, report, plan)
    assert report.duties_read == len(duties)
    assert _accounts(conn) == _accounts_planned(duties, plan, now, window, interval)


def _accounts(conn: psycopg.Connection[Any]) -> dict[str, tuple[Any, ...]]:
    rows = conn.execute(
        "SELECT id, dispatch_through, dispatch_paused_on, dispatch_changed_on FROM duly_duty"
    ).fetchall()
    return {str(row[0]): tuple(row[1:]) for row in rows}


def _accounts_planned(
    duties: list[dict[str, Any]],
    plan: Plan,
    now: datetime,
    window: Window | None,
    interval: timedelta,
) -> dict[str, tuple[Any, ...]]:
    """Each duty's account as plan.account_after leaves it, for the duties the run judged."""
    skipped = {skip.duty_id: skip.reason for skip in plan.skipped}
    owing = {str(draft["duty_id"]) for draft in plan.drafts}
    found = {}
    for row in duties:
        account = Account.of(row)
        judged = skipped.get(row["id"]) in (None, SkipReason.NOTHING_DUE)
        if window is None and judged:
            schedule = schedule_for(row["frequency"], row["timezone"], now, previous=now - interval)
            closed = (
                schedule.today is not None
                and row["effective_to"] is not None
                and schedule.today > row["effective_to"]
            )
            account = account_after(account, schedule, owed=row["id"] in owing, closed=closed)
        found[row["id"]] = (account.through, account.paused_on, account.changed_on)
    return found


def test_database_due_dates_clamp_like_the_engine_at_every_offset_extreme(
    conn: psycopg.Connection[Any],
) -> None:
    offsets = (-3660, -400, -366, -90, -31, -1, 0, 1, 27, 30, 365, 366, 400, 3660)
    duties = [
        duty(
            f"{frequency}-{anchor}-{offset}",
            frequency=frequency,
            due_anchor=anchor,
            due_offset_days=offset,
            timezone="Australia/Lord_Howe",
        )
        for frequency in FREQUENCIES
        for anchor in ("period_start", "period_end")
        for offset in offsets
    ]
    insert_duties(conn, duties)
    now = datetime(2028, 3, 1, 12, tzinfo=UTC)
    window = Window(date(2027, 12, 20), date(2028, 3, 10))  # a leap February inside
    plan = plan_dispatch(duties, now, window)
    dispatch([conn], RunRequest(now=now, window=window), runtime(chunk_size=50))
    assert multiset(task_rows(conn)) == multiset(plan.drafts)
    assert len(plan.drafts) > len(duties)


def test_database_due_dates_after_the_period_keep_month_ends_and_roll_like_the_engine(
    conn: psycopg.Connection[Any],
) -> None:
    # Month-end periods moved on whole months stay month-end (a period ending
    # 30 April, one month on, is due 31 May), others keep their day; the
    # modified roll turns back where the next business day is a month later.
    # The session's zone plays no part in the dates.
    conn.execute("SET TimeZone = 'Pacific/Kiritimati'")
    duties = [
        duty(
            f"{frequency}-{months}-{days}-{roll}",
            frequency=frequency,
            due_anchor="after_period_end",
            due_offset_months=months,
            due_offset_days=days,
            due_roll=roll,
            holiday_calendar="US" if roll != "none" else None,
        )
        for frequency in FREQUENCIES
        for months in (0, 1, 2, 13)
        for days in (0, 1, 30)
        for roll in ("none", "modified_following")
    ]
    insert_duties(conn, duties)
    now = datetime(2028, 3, 1, 12, tzinfo=UTC)
    window = Window(date(2027, 11, 25), date(2028, 5, 5))  # 30- and 31-day months, a leap February
    plan = plan_dispatch(duties, now, window)
    dispatch([conn], RunRequest(now=now, window=window), runtime(chunk_size=50))
    assert multiset(task_rows(conn)) == multiset(plan.drafts)
    due_dates = {draft["due_date"] for draft in plan.drafts}
    month_ends = {day for day in due_dates if (day + timedelta(days=1)).day == 1}
    assert date(2028, 5, 31) in month_ends
    # April 2028 ends on a Sunday and 1 May is a Monday: modified, it turns
    # back to Friday 28 April.
    april = next(
        draft
        for draft in plan.drafts
        if draft["duty_id"] == "monthly-0-0-modified_following" and draft["period_key"] == "2028-04"
    )
    assert april["due_date"] == date(2028, 4, 28)


@pytest.mark.parametrize(
    ("clock", "hours"),
    [
        # The run after Greenland's clocks moved across midnight (docs/contract.md#account).
        (datetime(2026, 3, 29, 1, tzinfo=UTC), 24),
        # Antarctica/Troll's 22-hour day, inside one interval of an hourly schedule.
        (datetime(2026, 3, 29, 22, tzinfo=UTC), 1),
        (datetime(2026, 3, 30, 1, tzinfo=UTC), 24),
        # Lord Howe's half hour and Apia's skipped day.
        (datetime(2026, 4, 5, 1, tzinfo=UTC), 6),
        (datetime(2011, 12, 31, 1, tzinfo=UTC), 24),
    ],
)
def test_past_periods_are_owed_alike_on_both_paths(
    conn: psycopg.Connection[Any], clock: datetime, hours: int
) -> None:
    zones = ("America/Nuuk", "America/Scoresbysund", "Antarctica/Troll", "Australia/Lord_Howe",
             "Pacific/Apia", "UTC")  # fmt: skip
    duties = [
        duty(f"{zone}-{frequency}-{lead}", frequency=frequency, timezone=zone, lead_days=lead)
        for zone in zones
        for frequency in ("daily", "weekly")
        for lead in (-3, -1, 0, 1, 2, 8)
    ]
    insert_duties(conn, duties)
    interval = timedelta(hours=hours)
    plan = plan_dispatch(duties, clock, interval=interval)
    report = dispatch([conn], RunRequest(now=clock, interval=interval))
    assert_run_is_the_plan(conn, report, plan)
