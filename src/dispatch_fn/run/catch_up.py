"""Catch-up (docs/contract.md#catch-up): what the scheduled runs of missed days would have owed.

A scheduled run whose predecessor completed more than a day earlier also owes
what a run at each missed daily clock would have owed under docs/contract.md#one-run. Run once
per missed clock, that would cost a whole run per day; instead the run's own
pages carry it. Each page is dispatched at the run's clock first, then once
more with a schedule per missed clock holding only the periods that the run's
own clock does not owe:

- For a duty whose effective window holds today, a period that is current or
  later at the run's clock and is owed at a missed clock is owed at the run's clock as well
  (visibility only opens with time), so only periods *before* the current one
  are left to catch up. Between two daily runs of a monthly duty that is
  usually none, and a schedule with no periods is not sent at all.
- A duty whose ``effective_to`` fell during the outage owes nothing at the
  run's clock, so for those few duties (found by one query) every candidate
  of each missed clock is sent.

Both extra statements are the ordinary page statement over the same duties,
so a page is still a unit of progress: a run stopped or killed between pages
leaves whole pages behind, caught up or not, and the next run redoes the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

from dispatch_fn.db import store
from dispatch_fn.db.ledger import SetAsideAt
from dispatch_fn.db.sql import Connection, statement
from dispatch_fn.db.store import Group
from dispatch_fn.engine.dates import LAST_DAY
from dispatch_fn.planning.plan import (
    SCHEDULE_INTERVAL,
    CadenceRefused,
    Schedule,
    WindowLike,
    schedule_for,
)
from dispatch_fn.planning.request import Scope

_DAY: Final = timedelta(days=1)


@dataclass(slots=True)
class CatchUpReport:
    """What a run caught up: its missed clocks and the tasks it created for them."""

    clocks: tuple[datetime, ...]
    tasks_created: int = 0

    def as_json(self) -> dict[str, Any]:
        """The report's ``catch_up`` object (docs/contract.md#catch-up)."""
        return {
            "from": self.clocks[0].isoformat(),
            "to": self.clocks[-1].isoformat(),
            "clocks": len(self.clocks),
            "tasks_created": self.tasks_created,
        }


def missed_clocks(latest: datetime | None, now: datetime, days: int) -> tuple[datetime, ...]:
    """The daily clocks after ``latest`` and before ``now``, at most ``days`` days back.

    None when ``latest`` is None (no earlier run), within a day of ``now``, or
    after it (a replayed older clock).
    """
    if days < 0:
        raise ValueError(f"catch-up days {days!r}; expected 0 or more")
    if latest is None or days == 0 or now - latest <= _DAY:
        return ()
    earliest = now - days * _DAY
    # Jump straight to the first clock inside the bound: an outage of years
    # costs no more to compute than one of a week.
    skipped = max(0, (earliest - latest) // _DAY - 1)
    first = latest + (skipped + 1) * _DAY
    # Counted from the difference, never by stepping past ``now``: a day after
    # the last clock before 9999-12-31T23:00Z would leave datetime's range.
    count = -((first - now) // _DAY)
    clocks = (first + n * _DAY for n in range(count))
    return tuple(clock for clock in clocks if clock >= earliest)


# One schedule per frequency, zone and lead bucket, as the run plans them (dispatch._plan_groups).
type _Key = tuple[str | None, str, int]


def page_statements(
    conn: Connection,
    scope: Scope,
    ready: Sequence[tuple[Group, Schedule]],
    rules: store.Rules,
    *,
    clocks: Sequence[datetime],
    now: datetime,
    interval: timedelta = SCHEDULE_INTERVAL,
) -> list[store.PageStatement]:
    """The extra page statements that catch ``clocks`` up (none if nothing can be owed).

    Each missed clock owes what became owed since the clock a day before it
    (docs/contract.md#between-runs). The run's own clock covers the ``interval`` before it;
    where that is shorter than the time since the last missed clock, the
    periods that ended in between are owed here, as at the run's clock with
    that missed clock as the previous one.
    """
    if not clocks or not ready:
        return []
    # The chain a run at each clock would have made: every clock's previous
    # one, a day earlier, then the run's own clock after the last of them.
    chain = [(clock, clock - _DAY) for clock in clocks]
    if now - clocks[-1] > interval:
        chain.append((now, clocks[-1]))
    current = {
        _key(group): next(period.key for period in schedule.periods if period.current)
        for group, schedule in ready
    }
    full = _schedules_at(ready, chain)
    earlier: dict[_Key, list[Schedule]] = {
        memo: [
            replace(s, periods=kept)
            for s in schedules
            if (kept := tuple(p for p in s.periods if p.key < current[memo]))
        ]
        for memo, schedules in full.items()
    }
    statements = []
    before = _pairs(ready, earlier)
    if before:
        statements.append(store.page_statement(scope, before, rules, dry_run=False))
    expired = _expired_during(conn, scope, clocks[0], now)
    if expired:
        narrowed = Scope(
            organization_id=scope.organization_id,
            duty_ids=expired,
            resume_after=scope.resume_after,
        )
        statements.append(store.page_statement(narrowed, _pairs(ready, full), rules, dry_run=False))
    return statements


def _pairs(
    ready: Sequence[tuple[Group, Schedule]],
    schedules: dict[_Key, list[Schedule]],
) -> list[tuple[Group, Schedule]]:
    return [
        (group, schedule)
        for group, _ in ready
        for schedule in schedules.get((group.frequency, group.timezone, group.lead_bucket), [])
    ]


def _expired_during(
    conn: Connection, scope: Scope, first: datetime, now: datetime
) -> tuple[str, ...]:
    query = statement("catch_up_expired_during")
    # On the calendar's last day there is no day after it to bound by.
    hi = (now + _DAY).date() if now.date() < LAST_DAY else LAST_DAY
    params = {**store.scope_params(scope), "lo": (first - _DAY).date(), "hi": hi}
    rows = conn.execute(query, params, prepare=False).fetchall()  # as store runs its scoped ones
    return tuple(str(row[0]) for row in rows)


def _key(group: Group) -> _Key:
    return (group.frequency, group.timezone, group.lead_bucket)


def _schedules_at(
    ready: Sequence[tuple[Group, Schedule]],
    chain: Sequence[tuple[datetime, datetime]],
    window: WindowLike | None = None,
) -> dict[_Key, list[Schedule]]:
    """Each group's schedule at each ``(clock, previous)`` of ``chain``, for its largest lead."""
    horizons: dict[_Key, int] = {}
    for group, _ in ready:
        horizons[_key(group)] = max(horizons.get(_key(group), group.max_lead), group.max_lead)
    schedules: dict[_Key, list[Schedule]] = {}
    for memo, horizon in horizons.items():
        frequency, zone, _ = memo
        for clock, previous in chain:
            try:
                schedules.setdefault(memo, []).append(
                    schedule_for(
                        frequency, zone, clock, window, lead_horizon=horizon, previous=previous
                    )
                )
            except CadenceRefused:
                # Only at a calendar's edge, where the run's own clock already
                # planned this group; an earlier clock there owes nothing.
                continue
    return schedules


@dataclass(frozen=True, slots=True)
class Repayment:
    """What one group of set-aside duties is owed: each clock with its previous one."""

    set_aside: SetAsideAt
    chain: tuple[tuple[datetime, datetime], ...]


@dataclass(frozen=True, slots=True)
class OwedAgain:
    """What a run owes duties that earlier runs set aside (docs/contract.md#owed-again)."""

    repayments: tuple[Repayment, ...]

    @classmethod
    def of(
        cls,
        set_aside: Sequence[SetAsideAt],
        now: datetime,
        *,
        days: int,
        interval: timedelta = SCHEDULE_INTERVAL,
    ) -> OwedAgain | None:
        """What a run at ``now`` owes ``set_aside``; None if nothing is set aside.

        The next run owes them whatever its clock (docs/contract.md#owed-again): a replay of an
        older clock, or of the same one, still owes what the setting-aside
        run's clocks owed them.
        """
        owed = tuple(Repayment(each, _chain(each, now, days, interval)) for each in set_aside)
        return cls(owed) if owed else None

    @property
    def set_aside(self) -> tuple[SetAsideAt, ...]:
        """Every group repaid."""
        return tuple(repayment.set_aside for repayment in self.repayments)

    def as_json(self, tasks_created: int) -> dict[str, Any]:
        """The report's ``owed_again`` object."""
        every = sorted(
            {
                clock
                for repayment in self.repayments
                if repayment.set_aside.window is None
                for clock, _ in repayment.chain
            }
        )
        duties = {duty_id for each in self.set_aside for duty_id in each.duty_ids}
        return {
            "duties": len(duties),
            "from": every[0].isoformat() if every else None,
            "to": every[-1].isoformat() if every else None,
            "clocks": len(every),
            "windows": sum(1 for each in self.set_aside if each.window is not None),
            "tasks_created": tasks_created,
        }


def _chain(
    set_aside: SetAsideAt, now: datetime, days: int, interval: timedelta
) -> tuple[tuple[datetime, datetime], ...]:
    # A backfill owes its window, once. A scheduled run owes the clocks it
    # caught up (bounded by its own catch-up), then its own, then each daily
    # clock since (a later run set it aside too, or no run came) before this
    # run's own, within the catch-up bound.
    if set_aside.window is not None:
        return ((set_aside.clock, set_aside.clock - interval),)
    caught = [(clock, clock - _DAY) for clock in _daily(set_aside.owed_from, set_aside.clock)]
    earliest = now - days * _DAY
    since = [
        (clock, clock - _DAY) for clock in _daily(set_aside.clock + _DAY, now) if clock >= earliest
    ]
    return (*caught, (set_aside.clock, set_aside.clock - interval), *since)


def _daily(first: datetime, before: datetime) -> list[datetime]:
    """``first`` and each day after it, before ``before``."""
    if before <= first:
        return []
    # Counted from the difference, as missed_clocks does: never a step past ``before``.
    count = -((first - before) // _DAY)
    return [first + n * _DAY for n in range(count)]


def repay_statements(
    scope: Scope,
    ready: Sequence[tuple[Group, Schedule]],
    rules: store.Rules,
    owed: OwedAgain,
) -> list[store.PageStatement]:
    """One page statement per group of set-aside duties: every candidate of what they are owed.

    Like the duties whose window closed during an outage, a set-aside duty
    got nothing at those clocks, so every candidate is sent, not only the
    periods before the current one.
    """
    statements = []
    for repayment in owed.repayments:
        each = repayment.set_aside
        pairs = _pairs(ready, _schedules_at(ready, repayment.chain, each.window))
        if pairs:
            narrowed = Scope(
                organization_id=scope.organization_id,
                duty_ids=each.duty_ids,
                resume_after=scope.resume_after,
            )
            statements.append(store.page_statement(narrowed, pairs, rules, dry_run=False))
    return statements
