"""Period keys: which local days each key names, and the key of any local day.

Everything here is calendar arithmetic on ``date``; no zone, no instant. A
period is a run of whole local days, so it is held as its first and last day.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import Final, NamedTuple

from dispatch_fn.engine.dates import FIRST_DAY, LAST_DAY, MAX_YEAR, MIN_YEAR, YEAR_RANGE
from dispatch_fn.errors import MalformedPeriodKeyError, UnknownFrequencyError, YearOutOfRangeError

ONE_DAY: Final = timedelta(days=1)

_MONTH_DAYS: Final = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_FIRST_ORDINAL = FIRST_DAY.toordinal()
_LAST_ORDINAL = LAST_DAY.toordinal()


class _Frequency(NamedTuple):
    """Everything one frequency is: its key's shape, and its two directions."""

    shape: str  # for messages: the spelling a key must have
    pattern: re.Pattern[str]  # ASCII digits only: ``\d`` would accept other scripts' digits
    containing: Callable[[date], Span]  # local day -> its period
    parse: Callable[[str], Span]  # key -> its period, strictly


class Span(NamedTuple):
    """One period: its key and the inclusive range of local days it covers."""

    key: str
    first: date
    last: date


def check_frequency(frequency: object) -> str:
    """``frequency`` if it is one of ``FREQUENCIES``."""
    if not isinstance(frequency, str) or frequency not in FREQUENCIES:
        raise UnknownFrequencyError(
            f"unknown frequency {frequency!r}; expected one of {', '.join(FREQUENCIES)}"
        )
    return frequency


def span_containing(frequency: str, day: date) -> Span:
    """The period of ``frequency`` that contains local day ``day``."""
    return _TABLE[frequency].containing(day)


def span_of_key(frequency: str, key: object) -> Span:
    """The period ``key`` names, parsed strictly: near misses are refused, never repaired."""
    if not isinstance(key, str):
        raise MalformedPeriodKeyError(
            f"{frequency} period key must be a str, got {key!r}; "
            f"expected the form {_TABLE[frequency].shape}"
        )
    return _TABLE[frequency].parse(key)


# --- days -> periods -------------------------------------------------------


def _day_containing(day: date) -> Span:
    return Span(day.isoformat(), day, day)


def _iso_weeks(iso_year: int) -> int:
    """52 or 53: 28 December always lies in the last ISO week of its year."""
    return date(iso_year, 12, 28).isocalendar().week


def _week_span(iso_year: int, week: int, weeks: int) -> Span:
    """Span of ``weeks`` ISO weeks from (``iso_year``, ``week``), refusing days past the range."""
    key = f"{iso_year:04d}-W{week:02d}"
    if not MIN_YEAR <= iso_year <= MAX_YEAR:
        raise YearOutOfRangeError(
            f"period {key!r} is in ISO week-year {iso_year!r}; expected {YEAR_RANGE}"
        )
    # Ordinals, not dates: the last week of week-year 9999 ends in 10000,
    # which ``date`` cannot hold, and week 1 of 1583 is the first to start
    # after 1583-01-01.
    first = date.fromisocalendar(iso_year, week, 1).toordinal()
    last = first + 7 * weeks - 1
    if first < _FIRST_ORDINAL or last > _LAST_ORDINAL:
        raise YearOutOfRangeError(
            f"period {key!r} has days outside {YEAR_RANGE}; expected a period within them"
        )
    return Span(key, date.fromordinal(first), date.fromordinal(last))


def _week_containing(day: date) -> Span:
    iso_year, week, _ = day.isocalendar()
    return _week_span(iso_year, week, 1)


def _fortnight_weeks(iso_year: int, first_week: int) -> int:
    # Fortnights restart at week 1 of every week-year, so a 53-week year
    # ends with a one-week fortnight, W53.
    return 1 if first_week == _iso_weeks(iso_year) else 2


def _fortnight_containing(day: date) -> Span:
    iso_year, week, _ = day.isocalendar()
    first_week = week if week % 2 else week - 1
    return _week_span(iso_year, first_week, _fortnight_weeks(iso_year, first_week))


def _month_block(year: int, first_month: int, months: int, key: str) -> Span:
    last_month = first_month + months - 1
    last_day = 29 if last_month == 2 and calendar.isleap(year) else _MONTH_DAYS[last_month]
    return Span(key, date(year, first_month, 1), date(year, last_month, last_day))


def _month_containing(day: date) -> Span:
    return _month_block(day.year, day.month, 1, f"{day.year:04d}-{day.month:02d}")


def _quarter_containing(day: date) -> Span:
    quarter = (day.month - 1) // 3 + 1
    return _month_block(day.year, 3 * quarter - 2, 3, f"{day.year:04d}-Q{quarter}")


def _half_containing(day: date) -> Span:
    half = (day.month - 1) // 6 + 1
    return _month_block(day.year, 6 * half - 5, 6, f"{day.year:04d}-H{half}")


def _year_containing(day: date) -> Span:
    return _month_block(day.year, 1, 12, f"{day.year:04d}")


# --- keys -> periods ---------------------------------------------------------


def _fields(frequency: str, key: str) -> list[int]:
    """The numeric fields of ``key`` after an exact match of its shape and year."""
    match = _TABLE[frequency].pattern.fullmatch(key)
    if match is None:
        raise MalformedPeriodKeyError(
            f"malformed {frequency} key {key!r}; expected {_TABLE[frequency].shape}"
        )
    fields = [int(group) for group in match.groups()]
    if not MIN_YEAR <= fields[0] <= MAX_YEAR:
        raise YearOutOfRangeError(
            f"{frequency} key {key!r} is in year {fields[0]!r}; expected {YEAR_RANGE}"
        )
    return fields


def _out_of_range(frequency: str, key: str, what: str) -> MalformedPeriodKeyError:
    return MalformedPeriodKeyError(
        f"{frequency} key {key!r} names no period: {what}; expected {_TABLE[frequency].shape}"
    )


def _parse_day(key: str) -> Span:
    year, month, day = _fields("daily", key)
    try:
        value = date(year, month, day)
    except ValueError:
        raise _out_of_range("daily", key, "not a calendar date") from None
    return _day_containing(value)


def _parse_week(frequency: str, key: str) -> tuple[int, int]:
    iso_year, week = _fields(frequency, key)
    weeks = _iso_weeks(iso_year)
    if not 1 <= week <= weeks:
        raise _out_of_range(frequency, key, f"ISO week-year {iso_year} has weeks W01-W{weeks}")
    return iso_year, week


def _parse_weekly(key: str) -> Span:
    return _week_span(*_parse_week("weekly", key), 1)


def _parse_fortnightly(key: str) -> Span:
    iso_year, week = _parse_week("fortnightly", key)
    if week % 2 == 0:
        raise _out_of_range(
            "fortnightly", key, f"W{week:02d} is even and fortnights start on odd ISO weeks"
        )
    return _week_span(iso_year, week, _fortnight_weeks(iso_year, week))


def _parse_monthly(key: str) -> Span:
    year, month = _fields("monthly", key)
    if not 1 <= month <= 12:
        raise _out_of_range("monthly", key, "months run 01-12")
    return _month_containing(date(year, month, 1))


def _parse_quarterly(key: str) -> Span:
    year, quarter = _fields("quarterly", key)
    if not 1 <= quarter <= 4:
        raise _out_of_range("quarterly", key, "quarters run Q1-Q4")
    return _quarter_containing(date(year, 3 * quarter - 2, 1))


def _parse_semiannual(key: str) -> Span:
    year, half = _fields("semiannual", key)
    if not 1 <= half <= 2:
        raise _out_of_range("semiannual", key, "halves run H1-H2")
    return _half_containing(date(year, 6 * half - 5, 1))


def _parse_annual(key: str) -> Span:
    (year,) = _fields("annual", key)
    return _year_containing(date(year, 1, 1))


# --- the table -----------------------------------------------------------------

_TABLE: Final[dict[str, _Frequency]] = {
    "daily": _Frequency(
        "YYYY-MM-DD, e.g. '2026-08-21'",
        re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})"),
        _day_containing,
        _parse_day,
    ),
    "weekly": _Frequency(
        "YYYY-Www (ISO week-year, two-digit ISO week), e.g. '2026-W34'",
        re.compile(r"([0-9]{4})-W([0-9]{2})"),
        _week_containing,
        _parse_weekly,
    ),
    "fortnightly": _Frequency(
        "YYYY-Www naming the fortnight's odd starting ISO week, e.g. '2026-W33'",
        re.compile(r"([0-9]{4})-W([0-9]{2})"),
        _fortnight_containing,
        _parse_fortnightly,
    ),
    "monthly": _Frequency(
        "YYYY-MM, e.g. '2026-08'",
        re.compile(r"([0-9]{4})-([0-9]{2})"),
        _month_containing,
        _parse_monthly,
    ),
    "quarterly": _Frequency(
        "YYYY-Qn with n in 1-4, e.g. '2026-Q3'",
        re.compile(r"([0-9]{4})-Q([0-9])"),
        _quarter_containing,
        _parse_quarterly,
    ),
    "semiannual": _Frequency(
        "YYYY-Hn with n in 1-2, e.g. '2026-H2'",
        re.compile(r"([0-9]{4})-H([0-9])"),
        _half_containing,
        _parse_semiannual,
    ),
    "annual": _Frequency(
        "YYYY, e.g. '2026'",
        re.compile(r"([0-9]{4})"),
        _year_containing,
        _parse_annual,
    ),
}

FREQUENCIES: Final = tuple(_TABLE)
