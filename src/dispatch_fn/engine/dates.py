"""Local calendar days and the one rule that turns a day into an instant.

The rule (docs/adr/0001-period-boundaries.md): a local day starts at the
earliest instant whose local calendar date is that day or later. That is local
midnight; the first occurrence of midnight when clocks went back over it; the
first instant after the gap when clocks jumped over it; and, for a day the zone
skipped entirely, the start of the next day, so the skipped day is empty.
"""

from __future__ import annotations

import calendar
import functools
from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from dispatch_fn.errors import InvalidDateError, NaiveDatetimeError, YearOutOfRangeError

MIN_YEAR = 1583
MAX_YEAR = 9999
FIRST_DAY = date(MIN_YEAR, 1, 1)
LAST_DAY = date(MAX_YEAR, 12, 31)
YEAR_RANGE = f"calendar years {MIN_YEAR}-{MAX_YEAR}"

_ONE_SECOND = timedelta(seconds=1)


def check_instant(instant: object, role: str) -> datetime:
    """``instant`` if it is an aware datetime, else ``NaiveDatetimeError``."""
    if not isinstance(instant, datetime):
        raise NaiveDatetimeError(
            f"{role} must be an aware datetime, got {instant!r}; "
            "expected a datetime with tzinfo set"
        )
    if instant.utcoffset() is None:
        raise NaiveDatetimeError(
            f"naive datetime {instant!r} for {role}; expected an aware datetime (tzinfo set)"
        )
    return instant


def check_day(day: object, role: str) -> date:
    """``day`` if it is a plain date within the supported years."""
    # A datetime is a date subclass; accepting one would silently drop its
    # time and zone, so only plain dates are calendar days here.
    if not isinstance(day, date) or isinstance(day, datetime):
        raise InvalidDateError(
            f"{role} must be a datetime.date, got {day!r}; expected a plain calendar date"
        )
    if not MIN_YEAR <= day.year <= MAX_YEAR:
        raise _year_refused(day.year, f"{role} {day.isoformat()}")
    return day


def _year_refused(year: int, what: str) -> YearOutOfRangeError:
    # Built only on failure: formatting the message costs more than the check.
    return YearOutOfRangeError(f"{what} is in year {year!r}; expected {YEAR_RANGE}")


def utc_naive(instant: datetime) -> datetime:
    """``instant`` as a naive UTC datetime, for exact instant comparisons."""
    # Aware datetimes sharing one tzinfo compare and subtract by wall time,
    # which is wrong inside a repeated hour; naive UTC values never are.
    offset = instant.utcoffset()
    assert offset is not None  # noqa: S101 - callers pass checked instants
    try:
        return instant.replace(tzinfo=None) - offset
    except OverflowError:
        raise YearOutOfRangeError(
            f"instant {instant!r} lies outside the datetime range; expected {YEAR_RANGE}"
        ) from None


def local_date_in(instant: datetime, zone: ZoneInfo, role: str = "instant") -> date:
    """The calendar date ``instant`` shows on a wall clock in ``zone``."""
    checked = check_instant(instant, role)
    try:
        local = checked.astimezone(zone)
    except OverflowError:
        # Only reachable for instants within a day of year 1 or year 9999's
        # end, i.e. where the local date would be outside the datetime range.
        raise YearOutOfRangeError(
            f"{role} {instant!r} has no local date in {zone.key!r} within {YEAR_RANGE}"
        ) from None
    day = local.date()
    if not MIN_YEAR <= day.year <= MAX_YEAR:
        raise _year_refused(day.year, f"local date of {role} {instant!r} in {zone.key!r}")
    return day


def _midnight(day: date, zone: ZoneInfo) -> tuple[datetime, timedelta, timedelta]:
    """Local midnight of ``day`` and the offsets before (fold=0) and after (fold=1) it."""
    midnight = datetime(day.year, day.month, day.day)  # noqa: DTZ001 - a wall-clock reading
    early = zone.utcoffset(midnight.replace(tzinfo=zone))
    late = zone.utcoffset(midnight.replace(tzinfo=zone, fold=1))
    assert early is not None  # noqa: S101 - a ZoneInfo always has an offset
    assert late is not None  # noqa: S101
    return midnight, early, late


def first_instant_utc(day: date, zone: ZoneInfo) -> datetime:
    """Naive UTC of the earliest instant whose local date in ``zone`` is ``day`` or later."""
    midnight, early, late = _midnight(day, zone)
    if early == late:
        # No transition touches midnight: the usual case, one conversion.
        return midnight - early
    # A transition touches midnight. fold=0 reads the wall clock with the
    # offset from before the transition, fold=1 with the one after. Each
    # reading that maps back to midnight is a real occurrence of midnight.
    occurrences = [
        midnight - offset for offset in (early, late) if _wall(midnight - offset, zone) == midnight
    ]
    if occurrences:
        # Clocks went back over midnight: take its first occurrence.
        return min(occurrences)
    # Midnight fell in a gap. Never extrapolate across it: the day starts at
    # the transition itself, which lies between the two readings. Transitions
    # are whole UTC seconds, so search the seconds between them.
    before = midnight - max(early, late)  # local date is still an earlier day
    after = midnight - min(early, late)  # local date is ``day`` or later
    while after - before > _ONE_SECOND:
        middle = before + (after - before) // 2
        middle -= timedelta(microseconds=middle.microsecond)
        if _wall(middle, zone).date() >= day:
            after = middle
        else:
            before = middle
    return after


def holds_an_instant(first: date, last: date, zone: ZoneInfo) -> bool:
    """Whether any instant shows a date in ``first``..``last`` (false for a skipped day)."""
    _, early, late = _midnight(first, zone)
    if early == late:
        return True  # midnight exists, so the first day holds at least that instant
    # Otherwise the run's first instant shows a later date than its last day
    # exactly when the zone jumped over all of it (Pacific/Apia 2011-12-30).
    return _wall(first_instant_utc(first, zone), zone).date() <= last


def _wall(utc: datetime, zone: ZoneInfo) -> datetime:
    """The naive wall-clock reading in ``zone`` of naive UTC ``utc``."""
    return zone.fromutc(utc.replace(tzinfo=zone)).replace(tzinfo=None, fold=0)


def as_local_instant(utc: datetime, zone: ZoneInfo) -> datetime:
    """Naive UTC ``utc`` as an aware datetime carrying ``zone``'s offset at that instant."""
    local = zone.fromutc(utc.replace(tzinfo=zone))
    offset = local.utcoffset()
    assert offset is not None  # noqa: S101 - a ZoneInfo always has an offset
    # A fixed-offset tzinfo keeps the local wall time readable while making
    # comparisons and equality exact: ZoneInfo datetimes compare by wall time
    # within one zone, and PEP 495 makes an ambiguous one unequal to any
    # datetime in another zone, even the same instant.
    return local.replace(tzinfo=_fixed(offset), fold=0)


@functools.cache
def _fixed(offset: timedelta) -> timezone:
    return UTC if not offset else timezone(offset)


def add_months(day: date, months: int) -> date:
    """``day`` moved ``months`` calendar months on; a month's last day stays a month's last day.

    Any other day keeps its day of the month, clamped to the target month's
    length (January 30 + 1 month is February 28 or 29).
    """
    years, month0 = divmod(day.month - 1 + months, 12)
    year, month = day.year + years, month0 + 1
    if not MIN_YEAR <= year <= MAX_YEAR:
        raise _year_refused(year, f"{day.isoformat()} plus {months} month(s)")
    length = calendar.monthrange(year, month)[1]
    if day.day == calendar.monthrange(day.year, day.month)[1]:
        return date(year, month, length)
    return date(year, month, min(day.day, length))


def add_days(day: date, days: int, what: str) -> date:
    """``day`` plus ``days``, refused if that leaves the supported years."""
    target = day.toordinal() + days
    if not FIRST_DAY.toordinal() <= target <= LAST_DAY.toordinal():
        raise YearOutOfRangeError(f"{what} leaves {YEAR_RANGE}; expected a date within them")
    return date.fromordinal(target)
