"""The pure planner: which tasks a set of duties owes at a clock, and why not.

Decisions only — no database, no clock, no environment. The database path
asks this module the same questions once per frequency, zone and lead
bucket (``schedule_for``, ``check_cadence_rule``, ``classify``) and lets PostgreSQL
apply the per-duty rules (``within``, ``is_owed``, the due-date clamp) to a
whole page at once; the equivalence tests hold the two to the same answers.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any, Final, Protocol

from dispatch_fn.bounded import clip
from dispatch_fn.engine import (
    FIRST_DAY,
    check_day_count,
    check_due_rule,
    check_grace_days,
    due_date_for,
    late_after_for,
    local_date,
    period_days,
    period_key_for,
    periods_between,
    start_of_day,
    visible_from_for,
)
from dispatch_fn.errors import (
    CadenceRefused,
    NaiveDatetimeError,
    PeriodError,
    ScheduleIntervalError,
    UnknownFrequencyError,
    YearOutOfRangeError,
)
from dispatch_fn.settings import DEFAULT_CATCH_UP_DAYS


class SkipReason(StrEnum):
    """Ordinary reasons a duty yields no task (docs/contract.md#faults); the run is not degraded."""

    STANDING = "standing"
    ONE_OFF = "one_off"
    NOT_ACTIVE = "not_active"
    NOT_APPROVED = "not_approved"
    OUTSIDE_EFFECTIVE_WINDOW = "outside_effective_window"
    NOTHING_DUE = "nothing_due"


class FaultReason(StrEnum):
    """Reasons the engine refused a duty; any of them marks the run degraded.

    See docs/contract.md#faults.
    """

    UNKNOWN_FORM = "unknown_form"
    NO_FREQUENCY = "no_frequency"
    UNKNOWN_FREQUENCY = "unknown_frequency"
    INVALID_CADENCE = "invalid_cadence"


SKIP_REASONS: Final = tuple(SkipReason)
FAULT_REASONS: Final = tuple(FaultReason)

FORMS: Final = ("recurring", "one_off", "standing")
APPROVED: Final = "approved"

# What a null cadence column reads as: the column defaults of ``duly_duty``.
DEFAULT_TIMEZONE: Final = "UTC"
DEFAULT_ANCHOR: Final = "period_start"
DEFAULT_OFFSET_DAYS: Final = 0
DEFAULT_LEAD_DAYS: Final = 7
DEFAULT_OFFSET_MONTHS: Final = 0
DEFAULT_ROLL: Final = "none"
DEFAULT_GRACE_DAYS: Final = 0

# The time between two scheduled runs: the template's cron runs once a day
# (docs/contract.md#job); an operator may run it more often (DISPATCH_SCHEDULE_INTERVAL_HOURS).
SCHEDULE_INTERVAL: Final = timedelta(hours=24)
# The version of the owed rules themselves: a change to what this module owes
# bumps it, so the first run under the new rules judges every account afresh
# (docs/contract.md#account).
OWED_RULES: Final = "accounts-1"


class WindowLike(Protocol):
    """Anything with the backfill window's two dates (``to_date`` None: up to today)."""

    @property
    def from_date(self) -> date: ...

    @property
    def to_date(self) -> date | None: ...


@dataclass(frozen=True, slots=True)
class Window:
    """An inclusive backfill window of local calendar days."""

    from_date: date
    to_date: date | None = None


@dataclass(frozen=True, slots=True)
class Cadence:
    """The duty fields that decide its periods and dates."""

    frequency: str | None
    timezone: str = DEFAULT_TIMEZONE
    due_anchor: str = DEFAULT_ANCHOR
    due_offset_days: int = DEFAULT_OFFSET_DAYS
    lead_days: int = DEFAULT_LEAD_DAYS
    due_offset_months: int = DEFAULT_OFFSET_MONTHS
    due_roll: str = DEFAULT_ROLL
    holiday_calendar: str | None = None
    grace_days: int = DEFAULT_GRACE_DAYS

    @classmethod
    def of(cls, duty: Mapping[str, Any]) -> Cadence:
        """The cadence of a ``duly_duty`` row, null fields read as column defaults."""
        return cls(
            frequency=duty.get("frequency"),
            timezone=_default(duty.get("timezone"), DEFAULT_TIMEZONE),
            due_anchor=_default(duty.get("due_anchor"), DEFAULT_ANCHOR),
            due_offset_days=_default(duty.get("due_offset_days"), DEFAULT_OFFSET_DAYS),
            lead_days=_default(duty.get("lead_days"), DEFAULT_LEAD_DAYS),
            due_offset_months=_default(duty.get("due_offset_months"), DEFAULT_OFFSET_MONTHS),
            due_roll=_default(duty.get("due_roll"), DEFAULT_ROLL),
            holiday_calendar=duty.get("holiday_calendar"),
            grace_days=_default(duty.get("grace_days"), DEFAULT_GRACE_DAYS),
        )

    def due_date(self, period: Period) -> date:
        """``due_date_for`` of ``period`` under this cadence."""
        return due_date_for(
            str(self.frequency),
            period.key,
            self.timezone,
            self.due_anchor,
            self.due_offset_days,
            due_offset_months=self.due_offset_months,
            due_roll=self.due_roll,
            holiday_calendar=self.holiday_calendar,
        )

    def window_day(self, period: Period, due_date: date) -> date:
        """The day the effective window is tested on: the due date, or the period's last day.

        A task due after its period ends still reports on that period, so a
        duty that ended with the period still owes it (docs/contract.md#scheduled-run).
        """
        return period.last_day if self.due_anchor == "after_period_end" else due_date


@dataclass(frozen=True, slots=True)
class Period:
    """A candidate period: its key, its first and last local day, and whether it holds now."""

    key: str
    first_day: date
    last_day: date
    current: bool


@dataclass(frozen=True, slots=True)
class Schedule:
    """The periods every duty of one frequency and zone may owe at one clock.

    Anchor, offset and lead only pick due dates inside these periods and decide
    which are visible yet, so one schedule serves every duty of its frequency
    and zone. ``today`` is the duty-local date the effective window and the
    visibility gate test; None for a backfill, which has neither. A scheduled
    run's periods reach back to the catch-up horizon: ``horizon`` is the last
    local day whose periods are too old to owe unless still current, and
    ``origin`` the local day of the scheduled clock before the run, from
    which a duty whose account no run has kept yet owes (``owed_verdict``).
    ``after`` is the period after the last: never a candidate, it tells the
    duty with the largest lead the day its next period becomes owed
    (migration 0014's next owed day); None in a backfill and at the
    calendar's end.
    """

    today: date | None
    periods: tuple[Period, ...]
    horizon: date | None = None
    origin: date | None = None
    after: Period | None = None


@dataclass(frozen=True, slots=True)
class Account:
    """A duty's own account (docs/contract.md#account): the ``dispatch_*`` columns of its row.

    ``through``: the local day through which its owed periods are dispatched
    (None: no run kept it yet). ``paused_on``: it stopped being dispatchable
    after that day's scheduled clock. ``changed_on``: it became dispatchable
    again, or its cadence or owner changed, after that day's scheduled clock.
    ``owed_between``: while ``paused_on`` bounds the account, the spans of
    days a resume opened and the next pause closed (``[first, end)``, ``end``
    None while open): what became owed on them is owed (migration 0016).
    """

    through: date | None = None
    paused_on: date | None = None
    changed_on: date | None = None
    owed_between: tuple[tuple[date, date | None], ...] = ()

    @classmethod
    def of(cls, duty: Mapping[str, Any]) -> Account:
        """The account of a ``duly_duty`` row; missing columns read as null."""
        # A datemultirange: ranges of dates, each [lower, upper) as PostgreSQL
        # keeps a discrete range.
        spans = duty.get("dispatch_owed_between") or ()
        return cls(
            duty.get("dispatch_through"),
            duty.get("dispatch_paused_on"),
            duty.get("dispatch_changed_on"),
            tuple((span.lower, span.upper) for span in spans),
        )

    def owes_between(self, day: date) -> bool:
        """Whether ``day`` lies in a span a resume opened since the pause."""
        return any(first <= day and (end is None or day < end) for first, end in self.owed_between)

    def owes_on(self, day: date) -> bool:
        """Whether what becomes owed on ``day`` after the account's day is owed: not paused then."""
        return self.paused_on is None or day <= self.paused_on or self.owes_between(day)

    def since(self, schedule: Schedule) -> date | None:
        """The day after which the account owes what became owed (owed_verdict's lower bound).

        No account kept: the duty existed before the first run that keeps
        accounts and owes from the schedule's origin, whatever was edited
        since, or from an earlier change's day (a scoped run's clock placed
        it); one that was not dispatchable then carries a pause (the
        trigger marks one added paused), which bounds it.
        """
        if self.through is not None:
            return self.through
        if self.changed_on is not None and schedule.origin is not None:
            return min(schedule.origin, self.changed_on)
        return schedule.origin

    def fresh(self, schedule: Schedule) -> date | None:
        """The day as of which a change owes the current period (owed_verdict's fresh day).

        A change's day, or, for an account no run kept, the schedule's origin:
        such a duty owes its current period as a new duty does, if it owed
        when that period became owed (owed_verdict asks). None: no run owes
        this account anything afresh.
        """
        if self.changed_on is not None:
            return self.changed_on
        return schedule.origin if self.through is None else None

    def rejudged(self) -> Account:
        """This account for a run whose rules changed: it owes as if changed on its own day."""
        if self.changed_on is not None or self.through is None:
            return self
        return Account(self.through, self.paused_on, self.through, self.owed_between)


@dataclass(frozen=True, slots=True)
class Fault:
    """A duty left without tasks, and why: the one shape of every fault a run reports.

    The planner's skips (an ordinary reason or a fault), the faults counted
    before the pages, the duties the server refused and those a page set
    aside (``settling.SetAside``) are each one of these. ``organization_id``
    is the duty's where the run read its row (None: known by id alone, as a
    locked row whose id no unlocked row shares): on a layout keyed by
    ``(organization_id, id)`` an id may repeat across organisations (ADR 0005).
    """

    duty_id: str
    reason: str
    detail: str = ""
    organization_id: str | None = None

    def as_json(self) -> dict[str, str]:
        """As a report lists it: each text clipped, the reason as its plain value."""
        return {
            "duty_id": clip(self.duty_id),
            "reason": str(self.reason),
            "detail": clip(self.detail),
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """The planner's answer: task rows to insert and duties that yield none.

    Both names are the contract's (docs/contract.md#faults). ``skipped`` lists every duty that
    yields nothing, faults included; a run report's ``skipped`` counts only the
    ordinary reasons, which is ``skip_counts()`` here, and its ``faults`` are
    ``faults`` here.
    """

    drafts: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[Fault] = field(default_factory=list)

    @property
    def faults(self) -> list[Fault]:
        """The skipped duties whose reason is a fault."""
        return [skip for skip in self.skipped if skip.reason in FAULT_REASONS]

    def skip_counts(self) -> dict[str, int]:
        """Skipped duties counted per ordinary reason."""
        counts = Counter(skip.reason for skip in self.skipped if skip.reason in SKIP_REASONS)
        return dict(sorted(counts.items()))


def classify(form: object, status: object, review_status: object = APPROVED) -> str | None:
    """Why a duty of this form, status and review is not dispatched, or None if it is.

    The form is judged first: a standing duty is never dispatched whatever its
    status, and an unknown form is a broken row even when paused. Then the
    status, then the review gate: only an approved definition is dispatched.
    The statements ask the same of SQL as ``duly_dispatchable`` (migration
    0010); the equivalence tests hold the two to the same answers.
    """
    if form == "standing":
        return SkipReason.STANDING
    if form == "one_off":
        return SkipReason.ONE_OFF
    if form != "recurring":
        return FaultReason.UNKNOWN_FORM
    if status != "active":
        return SkipReason.NOT_ACTIVE
    if review_status != APPROVED:
        return SkipReason.NOT_APPROVED
    return None


def unknown_form_detail(form: object) -> str:
    """The fault detail for a duty whose form is none of the known ones."""
    return f"unknown form {form!r}; expected one of {', '.join(FORMS)}"


def within(day: date, effective_from: date | None, effective_to: date | None) -> bool:
    """Whether ``day`` lies in ``[effective_from, effective_to]``; a null bound is open."""
    return (effective_from is None or day >= effective_from) and (
        effective_to is None or day <= effective_to
    )


def schedule_for(
    frequency: str | None,
    timezone: str,
    now: datetime,
    window: WindowLike | None = None,
    *,
    lead_horizon: int = 0,
    previous: datetime | None = None,
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS,
) -> Schedule:
    """The candidate periods of a frequency in a zone, enough for leads up to ``lead_horizon``.

    A scheduled run's candidates reach back ``catch_up_days`` (at least one)
    before today (docs/contract.md#account); ``previous`` is the scheduled
    clock a duty with no kept account owes from (None: ``now -
    SCHEDULE_INTERVAL``). Raises ``CadenceRefused`` naming the fault if the
    engine refuses them.
    """
    if frequency is None:
        raise CadenceRefused(
            FaultReason.NO_FREQUENCY, "frequency is null; a recurring duty needs one"
        )
    try:
        return _schedule_for(
            frequency,
            timezone,
            now,
            window,
            (
                lead_horizon,
                now - SCHEDULE_INTERVAL if previous is None else previous,
                catch_up_days,
            ),
        )
    except PeriodError as exc:
        raise _refusal(exc) from exc


# The lower bounds of the lead buckets: 1, 2, 4, ... 2**30 days (a lead of 0
# or less is bucket 0). The database path plans one schedule per frequency,
# zone and bucket, so a duty's group is planned for at most twice its own lead
# (ADR 0009). The SQL spelling of the same rule is
# ``width_bucket(lead_days, %(lead_thresholds)s::int[])`` with these bounds, in
# statements/duty_census.sql, due_rules.sql, fault_members.sql and
# the page statements (page_write.sql, page_dry_run.sql, page_taken_ids.sql).
LEAD_THRESHOLDS: Final = tuple(2**n for n in range(31))


def lead_bucket(lead_days: int) -> int:
    """The bucket of ``lead_days``: how many of ``LEAD_THRESHOLDS`` it reaches (width_bucket)."""
    return bisect.bisect_right(LEAD_THRESHOLDS, lead_days)


def check_cadence_rule(cadence: Cadence) -> None:
    """Raise ``CadenceRefused`` if the engine refuses this cadence's due-date fields or grace."""
    try:
        check_due_rule(
            cadence.due_anchor,
            cadence.due_offset_days,
            cadence.due_offset_months,
            cadence.due_roll,
            cadence.holiday_calendar,
        )
        check_grace_days(cadence.grace_days)
    except PeriodError as exc:
        raise _refusal(exc) from exc


def account_after(
    account: Account, schedule: Schedule, *, owed: bool, closed: bool = False
) -> Account:
    """The account a run at ``schedule``'s clock leaves a duty it judged (``owed``: anything).

    The page statements' ``keeping`` rule: a backfill, or a clock before the
    account's day, leaves it; otherwise it moves to today where the duty owed
    something, carries a mark, has no account yet or its window has
    ``closed`` (today is past its end), and its marks go, but for those of
    edits placed after today.
    """
    today = schedule.today
    if today is None or (account.through is not None and account.through > today):
        return account
    marked = account.paused_on is not None or account.changed_on is not None
    if not (owed or marked or closed or account.through is None):
        return account
    through = today if account.through is None else max(account.through, today)
    changed = account.changed_on
    stays = changed is not None and today < changed < date.max
    # A resume after the window's last day leaves no change mark (migration
    # 0024): the open span it began after today says the pause held past it.
    resumed_after = account.paused_on is not None and any(
        end is None and (first - today).days > 1 for first, end in account.owed_between
    )
    if not (stays or resumed_after):
        return Account(through)
    # Marks of edits placed after today (a run at a past clock) stay: a
    # resume there still says what became owed before it was not.
    paused = None if account.paused_on is None else max(account.paused_on, through)
    spans = account.owed_between if paused is not None else ()
    return Account(through, paused, changed if stays else None, spans)


def _window_closed(today: date | None, effective_to: date | None) -> bool:
    return today is not None and effective_to is not None and today > effective_to


def _owed_on(clock: datetime | None, cadence: Cadence) -> date | None:
    """The local day, in the duty's zone, of the judgement afresh owed at ``clock``."""
    return None if clock is None else local_date(clock, cadence.timezone)


def account_judged(
    account: Account,
    today: date | None,
    effective_to: date | None,
    *,
    rejudge: bool,
    owed_on: date | None = None,
) -> Account:
    """The account a run at ``today`` judges by: rejudged where a judgement afresh is owed.

    Rules new at this run (``rejudge``) owe it as of the run's own day, not
    the account's: a window that ended before today owes nothing more by
    them. A duty the previous run set aside while it judged it afresh is owed
    that run's judgement, as of its day ``owed_on`` (docs/contract.md#account).
    """
    owed = (rejudge and not _window_closed(today, effective_to)) or (
        owed_on is not None and not _window_closed(owed_on, effective_to)
    )
    return account.rejudged() if owed else account


def window_closed_behind(account: Account, schedule: Schedule, effective_to: date | None) -> bool:
    """Whether the duty's window ended after its account's day, or on a change's: it still owes.

    What became owed in the window after the account's day is owed, and so is
    the current period a change placed on the window's last day owes (an
    owner change after that day's run, docs/contract.md#account).
    """
    if effective_to is None or not _window_closed(schedule.today, effective_to):
        return False
    since, fresh = account.since(schedule), account.fresh(schedule)
    return (since is not None and since < effective_to) or (
        fresh is not None and fresh <= effective_to
    )


def became_owed_on(
    period: Period, visible_from: date, lead_days: int, opens: date | None = None
) -> date:
    """The local day a period becomes owed: its first day, or its ``visible_from`` if earlier.

    Never before its lead reaches it (its first day less ``lead_days``): a
    due date rolled back before the period (``preceding``) would otherwise
    make it owed before any run holds it as a candidate, and a run that kept
    the account in between would never owe it. Nor before ``opens``, the
    duty's effective window's first day: a period its lead opened before the
    duty entered its window becomes owed as it enters (docs/contract.md#account).
    """
    reached = _days_before(period.first_day, max(lead_days, 0))
    became = min(period.first_day, max(visible_from, reached))
    return became if opens is None else max(became, opens)


def owed_in_window(
    cadence: Cadence,
    period: Period,
    due_date: date,
    became: date,
    window: tuple[date | None, date | None],
) -> bool:
    """Whether a period passes the effective window: on its window day, owed by the window's end.

    One whose due date a roll moved back into the window, but that became
    owed after its last day, became owed outside it (docs/contract.md#account).
    """
    effective_from, effective_to = window
    return within(cadence.window_day(period, due_date), effective_from, effective_to) and (
        effective_to is None or became <= effective_to
    )


def owed_verdict(
    period: Period,
    visible_from: date,
    schedule: Schedule,
    account: Account = Account(),
    lead_days: int = 0,
    *,
    opens: date | None = None,
) -> NotOwed | None:
    """Whether a duty's account owes ``period`` at the schedule's clock (None: it does).

    The rule of docs/contract.md#account, in local days: the period became
    owed on ``became_owed_on``; it is owed once that day has begun. The
    account decides: owed after ``through`` (no account kept: after
    ``Schedule.origin``) and, for a duty paused since, on or before
    ``paused_on`` or in a span a resume opened since; or, for a duty that
    changed (``changed_on``) or whose account no run has kept, owed if it
    became owed by that day and is still current or later, or begins after
    it (its lead opened it then: owed as if it became owed then). One that is over
    and became owed on or before the horizon is owed but not created
    (``BEYOND_HORIZON``). A backfill (``today`` None) owes every candidate.
    """
    today = schedule.today
    if today is None:
        return None
    became = became_owed_on(period, visible_from, lead_days, opens)
    if became > today:
        return NotOwed.NOT_VISIBLE_YET
    live = period.last_day >= today
    through = account.through
    since = account.since(schedule)
    fresh = account.fresh(schedule)
    if (through is not None and through > today) or (
        fresh is not None and today < fresh < date.max
    ):
        # A run at a clock before the account's day: what it could owe, the
        # account says is done, whatever changed since. One before the mark's
        # day: the duty became dispatchable, or changed, after its clock, and
        # owes it nothing the mark brings (date.max: no scheduled clock placed
        # the edit, which then counts for every run).
        fresh = None
    # A period that begins after a change's day, which its lead opened by
    # then: owed as if it became owed then, as it would be with no lead. (Not
    # after the origin's: a run at the origin's clock created what its lead
    # opened.)
    opened = fresh is not None and account.changed_on is not None and period.first_day > fresh
    if not (
        (since is not None and became > since and account.owes_on(became))
        # What became owed after the fresh day is the account's alone: a
        # pause after a change whose mark stays (migration 0024) bounds it.
        # The origin is no change: a duty not dispatchable when its current
        # period became owed (added held) owes it only by its release's mark.
        or (
            fresh is not None
            and became <= fresh
            and (live or opened)
            and (account.changed_on is not None or account.owes_on(became))
        )
    ):
        if through is not None and became <= through:
            return NotOwed.DISPATCHED
        return NotOwed.NOT_DISPATCHABLE
    if opened and fresh is not None:
        became = max(became, fresh)
    if not live and schedule.horizon is not None and became <= schedule.horizon:
        return NotOwed.BEYOND_HORIZON
    return None


def _refusal(exc: PeriodError) -> CadenceRefused:
    reason = (
        FaultReason.UNKNOWN_FREQUENCY
        if isinstance(exc, UnknownFrequencyError)
        else FaultReason.INVALID_CADENCE
    )
    return CadenceRefused(reason, str(exc))


def _schedule_for(
    frequency: str,
    zone: str,
    now: datetime,
    window: WindowLike | None,
    reach: tuple[int, datetime, int],
) -> Schedule:
    lead_horizon, previous, catch_up_days = reach
    today = local_date(now, zone)
    if window is not None:
        last_day = window.to_date if window.to_date is not None else today
        keys = periods_between(
            frequency,
            start_of_day(window.from_date, zone),
            start_of_day(last_day, zone),
            zone,
        )
        return Schedule(None, _periods(frequency, keys, current=None))
    # A later period is owed only once due - lead <= today, and its due date
    # lies inside it, so it starts on or before today + lead: candidates up to
    # the largest lead cover every duty of the schedule, and owed_verdict()
    # makes the per-duty cut. A lead of 0 or less leaves the current period.
    reach_day = _add_days_within_calendar(today, max(lead_horizon, 0))
    last = max(now, start_of_day(reach_day, zone))
    current = period_key_for(frequency, now, zone)
    # Periods that became owed since the horizon may be over by now: shorter
    # than the time between runs, a day the run's hour skips (America/Nuuk's
    # 2026-03-28 at 01:00 UTC), or missed in an outage. Whether one is owed is
    # each duty's account's question (owed_verdict).
    # Owed still: what became owed today and on each of the catch-up days
    # before it, as the scheduled runs of those days would have owed it.
    horizon = _days_before(today, max(catch_up_days, 1) + 1)
    first = min(now, start_of_day(_add_days_within_calendar(horizon, 1), zone))
    # And the period before those, over and owed (if at all) on or before the
    # horizon: whether its duty's account owed it is whether the account let
    # periods lapse (beyond_horizon). Periods become owed in their order, so
    # an older one that lapsed leaves this one lapsed too, unless a pause came
    # in between.
    opening = period_days(frequency, period_key_for(frequency, first, zone))[0]
    first = min(first, start_of_day(_days_before(opening, 1), zone))
    keys = periods_between(frequency, first, last, zone)
    return Schedule(
        today,
        _periods(frequency, keys, current=current),
        horizon,
        _local_day(previous, zone),
        period_after(frequency, keys[-1], zone),
    )


def period_after(frequency: str, key: str, zone: str) -> Period | None:
    """The period after ``key`` in ``zone``; None past 9999-12-31.

    After a duty's last candidate, it tells the day the duty next owes
    (``became_owed_on``, from its due date, not its first day).
    """
    ends = period_days(frequency, key)[1]
    try:
        following = start_of_day(ends + timedelta(days=1), zone)
        after = period_key_for(frequency, following, zone)
    except (OverflowError, PeriodError):
        return None
    first_day, last_day = period_days(frequency, after)
    return Period(after, first_day, last_day, current=False)


# How far past its period a period's window day may lie: it is the period's
# last day, or its due date, clamped into the period before a roll moves it
# by days (Cadence.window_day); a period ending further before a day than
# this cannot have its window day on or after it.
_WINDOW_DAY_REACH: Final = 400
# Periods next_owed_from tries after its start: a daily duty's reach, twice.
_NEXT_OWED_STEPS: Final = 2 * _WINDOW_DAY_REACH


def next_owed_from(
    cadence: Cadence,
    start: Period,
    window: tuple[date | None, date | None],
    *,
    after: date | None = None,
    account: Account | None = None,
) -> date | None:
    """The day the first period from ``start`` on that passes the effective window becomes owed.

    ``explain``'s next owed day past the candidates: periods whose window day
    lies before the window's first day are passed over, and once a period
    becomes owed after its last day none after it is owed (None), as at the
    calendar's end. ``after``: periods that became owed by that day are
    passed over too (an account dispatched through it); ``account``: so are
    those that become owed while its pause holds (``Account.owes_on``).
    """
    effective_from, effective_to = window
    frequency, zone, lead = str(cadence.frequency), cadence.timezone, cadence.lead_days
    period: Period | None = start
    reach = None if effective_from is None else _days_before(effective_from, _WINDOW_DAY_REACH)
    if reach is not None and start.last_day < reach:
        # Far before the window opens: from the period holding its reach.
        period = period_holding(frequency, reach, zone)
    for _ in range(_NEXT_OWED_STEPS):
        if period is None:
            return None
        # It becomes owed no earlier than its lead reaches it: past the
        # window's last day, it and every period after it are never owed.
        if effective_to is not None and _days_before(period.first_day, max(lead, 0)) > effective_to:
            return None
        try:
            due = cadence.due_date(period)
            became = became_owed_on(period, visible_from_for(due, lead), lead, effective_from)
        except (PeriodError, OverflowError):  # past the calendar's last day
            return None
        if (
            owed_in_window(cadence, period, due, became, window)
            and (after is None or became > after)
            and (account is None or account.owes_on(became))
        ):
            return became
        period = period_after(frequency, period.key, zone)
    return None


def period_holding(frequency: str, day: date, zone: str) -> Period | None:
    """The period of ``frequency`` holding local ``day`` in ``zone``; None outside the calendar."""
    try:
        key = period_key_for(frequency, start_of_day(day, zone), zone)
    except (OverflowError, PeriodError):
        return None
    first_day, last_day = period_days(frequency, key)
    return Period(key, first_day, last_day, current=False)


def _local_day(instant: datetime, zone: str) -> date:
    """The local day of ``instant`` in ``zone``; before 1583, the calendar's first day."""
    try:
        return local_date(instant, zone)
    except YearOutOfRangeError:
        return FIRST_DAY


def _days_before(day: date, days: int) -> date:
    # Before 1583 there are no periods to owe; stop the range there.
    try:
        return max(day - timedelta(days=days), FIRST_DAY)
    except OverflowError:
        return FIRST_DAY


def _periods(frequency: str, keys: list[str], current: str | None) -> tuple[Period, ...]:
    return tuple(Period(key, *period_days(frequency, key), key == current) for key in keys)


def _add_days_within_calendar(day: date, days: int) -> date:
    # Past 9999-12-31 there are no periods to owe; stop the range there.
    try:
        return day + timedelta(days=days)
    except OverflowError:
        return date.max


def plan_dispatch(
    duties: Iterable[Mapping[str, Any]],
    now: datetime,
    window: WindowLike | None = None,
    *,
    interval: timedelta = SCHEDULE_INTERVAL,
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS,
    rejudge: bool = False,
) -> Plan:
    """Plan a run over ``duties`` (``duly_duty`` rows) at clock ``now``.

    ``window`` None is a scheduled run, the previous one ``interval`` earlier;
    otherwise a backfill of that window. Each duty's ``dispatch_*`` columns
    are its account (``Account``; absent: none kept yet), and ``catch_up_days``
    how far back a run still owes; ``rejudge``: the rules changed since the
    previous run (``Account.rejudged``). A naive ``now`` is refused outright:
    it is the run's fault, not any duty's.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise NaiveDatetimeError(f"now {now!r} is naive; expected an aware datetime (an instant)")
    previous = previous_clock(now, interval)
    plan = Plan()
    schedules: ScheduleMemo = {}
    for duty in duties:
        judged = judge_duty(
            duty,
            now,
            window,
            schedules,
            previous=previous,
            catch_up_days=catch_up_days,
            rejudge=rejudge,
        )
        if judged.skip is not None:
            plan.skipped.append(judged.skip)
            continue
        plan.drafts.extend(
            _draft(duty, c.period.key, c.due_date, c.visible_from, c.late_after)
            for c in judged.candidates
            if c.not_owed is None
        )
    return plan


class NotOwed(StrEnum):
    """Why a candidate period of a dispatched duty is owed no task at this clock."""

    OUTSIDE_EFFECTIVE_WINDOW = "outside_effective_window"
    NOT_VISIBLE_YET = "not_visible_yet"
    # The account's answers (docs/contract.md#account): an earlier run owed it;
    # it became owed while the duty was not dispatchable; before the horizon.
    DISPATCHED = "dispatched"
    NOT_DISPATCHABLE = "not_dispatchable"
    BEYOND_HORIZON = "beyond_horizon"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate period of a duty, its dates, and why it is not owed (None: it is)."""

    period: Period
    due_date: date
    visible_from: date
    late_after: date
    not_owed: NotOwed | None


@dataclass(frozen=True, slots=True)
class Judgement:
    """Everything the planner decided about one duty at one clock.

    ``skip`` set: the duty yields nothing, for that reason (and ``candidates``
    is empty). Otherwise every candidate period with its verdict.
    """

    duty_id: str
    cadence: Cadence
    candidates: tuple[Candidate, ...] = ()
    skip: Fault | None = None


# The schedules judge_duty has planned, by frequency, zone and lead bucket: a
# caller judging many duties passes one, so each is planned once.
type ScheduleMemo = dict[tuple[str | None, str, int], Schedule | CadenceRefused]


def previous_clock(now: datetime, interval: timedelta) -> datetime:
    """The scheduled clock before ``now``: ``interval`` earlier (docs/contract.md#account)."""
    if not timedelta(0) < interval <= SCHEDULE_INTERVAL:
        raise ScheduleIntervalError(
            f"schedule interval {interval!r}; expected more than 0 and at most {SCHEDULE_INTERVAL}"
        )
    try:
        return now - interval
    except OverflowError:  # within a day of year 1; the calendar starts in 1583 anyway
        return now


def origin_clock(earliest: datetime | None, now: datetime, interval: timedelta) -> datetime:
    """The scheduled clock a duty whose account no run kept owes from (docs/contract.md#account).

    Such a duty existed before the first run that kept accounts, whose clock
    is ``earliest`` (the ledger's; None: no such run): it owes from the
    scheduled clock before that run, or, for a run at or before it, before
    ``now``. Not bounded by the horizon: what became owed before it lapsed,
    and a run counts it (``beyond_horizon``).
    """
    if earliest is None or earliest >= now:
        return previous_clock(now, interval)
    try:
        return earliest - interval
    except OverflowError:  # within a day of year 1; the calendar starts in 1583 anyway
        return previous_clock(now, interval)


def judge_duty(
    duty: Mapping[str, Any],
    now: datetime,
    window: WindowLike | None = None,
    schedules: ScheduleMemo | None = None,
    *,
    previous: datetime | None = None,
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS,
    rejudge: bool = False,
    owed_afresh_at: datetime | None = None,
) -> Judgement:
    """The planner's whole answer for one duty: its skip reason, or each candidate's verdict.

    ``plan_dispatch`` is this over many duties; ``explain`` shows it to a person.
    ``schedules`` shares planned schedules between calls of one run (all at
    ``now``, ``previous`` and ``catch_up_days``); ``previous`` is the scheduled
    clock before ``now`` (None: ``now - SCHEDULE_INTERVAL``). Past periods the
    account does not owe are left out, but for those beyond the horizon.
    ``rejudge``: the rules changed since the previous run; ``owed_afresh_at``:
    the clock of the judgement afresh the previous run owes it (``account_judged``).
    """
    duty_id = str(duty["id"])
    cadence = Cadence.of(duty)
    # An absent review_status reads as its column default; a present null
    # is a definition nobody approved.
    not_dispatched = classify(
        duty.get("form"), duty.get("status"), duty.get("review_status", APPROVED)
    )
    if not_dispatched is not None:
        detail = (
            unknown_form_detail(duty.get("form"))
            if not_dispatched == FaultReason.UNKNOWN_FORM
            else ""
        )
        return Judgement(duty_id, cadence, skip=Fault(duty_id, not_dispatched, detail))
    try:
        schedule = _duty_schedule(
            cadence,
            (now, previous),
            window,
            {} if schedules is None else schedules,
            catch_up_days,
        )
    except CadenceRefused as refused:
        return Judgement(duty_id, cadence, skip=Fault(duty_id, refused.reason, refused.detail))
    effective_from, effective_to = duty.get("effective_from"), duty.get("effective_to")
    account = account_judged(
        Account.of(duty),
        schedule.today,
        effective_to,
        rejudge=rejudge,
        owed_on=_owed_on(owed_afresh_at, cadence),
    )
    if (
        schedule.today is not None
        and not within(schedule.today, effective_from, effective_to)
        and not window_closed_behind(account, schedule, effective_to)
    ):
        return Judgement(duty_id, cadence, skip=Fault(duty_id, SkipReason.OUTSIDE_EFFECTIVE_WINDOW))
    candidates = []
    try:
        for period in schedule.periods:
            due_date = cadence.due_date(period)
            visible_from = visible_from_for(due_date, cadence.lead_days)
            verdict = owed_verdict(
                period, visible_from, schedule, account, cadence.lead_days, opens=effective_from
            )
            past = schedule.today is not None and period.last_day < schedule.today
            if past and verdict in (NotOwed.DISPATCHED, NotOwed.NOT_DISPATCHABLE):
                # Over, and not this run's to owe: an earlier run's question.
                continue
            not_owed = verdict
            became = became_owed_on(period, visible_from, cadence.lead_days, effective_from)
            if not owed_in_window(
                cadence, period, due_date, became, (effective_from, effective_to)
            ):
                if past and verdict is not None:
                    continue
                not_owed = NotOwed.OUTSIDE_EFFECTIVE_WINDOW
            late_after = late_after_for(due_date, cadence.grace_days)
            candidates.append(Candidate(period, due_date, visible_from, late_after, not_owed))
    except PeriodError as exc:  # a lead, roll or grace reaching past the calendar's edge
        return Judgement(
            duty_id, cadence, skip=Fault(duty_id, FaultReason.INVALID_CADENCE, str(exc))
        )
    if all(candidate.not_owed is not None for candidate in candidates):
        return Judgement(
            duty_id,
            cadence,
            tuple(candidates),
            skip=Fault(duty_id, SkipReason.NOTHING_DUE),
        )
    return Judgement(duty_id, cadence, tuple(candidates))


def lapsed_before_candidates(
    duty: Mapping[str, Any],
    account: Account,
    now: datetime,
    *,
    previous: datetime | None = None,
    origin: date | None = None,
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS,
    rejudge: bool = False,
    owed_afresh_at: datetime | None = None,
    schedules: ScheduleMemo | None = None,
) -> tuple[str, ...]:
    """The keys of the periods older than the run's first candidate the account let lapse.

    A scheduled run's candidates reach back to the period before the
    horizon's, where the account's periods lapse in order; an account a pause,
    a span or the window's end bounded since its day may have owed older ones
    only (page_owed.sql's ``lapse_probe``). The caller counts those not in
    ``duly_task`` (a backfill may have created them). Each is judged here as
    ``judge_duty`` judges a candidate, at ``previous`` as it takes it, or with
    ``origin`` for the schedule's (the day a page read it at). ``schedules``
    shares planned schedules between calls at one ``now`` and ``previous``
    (``judge_duty``'s, for a scheduled run's clock).
    """
    cadence = Cadence.of(duty)
    try:
        schedule = _duty_schedule(
            cadence, (now, previous), None, {} if schedules is None else schedules, catch_up_days
        )
    except CadenceRefused:
        return ()
    if origin is not None:
        schedule = replace(schedule, origin=origin)
    account = account_judged(
        account,
        schedule.today,
        duty.get("effective_to"),
        rejudge=rejudge,
        owed_on=_owed_on(owed_afresh_at, cadence),
    )
    since = account.since(schedule)
    if schedule.today is None or since is None or not schedule.periods:
        return ()
    reach = schedule.periods[0].first_day
    if since >= _days_before(reach, 1):
        return ()
    frequency, zone = str(cadence.frequency), cadence.timezone
    keys = periods_between(
        frequency,
        start_of_day(_add_days_within_calendar(since, 1), zone),
        start_of_day(_days_before(reach, 1), zone),
        zone,
    )
    effective: tuple[date | None, date | None] = (
        duty.get("effective_from"),
        duty.get("effective_to"),
    )
    lapsed: list[str] = []
    for period in _periods(frequency, keys, current=None):
        if period.first_day >= reach:
            break
        try:
            due = cadence.due_date(period)
        except (PeriodError, OverflowError):  # past the calendar's last day
            continue
        visible = visible_from_for(due, cadence.lead_days)
        became = became_owed_on(period, visible, cadence.lead_days, effective[0])
        if (
            owed_in_window(cadence, period, due, became, effective)
            and owed_verdict(
                period, visible, schedule, account, cadence.lead_days, opens=effective[0]
            )
            is NotOwed.BEYOND_HORIZON
        ):
            lapsed.append(period.key)
    return tuple(lapsed)


def _duty_schedule(
    cadence: Cadence,
    clocks: tuple[datetime, datetime | None],
    window: WindowLike | None,
    schedules: ScheduleMemo,
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS,
) -> Schedule:
    """The duty's schedule, its cadence checked in the order the database path checks it."""
    now, previous = clocks
    try:
        lead = check_day_count(cadence.lead_days, "lead_days")
    except PeriodError as exc:
        raise _refusal(exc) from exc
    memo = (cadence.frequency, cadence.timezone, lead)
    if memo not in schedules:
        try:
            schedules[memo] = schedule_for(
                cadence.frequency,
                cadence.timezone,
                now,
                window,
                lead_horizon=lead,
                previous=previous,
                catch_up_days=catch_up_days,
            )
        except CadenceRefused as refused:
            schedules[memo] = refused
    found = schedules[memo]
    if isinstance(found, CadenceRefused):
        raise found
    check_cadence_rule(cadence)
    return found


def _draft(
    duty: Mapping[str, Any], period_key: str, due_date: date, visible_from: date, late_after: date
) -> dict[str, Any]:
    # Name and business unit are copied, so renaming or transferring a duty
    # later never rewrites the history its tasks record.
    return {
        "organization_id": duty["organization_id"],
        "duty_id": duty["id"],
        "owner_id": duty["owner_id"],
        "business_unit_id": duty.get("business_unit_id"),
        "subject": duty["name"],
        "source": duty["source"],
        "period_key": period_key,
        "due_date": due_date,
        "visible_from": visible_from,
        # Stamped once: re-gracing the duty later never moves a task's lateness.
        "late_after": late_after,
        "status": "open",
    }


def _default[T](value: T | None, default: T) -> T:
    return default if value is None else value
