"""Every exception the dispatcher raises on purpose, in one place.

All but one: ``run.errors.RunFailedError`` carries a run's outcome, so it
lives in the run layer, and this module stays importable by every layer. The
contract lists them (docs/contract.md#errors).

Input the project refuses derives from ``ValueError``; callers route on the
exception *type*, never on its message.
"""

from __future__ import annotations


class PeriodError(ValueError):
    """The period engine refused an input."""


class UnknownFrequencyError(PeriodError):
    """A frequency that is not one of ``FREQUENCIES``."""


class UnknownTimezoneError(PeriodError):
    """A time zone name that is not an IANA zone in the bundled tz database."""


class NaiveDatetimeError(PeriodError):
    """A datetime without a time zone where an instant is required."""


class InvalidDayCountError(PeriodError):
    """A day count that is not a plain ``int`` (booleans included)."""


class UnknownAnchorError(PeriodError):
    """A due anchor other than ``period_start``, ``period_end`` or ``after_period_end``."""


class MalformedPeriodKeyError(PeriodError):
    """A period key that is not the exact spelling for its frequency."""


class YearOutOfRangeError(PeriodError):
    """A year outside 1583-9999 was read or would be emitted."""


class EventError(ValueError):
    """An invocation event the handler refuses; nothing was written."""


class ConfigurationError(RuntimeError):
    """The function's environment or credentials are unusable."""


class InvalidDateError(PeriodError):
    """A calendar day that is not a plain ``datetime.date`` (datetimes included)."""


class UnknownRollError(PeriodError):
    """A business-day roll that is not one of ``engine.ROLLS``."""


class UnknownHolidayCalendarError(PeriodError):
    """A holiday calendar the pinned ``holidays`` package does not define."""


class OffsetOutOfRangeError(PeriodError):
    """A due offset or grace outside the range its anchor allows."""


class MigrationError(RuntimeError):
    """A schema migration could not be applied; the message names the migration."""


class MigrationChecksumError(MigrationError):
    """An already-applied migration file was edited since it was applied."""


class EmbeddedServerBusyError(RuntimeError):
    """The embedded PostgreSQL cannot be stopped: another process still uses it."""


class DatabaseUnreachableError(RuntimeError):
    """A local command could not connect to its database (refused, timed out, down)."""


class ScheduleIntervalError(ValueError):
    """The time between two scheduled runs is not more than 0 and at most a day."""


class UnknownLayoutError(ValueError):
    """A table layout other than those ``db.layout.LAYOUTS`` names."""


class LayoutNotEmptyError(RuntimeError):
    """A table layout was asked of a database whose duties or tasks already hold rows."""


class RotationError(RuntimeError):
    """A step of the database secret's rotation cannot proceed; the message says why."""


class CadenceRefused(ValueError):  # noqa: N818 - reads as the outcome it is
    """The engine refused a cadence; ``reason`` is the fault to record."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class HandOffError(RuntimeError):
    """The continuation could not be handed off; the chain ends incomplete."""


class MigrationStepTimeoutError(RuntimeError):
    """The migration step's work outlasted the time it had to answer CloudFormation."""


class ResponseNotDeliveredError(RuntimeError):
    """CloudFormation's response URL could not be reached; the answer is lost."""
