"""The calendar's edges: duties the database path hands to the planner's own judgement.

docs/contract.md#periods admits calendar years 1583-9999 only. Far from those edges no lead,
offset, roll or grace a dispatchable duty can hold (``duly_duty`` checks and
``periods.check_due_rule``) can carry one of its dates out of them, and the
page statement computes every date in SQL. Within ``REACH`` days of an edge
one can, and PostgreSQL's dates run on to 4713 BC and 5874897 AD, so the page
statement would write 1582-12-25 or 10000-01-31 where the engine refuses the
duty. Rather than a second copy of every edge rule in SQL, the run asks the
planner (``plan.judge_duty``) about the duties of the groups whose schedule
comes that close, one page at a time, and sets aside those it refuses
(docs/adr/0008-calendar-edges.md). An ordinary run has no such group and pays
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from dispatch_fn.engine import (
    FIRST_DAY,
    LAST_DAY,
    MAX_DAYS_AFTER_PERIOD,
    MAX_GRACE_DAYS,
    MAX_MONTHS_AFTER_PERIOD,
)
from dispatch_fn.errors import CadenceRefused
from dispatch_fn.planning.plan import (
    FAULT_REASONS,
    Cadence,
    Schedule,
    ScheduleMemo,
    WindowLike,
    check_cadence_rule,
    judge_duty,
    schedule_for,
)
from dispatch_fn.settings import DEFAULT_CATCH_UP_DAYS

# How far a duty's dates can lie from its candidate periods, at most: a lead
# of 3,660 days either way (duly_duty_lead_range; a negative lead puts
# visible_from after the due date), a due date 24 months and 366 days after
# the period (periods.check_due_rule), a grace of 366 days
# (periods.check_grace_days), and a business-day roll, for which a year is a
# wide margin: no calendar of the pinned holidays package closes for one.
_LEAD_BOUND: Final = 3660
_ROLL_MARGIN: Final = 366
REACH: Final = timedelta(
    days=_LEAD_BOUND
    + MAX_MONTHS_AFTER_PERIOD * 31
    + MAX_DAYS_AFTER_PERIOD
    + MAX_GRACE_DAYS
    + _ROLL_MARGIN
)

type GroupKey = tuple[str | None, str]


def near_edge(schedule: Schedule) -> bool:
    """Whether a duty planned on ``schedule`` could have a date outside the calendar."""
    if not schedule.periods:
        return False
    first = min(period.first_day for period in schedule.periods)
    last = max(period.last_day for period in schedule.periods)
    return (
        first.toordinal() - FIRST_DAY.toordinal() <= REACH.days
        or LAST_DAY.toordinal() - last.toordinal() <= REACH.days
    )


def schedule_within_calendar(
    frequency: str | None,
    zone: str,
    now: datetime,
    window: WindowLike | None,
    lead: int,
    *,
    previous: datetime | None = None,
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS,
) -> tuple[Schedule, int] | CadenceRefused:
    """``plan.schedule_for`` at ``lead``, or at the largest lead the calendar's end allows.

    With the schedule, the lead it was planned for.

    The planner plans each duty for its own lead: at a clock in December 9999,
    a weekly duty with lead 0 is owed its current week while one with lead 30
    reaches 9999-W52, whose Sunday is in year 10000, and is refused. A group
    planned for its largest lead would refuse both, so the group gets the
    widest schedule the calendar allows instead; ``near_edge`` holds for it, and
    the duties whose own lead reaches further are refused by the planner.
    """
    try:
        whole = schedule_for(
            frequency,
            zone,
            now,
            window,
            lead_horizon=lead,
            previous=previous,
            catch_up_days=catch_up_days,
        )
    except CadenceRefused as refused:
        if window is not None or lead <= 0:
            return refused
        widest: tuple[Schedule, int] | CadenceRefused = refused
    else:
        return whole, lead
    # Whether a lead is refused only grows with the lead (its periods only
    # grow), so the largest one allowed is found by halving.
    allowed, too_far = -1, lead
    while too_far - allowed > 1:
        middle = (allowed + too_far) // 2
        try:
            found = schedule_for(
                frequency,
                zone,
                now,
                window,
                lead_horizon=max(middle, 0),
                previous=previous,
                catch_up_days=catch_up_days,
            )
        except CadenceRefused:
            too_far = middle
        else:
            allowed, widest = middle, (found, max(middle, 0))
    return widest


def group_key(duty: Mapping[str, Any]) -> GroupKey:
    """The frequency and zone of the groups a ``duly_duty`` row belongs to.

    Every lead bucket of them (``store.Group`` also keys by bucket): near the
    edge a whole frequency and zone is judged, which is never wrong, and a
    bucket key would only narrow work that happens at the calendar's edge alone.
    """
    return (duty["frequency"], duty["timezone"])


@dataclass(frozen=True, slots=True)
class Edge:
    """A run's groups near the calendar's edge, and the clock and window to judge them at."""

    now: datetime
    window: WindowLike | None
    groups: frozenset[GroupKey] = field(default_factory=frozenset)
    # The scheduled clock before ``now`` (plan.judge_duty's ``previous``).
    previous: datetime | None = None
    # How far back the run still owes (plan.judge_duty's ``catch_up_days``).
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS

    def refused(self, duties: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], str]]:
        """``(duty row, detail)`` of the duties (dispatchable rows) the planner refuses.

        Duties whose due rule the engine refuses (its anchor, roll or calendar,
        or offsets or grace out of range) are left out: the run counts those
        before its pages (``dispatch._judge_rules``) and the page statement
        sets them aside itself.
        """
        schedules: ScheduleMemo = {}
        found = []
        for duty in duties:
            if _out_of_range(duty):
                continue
            refusal = self.refusal(duty, schedules)
            if refusal is not None:
                found.append((duty, refusal.detail))
        return found

    def refusal(
        self, duty: Mapping[str, Any], schedules: ScheduleMemo | None = None
    ) -> CadenceRefused | None:
        """The planner's fault for one duty of an edge group; None if it has none or no edge."""
        if group_key(duty) not in self.groups:
            return None
        skip = judge_duty(
            duty,
            self.now,
            self.window,
            schedules,
            previous=self.previous,
            catch_up_days=self.catch_up_days,
        ).skip
        if skip is None or skip.reason not in FAULT_REASONS:
            return None
        return CadenceRefused(skip.reason, skip.detail)


def _out_of_range(duty: Mapping[str, Any]) -> bool:
    try:
        check_cadence_rule(Cadence.of(duty))
    except CadenceRefused:
        return True
    return False
