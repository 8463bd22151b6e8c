"""Whatever the days bring, every owed period is created once, and nothing else.

A hypothesis state machine drives one real database through scheduled runs at
the daily 01:00 UTC clock, outages, a duty's row locked during a run, manual
runs at past and future clocks, pauses and un-pauses, across the DST changes
of March and April 2026 (America/Nuuk and America/Scoresbysund on 03-29,
Australia/Lord_Howe on 04-05; Pacific/Apia, without DST since 2021, beside
them). After every step the tasks must be exactly what a model says is owed.

The model never looks at the database path: what a run owes is asked of the
pure planner only (``plan_dispatch`` at one clock, default interval). The rules
it implements, from docs/contract.md#one-run and #ledger:

- A run at clock ``t`` covers, for every duty active when it runs, ``t``
  itself and (catch-up, §9) each missed daily clock ``L + 1d, L + 2d, … < t``
  no more than ``DISPATCH_CATCH_UP_DAYS`` back, when ``L``, the latest clock of
  an earlier run whose clock was not after the wall clock when it started, is
  more than a day before ``t``. A manual run at a future clock is never ``L``.
  Every run here completes (no deadline, no failure); one that sets a duty
  aside still counts, as a degraded run is not an incomplete one (§9).
- A manual ``{"now"}`` run is a scheduled run replayed at that clock (§5), so
  the same rules hold for it, catch-up included. Its past clock lies before
  the chain's latest clock (or its first), so the chain never goes back.
- Covering clock ``c`` owes ``plan_dispatch([duty], c)`` and (§4 step 4)
  every period that became owed in ``(c - 24 h, c]``: the earlier of its start
  and the start of its ``visible_from`` day lies there. The model finds those
  by planning at the start of each local day in that span, so a local day
  that is never "today" at 01:00 UTC (Nuuk's 2026-03-28) is still owed.
- A duty set aside by a run (its row locked) is covered by the next run,
  whatever its clock, instead: every clock that run would have covered for it
  is carried over, since no later catch-up reaches back past a completed run
  ("a duty is never left with a period that no later run will create").
  Where docs/contract.md#set-aside leaves room, the model only allows and does not require: a
  carried clock that is neither the latest set-aside run's own clock ("what
  that clock owed them") nor within ``DISPATCH_CATCH_UP_DAYS`` of the covering
  run's clock ("every clock they missed since, within …"), and the carried
  clocks of a duty paused when the next run comes.
- A duty paused at a run is not covered by it, so a span where it was paused
  at every covering run gets nothing. A duty added or un-paused during an
  outage is covered at every missed clock of the run that catches it up, as
  the run cannot know when it became active.

The tasks must hold every required row, no row that is neither required nor
allowed, each identity once, with the planner's columns; and
``last_dispatched_period`` must be the greatest key created for the duty,
compared by the periods' first days. A missing row is blamed on the first rule
that owed it (own clock, missed clock, between two runs, set aside), each with
its own assertion, so hypothesis reports and shrinks each broken rule apart.

``DULY_SOAK=1`` (``make soak``) runs it at soak size; the gate runs it small.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import IntEnum
from typing import Any, Final

import psycopg
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from dispatch_fn.aws.invocation import handle, runtime_for
from dispatch_fn.db.database import ConnectionCache
from dispatch_fn.engine import periods
from dispatch_fn.planning.plan import plan_dispatch
from dispatch_fn.settings import DEFAULT_CATCH_UP_DAYS, Settings
from support import TASK_COLUMNS, cloned_database, duty, insert_duties, task_rows

SOAK = os.environ.get("DULY_SOAK") == "1"
SIZE = (
    settings(max_examples=200, stateful_step_count=30, deadline=None)
    if SOAK
    else settings(max_examples=15, stateful_step_count=12, deadline=None)
)

DAY: Final = timedelta(days=1)
# The default cron's interval: what "the previous scheduled clock" is
# (docs/contract.md#account).
INTERVAL: Final = timedelta(hours=24)
CATCH_UP: Final = timedelta(days=DEFAULT_CATCH_UP_DAYS)
# The scheduled chain starts here and runs past Nuuk's 03-29 and Lord_Howe's 04-05.
FIRST_DAYS: Final = st.dates(date(2026, 3, 24), date(2026, 3, 28))
SCHEDULE_HOUR: Final = time(1, tzinfo=UTC)
ZONES: Final = (
    "America/Nuuk",
    "UTC",
    "Pacific/Apia",
    "Australia/Lord_Howe",
    "America/Scoresbysund",
)
FREQUENCIES: Final = ("daily", "weekly", "monthly")
LEADS: Final = (0, 3)
ANCHORS: Final = ("period_start", "period_end")
ENVELOPES: Final = ("now", "scheduled_time", "detail-type")
MAX_DUTIES: Final = 8
# An outage stays short enough for catch-up to cover it whole.
MAX_OUTAGE_DAYS: Final = DEFAULT_CATCH_UP_DAYS - 1
# A page waits this long for a locked row before the run sets the duty aside.
LOCK_TIMEOUT_MS: Final = 100

type Identity = tuple[str, str, str]  # duty_id, owner_id, period_key
type Drafts = dict[Identity, dict[str, Any]]


class Why(IntEnum):
    """Why the model owes a row; a missing row is blamed on the smallest."""

    OWN_CLOCK = 0  # docs/contract.md#scheduled-run at a run's own clock
    MISSED_CLOCK = 1  # the same at a missed daily clock (§9 catch-up)
    BETWEEN_RUNS = 2  # §4 step 4, at a run's own or a missed clock
    SET_ASIDE = 3  # carried over from a run that set the duty aside (§9)


@dataclass(frozen=True, slots=True)
class _Carried:
    """A clock a set-aside duty did not get, and the clock of the run that set it aside."""

    clock: datetime
    set_aside_at: datetime


def _identity(draft: dict[str, Any]) -> Identity:
    return (draft["duty_id"], draft["owner_id"], draft["period_key"])


def _owed_at(definition: dict[str, Any], clock: datetime) -> Drafts:
    """What the planner owes the duty at ``clock``, as if it were active."""
    active = {**definition, "status": "active"}
    return {_identity(d): d for d in plan_dispatch([active], clock).drafts}


def _became_owed(definition: dict[str, Any], draft: dict[str, Any]) -> datetime:
    zone = definition["timezone"]
    start = periods.period_bounds(definition["frequency"], draft["period_key"], zone).start
    return min(start, periods.start_of_day(draft["visible_from"], zone))


def _owed_between(definition: dict[str, Any], clock: datetime) -> Drafts:
    """Every period that became owed in ``(clock - INTERVAL, clock]``.

    See docs/contract.md#account.

    A period becomes owed at the start of a local day (its own first day, or
    its ``visible_from`` day), and the planner at that instant owes it: so
    planning at each local day's start inside the span finds them all.
    """
    zone = definition["timezone"]
    previous = clock - INTERVAL
    found: Drafts = {}
    day = periods.local_date(previous, zone)
    while day <= periods.local_date(clock, zone):
        start = periods.start_of_day(day, zone)
        if previous < start <= clock:
            for identity, draft in _owed_at(definition, start).items():
                if previous < _became_owed(definition, draft) <= clock:
                    found[identity] = draft
        day += DAY
    return found


def _missed_clocks(latest: datetime | None, now: datetime) -> list[datetime]:
    """The daily clocks after ``latest`` and before ``now``, at most ``CATCH_UP`` back (§9)."""
    if latest is None or now - latest <= DAY:
        return []
    clocks = []
    clock = latest + DAY
    while clock < now:
        if clock >= now - CATCH_UP:
            clocks.append(clock)
        clock += DAY
    return clocks


def _greatest(definition: dict[str, Any], keys: list[str]) -> str | None:
    """The key of the latest-starting period among ``keys`` (None if there are none)."""
    frequency = definition["frequency"]
    return max(keys, key=lambda key: periods.period_days(frequency, key)[0], default=None)


def _iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def _event(envelope: str, clock: datetime) -> dict[str, Any]:
    if envelope == "scheduled_time":
        return {"scheduled_time": _iso(clock)}
    if envelope == "detail-type":
        return {"detail-type": "Scheduled Event", "source": "aws.events", "time": _iso(clock)}
    return {"now": _iso(clock)}


class OwedMachine(RuleBasedStateMachine):
    """One database, the runs a month brings, and the model of what they owe."""

    duties = Bundle("duties")

    def __init__(self, server_dsn: str, template: str) -> None:
        super().__init__()
        self._stack = ExitStack()
        self._dsn = self._stack.enter_context(cloned_database(server_dsn, template))
        self._conn = self._stack.enter_context(psycopg.connect(self._dsn, autocommit=True))
        self._connections = ConnectionCache()
        self._stack.callback(self._connections.discard)
        self._settings = Settings(
            database_url=self._dsn, lock_timeout_ms=LOCK_TIMEOUT_MS, chunk_size=4
        )
        self._definitions: dict[str, dict[str, Any]] = {}
        self._status: dict[str, str] = {}
        self._next_clock = datetime.combine(date(2026, 3, 24), SCHEDULE_HOUR)
        self._last_scheduled: datetime | None = None
        self._skipped_days = 0
        # (clock, counts for catch-up): every run issued, all of them completed.
        self._ledger: list[tuple[datetime, bool]] = []
        self._pending: dict[str, list[_Carried]] = {}
        self._required: dict[Identity, set[Why]] = {}
        self._allowed: set[Identity] = set()
        self._drafts: Drafts = {}
        self._memo: dict[tuple[str, datetime, bool], Drafts] = {}

    def teardown(self) -> None:
        self._stack.close()

    # --- the world ---------------------------------------------------------------

    @initialize(
        target=duties,
        first_day=FIRST_DAYS,
        frequency=st.sampled_from(FREQUENCIES),
        lead=st.sampled_from(LEADS),
        zone=st.sampled_from(ZONES),
        anchor=st.sampled_from(ANCHORS),
    )
    def start_with_a_duty(
        self, first_day: date, frequency: str, lead: int, zone: str, anchor: str
    ) -> str:
        self._next_clock = datetime.combine(first_day, SCHEDULE_HOUR)
        return self._add(frequency, lead, zone, anchor)

    @precondition(lambda self: len(self._definitions) < MAX_DUTIES)
    @rule(
        target=duties,
        frequency=st.sampled_from(FREQUENCIES),
        lead=st.sampled_from(LEADS),
        zone=st.sampled_from(ZONES),
        anchor=st.sampled_from(ANCHORS),
    )
    def add_duty(self, frequency: str, lead: int, zone: str, anchor: str) -> str:
        return self._add(frequency, lead, zone, anchor)

    @rule(duty_id=duties)
    def pause(self, duty_id: str) -> None:
        self._set_status(duty_id, "paused")

    @rule(duty_id=duties)
    def unpause(self, duty_id: str) -> None:
        self._set_status(duty_id, "active")

    @precondition(lambda self: self._skipped_days < MAX_OUTAGE_DAYS)
    @rule(days=st.integers(1, MAX_OUTAGE_DAYS))
    def outage(self, days: int) -> None:
        days = min(days, MAX_OUTAGE_DAYS - self._skipped_days)
        self._skipped_days += days
        self._next_clock += days * DAY

    # --- the runs ----------------------------------------------------------------

    # ``locked``: a duty whose row another session holds FOR UPDATE while the run runs.
    @rule(envelope=st.sampled_from(ENVELOPES), locked=st.none() | duties)
    def scheduled_run(self, envelope: str, locked: str | None) -> None:
        clock = self._next_clock
        self._run(clock, _event(envelope, clock), locked=locked)
        self._last_scheduled = clock
        self._next_clock = clock + DAY
        self._skipped_days = 0

    @rule(minutes_back=st.integers(1, 10 * 24 * 60))
    def manual_run_at_a_past_clock(self, minutes_back: int) -> None:
        reference = self._last_scheduled or self._next_clock - DAY
        clock = reference - timedelta(minutes=minutes_back)
        self._run(clock, _event("now", clock), locked=None)

    @rule(
        days_ahead=st.integers(30, 60),
        # Never at the schedule's hour: a missed clock exactly DISPATCH_CATCH_UP_DAYS
        # back is where "at most 7 days back" could be read either way.
        minute_of_day=st.integers(2 * 60, 24 * 60 - 1),
    )
    def manual_run_at_a_future_clock(self, days_ahead: int, minute_of_day: int) -> None:
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        clock = today + days_ahead * DAY + timedelta(minutes=minute_of_day)
        self._run(clock, _event("now", clock), locked=None)

    def _add(self, frequency: str, lead: int, zone: str, anchor: str) -> str:
        place = zone.rsplit("/", maxsplit=1)[-1]
        duty_id = f"d{len(self._definitions)}-{frequency}-{lead}-{place}"
        definition = duty(
            duty_id, frequency=frequency, lead_days=lead, timezone=zone, due_anchor=anchor
        )
        insert_duties(self._conn, [definition])
        self._definitions[duty_id] = definition
        self._status[duty_id] = "active"
        return duty_id

    def _set_status(self, duty_id: str, status: str) -> None:
        self._conn.execute("UPDATE duly_duty SET status = %s WHERE id = %s", (status, duty_id))
        self._status[duty_id] = status

    def _run(self, clock: datetime, event: dict[str, Any], locked: str | None) -> None:
        counts = clock <= datetime.now(UTC)
        latest = max((c for c, counted in self._ledger if counted), default=None)
        missed = _missed_clocks(latest, clock)
        with ExitStack() as held:
            if locked is not None:
                holder = held.enter_context(psycopg.connect(self._dsn))
                held.callback(holder.rollback)
                holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (locked,))
            runtime = runtime_for(
                None, self._settings, self._connections, clock=lambda: datetime.now(UTC)
            )
            handle(event, None, runtime)
        self._ledger.append((clock, counts))
        self._owe(clock, missed, locked)

    # --- the model ---------------------------------------------------------------

    def _owe(self, clock: datetime, missed: list[datetime], locked: str | None) -> None:
        """Record what the run at ``clock`` (catching ``missed`` up) owes, and what it carries."""
        for duty_id, status in self._status.items():
            carried = self._pending.pop(duty_id, [])
            if status != "active":
                # A paused duty is not dispatched: what it was carrying may
                # come when it is active again, or never.
                for each in carried:
                    self._cover(duty_id, each.clock, None, None)
                continue
            covered = [_Carried(clock, clock)] + [_Carried(c, clock) for c in missed]
            if duty_id == locked:
                self._pending[duty_id] = carried + covered
                continue
            self._cover(duty_id, clock, Why.OWN_CLOCK, Why.BETWEEN_RUNS)
            for missed_clock in missed:
                self._cover(duty_id, missed_clock, Why.MISSED_CLOCK, Why.BETWEEN_RUNS)
            latest_set_aside = max((each.set_aside_at for each in carried), default=None)
            for each in carried:
                owed = each.clock == latest_set_aside or clock - each.clock <= CATCH_UP
                why = Why.SET_ASIDE if owed else None
                self._cover(duty_id, each.clock, why, why)

    def _cover(self, duty_id: str, clock: datetime, at: Why | None, between: Why | None) -> None:
        """Owe what covering ``clock`` gives the duty, for those reasons (None: only allow it).

        ``at`` is the reason for what the planner owes at ``clock``, ``between``
        for what became owed since the previous scheduled clock.
        """
        for drafts, why in (
            (self._planned(duty_id, clock, between=False), at),
            (self._planned(duty_id, clock, between=True), between),
        ):
            for identity, draft in drafts.items():
                self._drafts[identity] = draft
                if why is None:
                    self._allowed.add(identity)
                else:
                    self._required.setdefault(identity, set()).add(why)

    def _planned(self, duty_id: str, clock: datetime, *, between: bool) -> Drafts:
        memo = (duty_id, clock, between)
        if memo not in self._memo:
            definition = self._definitions[duty_id]
            plan = _owed_between if between else _owed_at
            self._memo[memo] = plan(definition, clock)
        return self._memo[memo]

    # --- what must hold after every step -----------------------------------------

    @invariant()
    def tasks_are_what_is_owed(self) -> None:
        rows = task_rows(self._conn)
        identities = [_identity(row) for row in rows]
        assert len(identities) == len(set(identities)), f"duplicate tasks: {identities}"
        present = set(identities)
        missing = sorted(set(self._required) - present)
        if missing:
            _report_missing(missing, self._required)
        extra = sorted(present - set(self._required) - self._allowed)
        assert not extra, f"tasks nothing owed: {extra}"
        for row in rows:
            expected = {c: self._drafts[_identity(row)][c] for c in TASK_COLUMNS}
            assert row == expected, f"task differs from the planner's draft: {row} != {expected}"

    @invariant()
    def last_dispatched_period_is_the_greatest_key_created(self) -> None:
        created: dict[str, list[str]] = {}
        for duty_id, _, key in (_identity(row) for row in task_rows(self._conn)):
            created.setdefault(duty_id, []).append(key)
        stored: dict[str, str | None] = dict(
            self._conn.execute("SELECT id, last_dispatched_period FROM duly_duty").fetchall()
        )
        expected = {
            duty_id: _greatest(definition, created.get(duty_id, []))
            for duty_id, definition in self._definitions.items()
        }
        assert stored == expected, f"last_dispatched_period {stored} != greatest created {expected}"


def _report_missing(missing: list[Identity], required: dict[Identity, set[Why]]) -> None:
    """Fail for the missing rows, from one line per rule, so hypothesis tells them apart."""
    blamed: dict[Why, list[Identity]] = {}
    for identity in missing:
        blamed.setdefault(min(required[identity]), []).append(identity)
    if Why.OWN_CLOCK in blamed:
        raise AssertionError(f"owed at a run's own clock, not created: {blamed[Why.OWN_CLOCK]}")
    if Why.MISSED_CLOCK in blamed:
        raise AssertionError(
            f"owed at a missed daily clock (catch-up), not created: {blamed[Why.MISSED_CLOCK]}"
        )
    if Why.BETWEEN_RUNS in blamed:
        raise AssertionError(
            f"became owed between two runs, not created: {blamed[Why.BETWEEN_RUNS]}"
        )
    raise AssertionError(f"owed to a set-aside duty, not created: {blamed[Why.SET_ASIDE]}")


def test_every_owed_period_is_created_once_and_nothing_else(
    server_dsn: str, template_database: str
) -> None:
    class OnThisServer(OwedMachine):
        def __init__(self) -> None:
            super().__init__(server_dsn, template_database)

    run_state_machine_as_test(OnThisServer, settings=SIZE)
