"""The period engine: every period key, boundary and due date in the project.

Pure functions. A period is a run of local calendar days in the duty's zone;
keys and due dates are calendar arithmetic, and a day becomes an instant only
at the very end, by one rule (``start_of_day``; docs/adr/0001). Nothing here
adds 24 hours to anything.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import NamedTuple
from zoneinfo import ZoneInfo

from dispatch_fn.engine import _keys, _zones, business_days, dates
from dispatch_fn.errors import (
    InvalidDayCountError,
    OffsetOutOfRangeError,
    UnknownAnchorError,
    YearOutOfRangeError,
)

__all__ = [
    "ANCHORS",
    "MAX_DAYS_AFTER_PERIOD",
    "MAX_GRACE_DAYS",
    "MAX_MONTHS_AFTER_PERIOD",
    "PeriodBounds",
    "check_day_count",
    "check_due_anchor",
    "check_due_roll",
    "check_due_rule",
    "check_grace_days",
    "check_holiday_calendar",
    "due_date_for",
    "is_business_day",
    "late_after_for",
    "local_date",
    "period_bounds",
    "period_days",
    "period_key_for",
    "periods_between",
    "start_of_day",
    "visible_from_for",
    "zone",
]

ANCHORS = ("period_start", "period_end", "after_period_end")
# The ranges a due date after the period, and a grace, may take (docs/contract.md#due-dates).
MAX_MONTHS_AFTER_PERIOD = 24
MAX_DAYS_AFTER_PERIOD = 366
MAX_GRACE_DAYS = 366


class PeriodBounds(NamedTuple):
    """A period as the half-open interval of instants ``[start, end)``.

    Both carry the zone's UTC offset at that instant (a fixed-offset tzinfo),
    so they read as local wall time and compare exactly as instants.
    """

    start: datetime
    end: datetime


def zone(timezone: str) -> ZoneInfo:
    """The IANA zone ``timezone`` from the pinned tzdata, validated and cached."""
    return _zones.zone(timezone)


def local_date(instant: datetime, timezone: str) -> date:
    """The calendar date a wall clock in ``timezone`` shows at ``instant``."""
    return dates.local_date_in(instant, zone(timezone))


def local_dates(instant: datetime) -> dict[str, date]:
    """The date a wall clock shows at ``instant`` in every zone the bundled tz release defines.

    Less the zones where that date lies outside the calendar (an instant
    within hours of its ends).
    """
    shown = {}
    for name in sorted(_zones.zone_names()):
        try:
            shown[name] = dates.local_date_in(instant, zone(name))
        except YearOutOfRangeError:
            continue
    return shown


def start_of_day(day: date, timezone: str) -> datetime:
    """The first instant of local ``day``: midnight, or where the zone's clocks say it is.

    Ambiguous midnight gives its first occurrence; a midnight inside a gap
    gives the first instant after the gap; a skipped day gives the next day's
    start.
    """
    tz = zone(timezone)
    checked = dates.check_day(day, "day")
    return dates.as_local_instant(dates.first_instant_utc(checked, tz), tz)


def period_key_for(frequency: str, instant: datetime, timezone: str) -> str:
    """Key of the period containing ``instant``'s local calendar day in ``timezone``."""
    freq = _keys.check_frequency(frequency)
    day = dates.local_date_in(instant, zone(timezone))
    return _keys.span_containing(freq, day).key


def period_bounds(frequency: str, period_key: str, timezone: str) -> PeriodBounds:
    """``[start, end)`` of the period ``period_key``; ``end`` is the next period's start."""
    freq = _keys.check_frequency(frequency)
    tz = zone(timezone)
    span = _keys.span_of_key(freq, period_key)
    if span.last == dates.LAST_DAY:
        # The end would be the start of 10000-01-01, which no datetime holds.
        raise YearOutOfRangeError(
            f"{freq} period {span.key!r} ends at the start of 10000-01-01; "
            f"expected a period ending within {dates.YEAR_RANGE}"
        )
    start = dates.first_instant_utc(span.first, tz)
    end = dates.first_instant_utc(span.last + _keys.ONE_DAY, tz)
    return PeriodBounds(dates.as_local_instant(start, tz), dates.as_local_instant(end, tz))


def due_date_for(
    frequency: str,
    period_key: str,
    timezone: str,
    due_anchor: str,
    due_offset_days: int,
    *,
    due_offset_months: int = 0,
    due_roll: str = "none",
    holiday_calendar: str | None = None,
) -> date:
    """The due date of ``period_key``: anchor day, offsets, then the business-day roll.

    ``period_start`` / ``period_end``: the anchor day plus ``due_offset_days``,
    clamped into the period. ``after_period_end``: the period's last day plus
    ``due_offset_months`` (month-end stays month-end), plus ``due_offset_days``,
    not clamped. ``due_roll`` moves the result onto a business day of
    ``holiday_calendar`` last, so a rolled date may leave the period.
    """
    freq = _keys.check_frequency(frequency)
    zone(timezone)  # validated although a due date is pure calendar arithmetic
    span = _keys.span_of_key(freq, period_key)
    anchor, offset, months, roll, calendar = check_due_rule(
        due_anchor, due_offset_days, due_offset_months, due_roll, holiday_calendar
    )
    business = business_days.business_calendar(calendar)
    if anchor == "after_period_end":
        later = dates.add_months(span.last, months)
        unrolled = dates.add_days(
            later, offset, f"{freq} {span.key} due {months} month(s) and {offset} day(s) after"
        )
    else:
        day = span.first if anchor == "period_start" else span.last
        # Clamp in ordinals so that an absurd offset can never overflow a date.
        target = day.toordinal() + offset
        unrolled = date.fromordinal(min(max(target, span.first.toordinal()), span.last.toordinal()))
    return business.roll(unrolled, roll)


def check_due_rule(
    due_anchor: object,
    due_offset_days: object,
    due_offset_months: object = 0,
    due_roll: object = "none",
    holiday_calendar: object = None,
) -> tuple[str, int, int, str, str | None]:
    """The due-date fields of ``due_date_for``, checked in the order it checks them.

    Kinds first (anchor, the two counts, roll, calendar), then the ranges the
    anchor allows: months 0-24 and days 0-366 after the period; no months on
    the two older anchors, whose day offset clamps into the period instead.
    """
    anchor = check_due_anchor(due_anchor)
    offset = check_day_count(due_offset_days, "due_offset_days")
    months = _check_count(due_offset_months, "due_offset_months", "months")
    roll = check_due_roll(due_roll)
    calendar = check_holiday_calendar(holiday_calendar)
    if anchor == "after_period_end":
        _check_range(months, "due_offset_months", 0, MAX_MONTHS_AFTER_PERIOD, anchor)
        _check_range(offset, "due_offset_days", 0, MAX_DAYS_AFTER_PERIOD, anchor)
    else:
        _check_range(months, "due_offset_months", 0, 0, anchor)
    return anchor, offset, months, roll, calendar


def late_after_for(due_date: date, grace_days: int) -> date:
    """``due_date + grace_days`` calendar days: the last day a task is not yet late."""
    due = dates.check_day(due_date, "due_date")
    grace = check_grace_days(grace_days)
    return dates.add_days(due, grace, f"due_date {due.isoformat()} plus grace_days {grace}")


def is_business_day(day: date, holiday_calendar: str | None = None) -> bool:
    """Whether ``day`` is neither a weekend day nor a public holiday of ``holiday_calendar``."""
    checked = dates.check_day(day, "day")
    return business_days.business_calendar(
        check_holiday_calendar(holiday_calendar)
    ).is_business_day(checked)


def check_due_anchor(due_anchor: object) -> str:
    """``due_anchor`` if it is one of ``ANCHORS``; else ``UnknownAnchorError``."""
    if not isinstance(due_anchor, str) or due_anchor not in ANCHORS:
        raise UnknownAnchorError(
            f"unknown due anchor {due_anchor!r}; expected one of {', '.join(map(repr, ANCHORS))}"
        )
    return due_anchor


def check_due_roll(due_roll: object) -> str:
    """``due_roll`` if it is one of ``business_days.ROLLS``; else ``UnknownRollError``."""
    return business_days.check_roll(due_roll)


def check_holiday_calendar(holiday_calendar: object) -> str | None:
    """``holiday_calendar`` if it is None or a code the pinned ``holidays`` package defines."""
    return business_days.check_holiday_calendar(holiday_calendar)


def check_grace_days(grace_days: object) -> int:
    """``grace_days`` if it is a whole number of days in 0-366."""
    grace = check_day_count(grace_days, "grace_days")
    _check_range(grace, "grace_days", 0, MAX_GRACE_DAYS, None)
    return grace


def _check_count(value: object, name: str, unit: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidDayCountError(
            f"{name} must be an int number of {unit}, got {value!r} "
            f"({type(value).__name__}); expected a whole number such as 0, 1 or 4"
        )
    return value


def _check_range(value: int, name: str, low: int, high: int, anchor: str | None) -> None:
    if low <= value <= high:
        return
    context = "" if anchor is None else f" with due_anchor {anchor!r}"
    expected = f"exactly {low}" if low == high else f"{low}-{high}"
    raise OffsetOutOfRangeError(f"{name} {value!r} is out of range{context}; expected {expected}")


def period_days(frequency: str, period_key: str) -> tuple[date, date]:
    """The first and last calendar day of ``period_key``: the same days in every zone."""
    span = _keys.span_of_key(_keys.check_frequency(frequency), period_key)
    return span.first, span.last


def visible_from_for(due_date: date, lead_days: int) -> date:
    """``due_date - lead_days``, deliberately not clamped into the period."""
    due = dates.check_day(due_date, "due_date")
    lead = check_day_count(lead_days, "lead_days")
    target = due.toordinal() - lead
    if not dates.FIRST_DAY.toordinal() <= target <= dates.LAST_DAY.toordinal():
        raise YearOutOfRangeError(
            f"due_date {due.isoformat()} minus lead_days {lead!r} leaves "
            f"{dates.YEAR_RANGE}; expected a visible-from date within them"
        )
    return date.fromordinal(target)


def periods_between(frequency: str, start: datetime, end: datetime, timezone: str) -> list[str]:
    """Keys from the period containing ``start`` to the one containing ``end``, inclusive.

    Ascending, without duplicates; ``[]`` when ``end < start``; periods that
    hold no instant (a day the zone skipped) are left out.
    """
    freq = _keys.check_frequency(frequency)
    tz = zone(timezone)
    first_day = dates.local_date_in(start, tz, "start")
    last_day = dates.local_date_in(end, tz, "end")
    if dates.utc_naive(end) < dates.utc_naive(start):
        return []
    keys: list[str] = []
    span = _keys.span_containing(freq, first_day)
    while True:
        if dates.holds_an_instant(span.first, span.last, tz):
            keys.append(span.key)
        # Where clocks went back over midnight, ``end`` can show an earlier
        # date than ``start``; the start's own period is still included.
        if span.last >= last_day:
            return keys
        span = _keys.span_containing(freq, span.last + _keys.ONE_DAY)


def check_day_count(value: object, name: str) -> int:
    """``value`` if it is a plain int day count; booleans and floats are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidDayCountError(
            f"{name} must be an int number of days, got {value!r} "
            f"({type(value).__name__}); expected a whole number such as 0, 7 or -3"
        )
    return value
