"""Business days: weekends and public holidays, and rolling a date onto one.

Holidays come from the pinned ``holidays`` package, for the reason tzdata is
pinned: a due date must not change because the host or a minor upgrade knows
a different set of holidays. Each country's own weekend comes with it (Saudi
Arabia rests on Friday and Saturday). Without a calendar, only Saturday and
Sunday are not business days.
"""

from __future__ import annotations

import functools
import warnings
from datetime import date, timedelta
from typing import Final

from dispatch_fn.engine import dates
from dispatch_fn.errors import UnknownHolidayCalendarError, UnknownRollError, YearOutOfRangeError

ROLLS: Final = ("none", "following", "preceding", "modified_following")

_SATURDAY_SUNDAY: Final = frozenset({5, 6})
_ONE_DAY: Final = timedelta(days=1)
# Longest code the package uses ("US-CA", "GB-SCT", "AE-AZ"...) is well under
# this; a longer value is refused before it is quoted in a message in full.
_MAX_CODE_LENGTH: Final = 16


class BusinessCalendar:
    """Which days are business days under one holiday calendar (or none)."""

    __slots__ = ("_country", "_subdivision", "_years", "code", "weekend")

    def __init__(self, code: str | None) -> None:
        self.code = code
        self._years: dict[int, frozenset[date]] = {}
        if code is None:
            self._country = ""
            self._subdivision: str | None = None
            self.weekend: frozenset[int] = _SATURDAY_SUNDAY
            return
        import holidays  # noqa: PLC0415 - see _supported

        country, _, subdivision = code.partition("-")
        self._country, self._subdivision = country, subdivision or None
        self.weekend = frozenset(
            holidays.country_holidays(country, subdiv=self._subdivision).weekend
        )

    def is_business_day(self, day: date) -> bool:
        """Neither a weekend day of this calendar's country nor one of its public holidays."""
        if day.weekday() in self.weekend:
            return False
        return not self.code or day not in self._holidays_of(day.year)

    def _holidays_of(self, year: int) -> frozenset[date]:
        found = self._years.get(year)
        if found is None:
            # Some countries define holidays for a span of years only (India
            # 2001-2035, lunar calendars within their tables) and warn outside
            # it; there the package knows no holidays, so only the weekend
            # counts. That is the package's definition, kept as it is.
            import holidays  # noqa: PLC0415 - see _supported

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = frozenset(
                    holidays.country_holidays(
                        self._country, subdiv=self._subdivision, years=year
                    ).keys()
                )
            self._years[year] = found
        return found

    def next_business_day(self, day: date, step: int) -> date:
        """The nearest business day strictly after (``step`` 1) or before (-1) ``day``."""
        delta = _ONE_DAY if step > 0 else -_ONE_DAY
        edge = dates.LAST_DAY if step > 0 else dates.FIRST_DAY
        candidate = day
        while True:
            if candidate == edge:
                raise YearOutOfRangeError(
                    f"rolling {day.isoformat()} {'forward' if step > 0 else 'back'} onto a "
                    f"business day of {self.code or 'Saturday/Sunday weekends'} leaves "
                    f"{dates.YEAR_RANGE}; expected a business day within them"
                )
            candidate += delta
            if self.is_business_day(candidate):
                return candidate

    def roll(self, day: date, rule: str) -> date:
        """``day`` moved onto a business day by ``rule`` (one of ``ROLLS``)."""
        if rule == "none" or self.is_business_day(day):
            return day
        if rule == "following":
            return self.next_business_day(day, 1)
        if rule == "preceding":
            return self.next_business_day(day, -1)
        following = self.next_business_day(day, 1)
        if (following.year, following.month) == (day.year, day.month):
            return following
        return self.next_business_day(day, -1)


def check_roll(value: object) -> str:
    """``value`` if it is one of ``ROLLS``; else ``UnknownRollError``."""
    if not isinstance(value, str) or value not in ROLLS:
        raise UnknownRollError(
            f"unknown due_roll {_short(value)}; expected one of {', '.join(ROLLS)}"
        )
    return value


def check_holiday_calendar(value: object) -> str | None:
    """``value`` if it is None or a calendar code the ``holidays`` package defines."""
    if value is None:
        return None
    expected = (
        "expected a country code or country-subdivision such as 'US', 'US-CA', "
        "'DE-BY', 'GB-SCT', as the holidays package defines them, or null"
    )
    if not isinstance(value, str) or len(value) > _MAX_CODE_LENGTH:
        raise UnknownHolidayCalendarError(f"unknown holiday_calendar {_short(value)}; {expected}")
    country, dash, subdivision = value.partition("-")
    known = _supported()
    if country not in known or (dash and subdivision not in known[country]):
        raise UnknownHolidayCalendarError(f"unknown holiday_calendar {value!r}; {expected}")
    return value


@functools.cache
def business_calendar(code: str | None) -> BusinessCalendar:
    """The calendar for a checked ``code``, built once per process."""
    return BusinessCalendar(check_holiday_calendar(code))


@functools.cache
def _supported() -> dict[str, frozenset[str]]:
    # Imported on first use: the package costs ~8 MiB and a quarter of a
    # second to import, and a run whose duties name no calendar never needs it
    # (bench/cold_start.py and `make bench`'s baseline RSS measure it).
    import holidays  # noqa: PLC0415

    return {
        country: frozenset(subdivisions)
        for country, subdivisions in holidays.list_supported_countries().items()
    }


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."
