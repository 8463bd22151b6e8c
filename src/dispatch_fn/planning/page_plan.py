"""The planner's decisions a run's page statements bind: weights, page sizes, rolls.

Pure: no database. ``store.page_statement`` only maps these decisions onto
the statements' parameters; which days roll where, how heavy each group's
duties are and how large a page may be are decided here, by the planner and
the engine's calendar.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Final, Protocol

from dispatch_fn.engine import (
    LAST_DAY,
    MAX_DAYS_AFTER_PERIOD,
    MAX_MONTHS_AFTER_PERIOD,
    BusinessCalendar,
    business_calendar,
    zone,
)
from dispatch_fn.planning.plan import Schedule

# The days a due date can land on beyond its period's last day before the
# roll: the most months and days after_period_end allows (periods.check_due_rule).
_AFTER_PERIOD_REACH: Final = timedelta(days=MAX_MONTHS_AFTER_PERIOD * 31 + MAX_DAYS_AFTER_PERIOD)


# How far ahead a zone's widest offset is worked out (widest_utc_offset): a
# year and a month, past any next owed day but an annual duty's own.
OFFSET_REACH: Final = timedelta(days=400)
# UTC+14: no zone's day begins earlier, relative to its midnight.
WIDEST_OFFSET_MINUTES: Final = 14 * 60


class GroupKey(Protocol):
    """What the planner needs of a group of duties (``store.Group``)."""

    @property
    def frequency(self) -> str | None: ...
    @property
    def timezone(self) -> str: ...
    @property
    def lead_bucket(self) -> int: ...


class RuleKey(Protocol):
    """What the planner needs of a due rule (``store.DueRule``)."""

    @property
    def due_anchor(self) -> str: ...
    @property
    def due_roll(self) -> str: ...
    @property
    def holiday_calendar(self) -> str | None: ...


type Weights = dict[str, dict[str, dict[str, int]]]


def weights(ready: Iterable[tuple[GroupKey, Schedule]]) -> Weights:
    """Frequency, then zone, then lead bucket: the rows a duty of that group can owe.

    One per candidate period of its schedule. A group without a frequency is
    refused, never planned.
    """
    found: Weights = {}
    for group, schedule in ready:
        if group.frequency is None:
            continue
        buckets = found.setdefault(group.frequency, {}).setdefault(group.timezone, {})
        bucket = str(group.lead_bucket)
        # The period after the candidates is a row too (plan.Schedule.after).
        rows = len(schedule.periods) + (schedule.after is not None)
        buckets[bucket] = buckets.get(bucket, 0) + rows
    return found


def heaviest(weighed: Weights) -> int:
    """The most rows one duty can owe: its group's weight (0 without groups).

    Not how many such duties there are, which a duty inserted during the run
    would make untrue.
    """
    return max(
        (w for zones in weighed.values() for ws in zones.values() for w in ws.values()),
        default=0,
    )


def page_size(chunk_size: int, page_rows: int | None, heaviest: int) -> int:
    """The duties a page takes: ``chunk_size``, or a little less.

    Fewer where, at no less than half the chunk, a page then stays within
    ``page_rows`` even if every duty in it is the heaviest: such pages go
    unweighed (``budget``), and weighing every page costs more than the few
    more pages do (docs/adr/0009).
    """
    if page_rows is None or not heaviest:
        return chunk_size
    fits = page_rows // heaviest
    return fits if max(1, chunk_size // 2) <= fits < chunk_size else chunk_size


def budget(size: int, page_rows: int | None, heaviest: int) -> int | None:
    """The row budget a page of ``size`` duties is held to; None: it cannot be reached.

    Where ``size`` of the run's heaviest duties stay within ``page_rows`` the
    page is never cut, so it goes unweighed.
    """
    if page_rows is None or size * heaviest <= page_rows:
        return None
    return page_rows


def rows_mostly_present(owed: int, created: int) -> bool:
    """Whether most of the rows a page owed were there already: the next page probes first.

    A page runs page_write_rerun.sql, which looks each owed row up in the
    unique index before inserting the absent ones, where the run's last page
    found more than two thirds of its owed rows present; otherwise
    page_write.sql, which inserts them all and lets the constraint refuse the
    repeats. Measured on pages of 10,000 duties (docs/performance-history.md#server-cpu),
    the probe saves about a quarter of the server CPU of a page whose rows
    all exist and adds about an eighth to one whose rows are all new: it pays
    from about two thirds present. Pages of one run look alike (a re-run
    finds every row, a first run none, a daily run its monthly duties'
    current periods), so the last page is a sound guess for the next. A
    wrong guess costs time only: both statements write the same rows and
    report the same counts. A page that owed nothing says nothing either way.
    """
    return owed > 0 and 3 * created < owed


def probes_from_the_start(previous_clock: datetime | None, clock: datetime) -> bool:
    """Whether a run's first pages probe first: its clock was dispatched already.

    ``previous_clock`` is the latest clock a completed run dispatched (the
    ledger's; None: none). A run at that clock or before it owes what that
    run created, so its pages find their rows present before any page has
    said so; any other run starts with page_write.sql and lets its pages
    tell (``rows_mostly_present``).
    """
    return previous_clock is not None and clock <= previous_clock


@dataclass(frozen=True, slots=True)
class RolledDay:
    """A day that is not a business day of ``calendar``, with the business days either side.

    ``calendar`` is '' for no calendar (the Saturday/Sunday weekend). A side
    is None past the calendar's edge: the planner refuses such a duty, and a
    null due date owes nothing either.
    """

    calendar: str
    day: date
    following: date | None
    preceding: date | None


def rolled_days(
    first_days: Sequence[date], last_days: Sequence[date], rules: Iterable[RuleKey]
) -> list[RolledDay]:
    """Every non-business day a rolled due date of this run can land on, per calendar.

    So the page statement rolls by a lookup, the roll itself decided by the
    engine's calendar. A rule is not tied to a group, so each rolled calendar
    covers every schedule's periods (a few thousand days at most):
    ``first_days`` and ``last_days`` are their first and last days.
    """
    if not first_days:
        return []
    first = min(first_days)
    last = max(last_days)
    spans: dict[str | None, tuple[date, date]] = {}
    for rule in rules:
        if rule.due_roll == "none":
            continue
        reach = last
        if rule.due_anchor == "after_period_end":
            # In ordinals: within the reach of 9999-12-31 the sum is no date.
            ordinal = last.toordinal() + _AFTER_PERIOD_REACH.days
            reach = date.fromordinal(min(ordinal, LAST_DAY.toordinal()))
        low, high = spans.get(rule.holiday_calendar, (first, reach))
        spans[rule.holiday_calendar] = (low, max(high, reach))
    days: list[RolledDay] = []
    for code, (low, high) in spans.items():
        business = business_calendar(code)
        for ordinal in range(low.toordinal(), high.toordinal() + 1):
            day = date.fromordinal(ordinal)
            if business.is_business_day(day):
                continue
            days.append(
                RolledDay(code or "", day, _nearest(business, day, 1), _nearest(business, day, -1))
            )
    return days


def _nearest(business: BusinessCalendar, day: date, step: int) -> date | None:
    try:
        return business.next_business_day(day, step)
    except ValueError:
        return None


def widest_utc_offset(timezone: str, today: date) -> tuple[int, date]:
    """The widest UTC offset of ``timezone`` from ``today`` on, in minutes, and its last day.

    A local day then begins no earlier than its midnight less that offset:
    the instant a scheduled run first owes a duty's next owed day, or before
    it, never after (migration 0016's ``dispatch_next_at``). Past the day
    returned, UTC+14's offset bounds every zone.
    """
    try:
        until = today + OFFSET_REACH
    except OverflowError:
        until = date.max
    years = range(today.year, min(until.year, LAST_DAY.year) + 1)
    return max(_widest_in_year(timezone, year) for year in years), until


@functools.cache
def _widest_in_year(name: str, year: int) -> int:
    # Every day's offset at noon UTC: no zone keeps an offset for less than a
    # day, so the widest of them is the year's. Cached per process: a run asks
    # for each zone it plans again on every page.
    tz = zone(name)
    widest = -WIDEST_OFFSET_MINUTES
    day = date(year, 1, 1)
    while day.year == year:
        try:
            noon = datetime(day.year, day.month, day.day, 12, tzinfo=UTC).astimezone(tz)
        except OverflowError:  # a local day past 9999-12-31: none to owe
            break
        offset = noon.utcoffset()
        if offset is not None:
            widest = max(widest, int(offset.total_seconds()) // 60)
        if day == date.max:
            break
        day += timedelta(days=1)
    return widest
