"""Whatever happens to a duty and to the runs, each run creates what the duty's account owes.

A hypothesis state machine drives one real database through the handler:
scheduled runs every 1 to 24 hours, outages of random length up to (and a
little past) the catch-up horizon, a duty's row locked during a run (set
aside), two runs at one clock at once, manual runs at past and future clocks,
tasks deleted by someone else, a change of the run's rules (a new tzdata or
holidays release), and every edit a writer can make: each cadence column, the
owner, pauses and resumes, review flips, the effective window, a zone nobody
knows (a fault) later fixed. Zones with short and long days (Europe/Berlin,
America/Santiago, Australia/Lord_Howe, Antarctica/Troll, America/Nuuk) sit
beside UTC and two zones 25 hours apart (Pacific/Kiritimati,
Pacific/Pago_Pago), and every clock lies in 2026 before November, before the
wall clock, so only the future-clock rule makes a run "future".

After every step the task keys in the database must be exactly the model's,
and each run at the chain's clock must count what the model counts
(``beyond_horizon``, ``changed_while_owed``).

The model is this file's own reading of docs/contract.md#account; it asks the
period engine for keys and due dates only, never the planner:

- A period becomes owed on a local day: its first day, or its
  ``visible_from`` day if that is earlier, never before its first day less
  the lead, nor before the effective window's first day; one that becomes
  owed after the window's last day is not owed.
- Every edit is placed at the local day of the latest scheduled clock (a run
  at a future clock never counts) in the duty's zone after the edit; with no
  such clock, before every day. A zone edit to a zone whose day there is
  behind the old zone's moves the account's day, and every edit and window
  day placed after it, back to that day; one to a zone whose day there is
  ahead moves the pause that bounds the account, if it still stands on its
  clock's day, to that clock's day in the new zone; a change is judged on
  the old zone's day, never before the account's. An edit
  placed on day ``s`` takes effect for what becomes owed after ``s``. An
  edit of the effective window places outside the days after the account's
  day (and after the previous window edit's), through ``s``, that the window
  as it stood did not hold.
- A duty is dispatchable on a day when, after the edits placed before that
  day, it is active and approved, and no window edit placed that day
  outside. The account's day is the today of the last run, at a clock not
  in the future, that judged the duty and owed it something or found it
  edited (the account moves with the tasks a run writes); for a duty added
  while the ledger held a clock, that clock's day; for one added before any,
  the scheduled clock before the first run (the origin), and it owes its
  current period as a new duty does.
- A run judging the duty owes the periods that became owed by its today and
  after the account's day on a day the duty was dispatchable; and, if the duty
  became dispatchable or changed since the account was kept (by an edit
  placed on or before the window's last day), or after the day
  a run at a past clock kept it on (or the run's rules differ from the
  previous run's, or that run set the duty aside while it judged it so),
  also those that became owed by the latest such edit's day: those not over,
  and those that begin after that day (its lead opened them by then: they
  became owed as of that day), where
  the latest such edit was placed by its today (the account keeps that day
  alone; an edit placed with no clock counts for every run). Each
  must pass the effective-window test on its due date (its last day after
  the period). One that is over and became owed on or before the horizon
  (today less ``DISPATCH_CATCH_UP_DAYS`` + 1) is counted, not created,
  however far before the horizon it lies, unless its task exists (an
  earlier run's lead created it). A run at a clock before the
  account's day owes nothing.
- A run judges a duty it reads that is dispatchable, whose cadence the
  engine accepts, not locked, and whose today lies in its window (or past its
  end, which came after the account's day). A set-aside, faulted or skipped
  duty keeps its account.
- ``changed_while_owed`` counts the duties judged whose cadence, owner or
  window changed after the account's day (the origin's for a duty no run
  kept), which they had days dispatchable since (paused or not when the
  change came), as those days stood when the change was made for a kept
  account.

``DULY_SOAK=1`` (``make soak``) runs it at soak size; the gate runs it small.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

import psycopg
from hypothesis import HealthCheck, settings
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

from dispatch_fn.aws import handle, runtime_for
from dispatch_fn.db import ConnectionCache
from dispatch_fn.engine import periods
from dispatch_fn.settings import Settings
from support import cloned_database, duty, insert_duties

SOAK = os.environ.get("DULY_SOAK") == "1"
SIZE = settings(
    max_examples=200 if SOAK else 6,
    stateful_step_count=40 if SOAK else 20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

DAY: Final = timedelta(days=1)
# Every clock stays before this, well before the wall clock (2026-12).
LAST_CLOCK: Final = datetime(2026, 11, 1, tzinfo=UTC)
# Where the chain starts: before each season's clock changes in the zones below.
FIRST_DAYS: Final = (
    st.dates(date(2026, 3, 22), date(2026, 3, 31))
    | st.dates(date(2026, 9, 1), date(2026, 9, 6))
    | st.dates(date(2026, 9, 28), date(2026, 10, 4))
)
ZONES: Final = (
    "UTC",
    "Europe/Berlin",
    "America/Santiago",
    "Australia/Lord_Howe",
    "Antarctica/Troll",
    "America/Nuuk",
    # A day or two apart at most clocks: a zone edit between them moves the
    # account back (migration 0021).
    "Pacific/Kiritimati",
    "Pacific/Pago_Pago",
)
# A zone the engine refuses: the duty faults until a later edit fixes it.
NO_ZONE: Final = "Mars/Olympus"
OWNERS: Final = ("owner-1", "owner-2", "owner-3")
MAX_DUTIES: Final = 6
# A page waits this long for a locked row before the run sets the duty aside;
# the other runs wait as long as they need (two runs at one clock wait on
# each other's rows).
LOCK_TIMEOUT_MS: Final = 150
MACHINE_RULES: Final = ("machine rules 1", "machine rules 2")

type Identity = tuple[str, str, str]  # duty_id, owner_id, period_key

CADENCE_EDITS: Final = st.one_of(
    st.tuples(st.just("frequency"), st.sampled_from(("daily", "weekly", "monthly", "quarterly"))),
    st.tuples(st.just("timezone"), st.sampled_from((*ZONES, NO_ZONE))),
    st.tuples(
        st.just("due_anchor"), st.sampled_from(("period_start", "period_end", "after_period_end"))
    ),
    st.tuples(st.just("due_offset_days"), st.integers(-3, 12)),
    st.tuples(st.just("due_offset_months"), st.integers(0, 2)),
    st.tuples(
        st.just("due_roll"),
        st.sampled_from(("none", "following", "preceding", "modified_following")),
    ),
    st.tuples(st.just("holiday_calendar"), st.sampled_from((None, "US", "DE-BY"))),
    st.tuples(st.just("lead_days"), st.integers(-1, 9)),
    st.tuples(st.just("grace_days"), st.integers(0, 5)),
)
NEW_CADENCES: Final = st.fixed_dictionaries(
    {
        "frequency": st.sampled_from(("daily", "weekly", "monthly")),
        "timezone": st.sampled_from(ZONES),
        "due_anchor": st.sampled_from(("period_start", "period_end")),
        "due_offset_days": st.integers(0, 3),
        "lead_days": st.integers(0, 5),
        "due_roll": st.sampled_from(("none", "following", "preceding")),
    }
)


@dataclass(frozen=True, slots=True)
class Edit:
    """An edit as the model places it: on ``stamp`` (None: before every day)."""

    stamp: date | None
    dispatchable: bool  # the duty's state after it
    fresh: bool  # it became dispatchable, or changed while dispatchable
    change: bool  # its cadence, owner or window changed
    # A kept account's change is judged when it is made, on the account's own
    # days, by the days it owed then (the trigger's dispatch_recast_on); None:
    # no account was kept, judged at the run against the origin.
    recast: bool | None = None
    # The latest scheduled clock when it was placed (None: no clock).
    clock: datetime | None = None


@dataclass(slots=True)
class Duty:
    """What the model knows of one duty: its row and the history its account stands for."""

    row: dict[str, Any]
    initially: bool
    kept: date | None
    edits: list[Edit] = field(default_factory=list)
    fresh: bool = False
    # Edits since the account was kept, for changed_while_owed.
    since_kept: list[Edit] = field(default_factory=list)
    # Days a window edit found outside the window as it stood: (after, through].
    outside: list[tuple[date | None, date]] = field(default_factory=list)
    # The latest window edit's stamp: the window as it stands holds since then.
    window_since: date | None = None
    # A pause bounds the account (the trigger's dispatch_paused_on), and, when
    # a pause placed at a clock set it and it still stands on that clock's
    # day, that pause's index in ``edits`` (its dispatch_paused_at).
    bounded: bool = False
    pause_mark: int | None = None

    def dispatchable_on(self, day: date) -> bool:
        """Active and approved on ``day``, after every edit placed before it, and not outside."""
        state = self.initially
        for edit in self.edits:
            if edit.stamp is None or edit.stamp < day:
                state = edit.dispatchable
        return state and not any(
            (after is None or after < day) and day <= through for after, through in self.outside
        )


@dataclass(frozen=True, slots=True)
class Judged:
    """What the model owes one duty at one run."""

    owed: frozenset[Identity]
    beyond: bool
    changed: bool


@dataclass(frozen=True, slots=True)
class LedgerRun:
    clock: datetime
    counted: bool  # a clock the ledger's latest scheduled clock may be
    rules: str
    # The duty the run set aside while it judged it afresh: the next run
    # judges it afresh too (migration 0022), as of the clock of the judgement
    # it owes (an earlier run's, for one set aside again).
    afresh: Mapping[str, datetime] = field(default_factory=dict)


def _is_dispatchable(row: dict[str, Any]) -> bool:
    return bool(row["status"] == "active" and row["review_status"] == "approved")


def _refused(row: dict[str, Any]) -> bool:
    """Whether the engine refuses the duty's cadence: the run faults it."""
    try:
        periods.zone(row["timezone"])
        periods.check_day_count(row["lead_days"], "lead_days")
        periods.check_due_rule(
            row["due_anchor"],
            row["due_offset_days"],
            row["due_offset_months"],
            row["due_roll"],
            row["holiday_calendar"],
        )
        periods.check_grace_days(row["grace_days"])
    except ValueError:
        return True
    return False


def _local_day(instant: datetime, zone: str) -> date:
    """The local day of ``instant`` in ``zone``; one PostgreSQL does not know reads as UTC."""
    try:
        return periods.local_date(instant, zone)
    except ValueError:
        return instant.astimezone(UTC).date()


def _within(day: date, row: dict[str, Any]) -> bool:
    low, high = row["effective_from"], row["effective_to"]
    return (low is None or day >= low) and (high is None or day <= high)


def _outside(
    window: tuple[date | None, date | None], kept: date | None, stamp: date
) -> list[tuple[date | None, date]]:
    """The days after ``kept``, through ``stamp``, that ``window`` did not hold."""
    low, high = window
    if low is not None and high is not None and low > high:
        return [(kept, stamp)]
    days: list[tuple[date | None, date]] = []
    if low is not None and (kept is None or low - DAY > kept):
        days.append((kept, min(stamp, low - DAY)))
    if high is not None and high < stamp:
        days.append((high if kept is None else max(kept, high), stamp))
    return days


def _move_back(model: Duty, day: date, old_zone: str) -> None:
    """A zone edit to a zone whose day is behind the account's: the account's days move back.

    Every day the account holds is the old zone's day of a clock no later
    than the latest; in the new zone none is after ``day``. A pause still on
    its clock's day goes to that clock's day there (migration 0026).
    """
    exact = _pause_clock_day(model, old_zone)
    moved: dict[int, Edit] = {}
    for index, edit in enumerate(model.edits):
        stamp = None if edit.stamp is None else min(edit.stamp, day)
        if index == model.pause_mark and exact is not None and stamp is not None:
            stamp = min(stamp, exact)
        moved[id(edit)] = replace(edit, stamp=stamp)
    model.since_kept = [moved.get(id(edit), edit) for edit in model.since_kept]
    model.edits = [moved[id(edit)] for edit in model.edits]
    model.outside = [
        (None if after is None else min(after, day), min(through, day))
        for after, through in model.outside
    ]
    if model.window_since is not None:
        model.window_since = min(model.window_since, day)
    if model.kept is not None:
        model.kept = min(model.kept, day)


def _pause_clock_day(model: Duty, old_zone: str) -> date | None:
    """The pause mark's clock's day in the duty's (new) zone, if it stands on that clock's day."""
    if model.pause_mark is None:
        return None
    pause = model.edits[model.pause_mark]
    if pause.clock is None or pause.stamp != _local_day(pause.clock, old_zone):
        return None
    return _local_day(pause.clock, model.row["timezone"])


def _pause_ahead(model: Duty, old_zone: str) -> None:
    """A zone edit not moving the account back: a pause still on its clock's day moves there.

    The trigger keeps the clock of the pause that bounds the account and,
    at a move to a zone whose day is ahead, places it on that clock's day in
    the new zone (migration 0026).
    """
    ahead = _pause_clock_day(model, old_zone)
    if model.pause_mark is None or ahead is None:
        return
    pause = model.edits[model.pause_mark]
    if pause.stamp is None or ahead <= pause.stamp:
        return
    # The pause bounds what the account owed: every day through its clock's
    # day in the new zone. Edits after it came at its clock or later, so
    # none is before that day there either (the spans keep their days).
    moved: dict[int, Edit] = {}
    for index in range(model.pause_mark, len(model.edits)):
        edit = model.edits[index]
        if edit.stamp is not None and edit.stamp < ahead:
            moved[id(edit)] = model.edits[index] = replace(edit, stamp=ahead)
    model.since_kept = [moved.get(id(edit), edit) for edit in model.since_kept]


def _keep_pause(model: Duty, kept_before: date | None, today: date) -> None:
    """A run keeps the account: its pause goes, unless edits placed after its today remain.

    One that stays moves to the account's day where that is later, off its
    clock's day (page_advance.sql): the pause mark no longer says its clock.
    """
    if not model.since_kept:
        model.bounded, model.pause_mark = False, None
        return
    if model.pause_mark is None:
        return
    stamp = model.edits[model.pause_mark].stamp
    days = [day for day in (kept_before, today) if day is not None]
    if stamp is None or any(day > stamp for day in days):
        model.pause_mark = None


def _recast(model: Duty, change: bool, day: date | None) -> bool | None:
    """Whether a change on ``day`` replaced a cadence that owed since the account's day."""
    kept = model.kept
    if kept is None or day is None:
        return None
    judged = max(day, kept)
    return change and any(
        model.dispatchable_on(kept + timedelta(days=n)) for n in range(1, (judged - kept).days + 1)
    )


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def judge(
    model: Duty,
    now: datetime,
    *,
    base: date | None,
    rejudge: bool,
    owed_on: date | None,
    catch_up_days: int,
    created: frozenset[Identity] = frozenset(),
) -> Judged | None:
    """What a run at ``now`` owes the duty (None: the run does not judge it).

    A period that lapsed past the horizon counts unless ``created`` holds it.

    ``base`` is the account's day, or the origin's for a duty no run kept yet.
    """
    row = model.row
    if not _is_dispatchable(row) or _refused(row):
        return None
    zone, frequency, lead = row["timezone"], row["frequency"], row["lead_days"]
    today = periods.local_date(now, zone)
    since = base if base is not None else today
    # A duty no run kept yet owes its current period as a new one does, if
    # it owed as that period became owed; under new rules every account is
    # judged as if it changed on its own day. The account keeps the latest
    # such day: a run before it owes nothing by it.
    stamps = [edit.stamp for edit in model.since_kept if edit.fresh and edit.stamp is not None]
    origin_fresh = not stamps and model.kept is None
    end = row["effective_to"]
    # Rules new at this run owe as of its day: nothing in a window that ended
    # before it. One set aside while judged afresh is owed that judgement, as
    # of the day it was made (``owed_on``).
    rejudge = (rejudge and not (end is not None and today > end)) or (
        owed_on is not None and not (end is not None and owed_on > end)
    )
    fresh_day = (
        max(stamps) if stamps else since if model.kept is None or model.fresh or rejudge else None
    )
    # Its window closed after the account's day, or on a change's (or the
    # origin's) day: it still owes what became owed in it, and what that
    # change owes.
    changed_on = max(stamps) if stamps else since if model.kept is None else None
    closed_behind = (
        end is not None
        and today > end
        and (since < end or (changed_on is not None and changed_on <= end))
    )
    if not _within(today, row) and not closed_behind:
        return None
    if model.kept is not None and today < model.kept:
        return Judged(frozenset(), beyond=False, changed=False)
    horizon = today - timedelta(days=max(catch_up_days, 1) + 1)
    fresh = fresh_day is not None and fresh_day <= today
    # The latest change's day (a duty added with a clock is one; the origin
    # is not): what begins after it, its lead opened by then.
    changed_day = (
        max(stamps)
        if stamps
        else since
        if model.kept is not None and (model.fresh or rejudge)
        else None
    )
    first = max(min(since + DAY, today), today - timedelta(days=120))
    last = today + timedelta(days=max(lead, 0))
    keys = periods.periods_between(
        frequency, periods.start_of_day(first, zone), periods.start_of_day(last, zone), zone
    )
    owed: set[Identity] = set()
    lapsed = False
    for key in keys:
        first_day, last_day = periods.period_days(frequency, key)
        due = periods.due_date_for(
            frequency,
            key,
            zone,
            row["due_anchor"],
            row["due_offset_days"],
            due_offset_months=row["due_offset_months"],
            due_roll=row["due_roll"],
            holiday_calendar=row["holiday_calendar"],
        )
        visible = periods.visible_from_for(due, lead)
        became = min(first_day, max(visible, first_day - timedelta(days=max(lead, 0))))
        if row["effective_from"] is not None:
            # Its lead opened it before the window began: owed as it begins.
            became = max(became, row["effective_from"])
        if became > today:
            continue
        if not _within(last_day if row["due_anchor"] == "after_period_end" else due, row):
            continue
        if row["effective_to"] is not None and became > row["effective_to"]:
            continue  # owed after the window's last day: outside it
        live = last_day >= today
        by_account = became > since and model.dispatchable_on(became)
        # One that begins after the latest such edit's day, its lead opened
        # by then: owed as if it became owed that day. What became owed after
        # that day is the account's alone (a pause after it bounds it).
        claimed = (
            fresh
            and fresh_day is not None
            and became <= fresh_day
            and (not origin_fresh or model.dispatchable_on(became))
        )
        opened = claimed and changed_day is not None and first_day > changed_day
        if not (by_account or (claimed and live) or opened):
            continue
        if opened and changed_day is not None:
            became = max(became, changed_day)
        if not live and became <= horizon:
            lapsed = lapsed or (row["id"], row["owner_id"], key) not in created
            continue
        owed.add((row["id"], row["owner_id"], key))
    changed = any(
        edit.recast
        if edit.recast is not None
        else (
            edit.change
            and edit.stamp is not None
            and edit.stamp > since
            and any(
                model.dispatchable_on(since + timedelta(days=n))
                for n in range(1, (edit.stamp - since).days + 1)
            )
        )
        for edit in model.since_kept
    )
    return Judged(
        frozenset(owed),
        beyond=lapsed,
        changed=changed,
    )


class OwedMachine(RuleBasedStateMachine):
    """One database, the runs and edits months bring, and the model of what they owe."""

    duties = Bundle("duties")

    def __init__(self, server_dsn: str, template: str) -> None:
        super().__init__()
        self._stack = ExitStack()
        self._dsn = self._stack.enter_context(cloned_database(server_dsn, template))
        self._conn = self._stack.enter_context(psycopg.connect(self._dsn, autocommit=True))
        self._caches = (ConnectionCache(), ConnectionCache())
        for cache in self._caches:
            self._stack.callback(cache.discard)
        self._settings = Settings(database_url=self._dsn, chunk_size=3)
        self._model: dict[str, Duty] = {}
        self._next = datetime(2026, 3, 22, 1, tzinfo=UTC)
        self._ledger: list[LedgerRun] = []
        self._rules = MACHINE_RULES[0]
        self._expected: set[Identity] = set()
        self._history: list[str] = []

    def teardown(self) -> None:
        self._stack.close()

    # --- the world ---------------------------------------------------------------

    @initialize(
        target=duties,
        first_day=FIRST_DAYS,
        hour=st.integers(0, 23),
        interval_hours=st.sampled_from((1, 2, 5, 8, 12, 24)) | st.integers(1, 24),
        catch_up_days=st.sampled_from((1, 2, 7)),
        cadence=NEW_CADENCES,
    )
    def start(
        self,
        first_day: date,
        hour: int,
        interval_hours: int,
        catch_up_days: int,
        cadence: dict[str, Any],
    ) -> str:
        self._next = datetime(first_day.year, first_day.month, first_day.day, hour, tzinfo=UTC)
        self._settings = replace(
            self._settings,
            schedule_interval_hours=interval_hours,
            catch_up_days=catch_up_days,
        )
        self._log(f"start {_iso(self._next)} every {interval_hours} h, horizon {catch_up_days} d")
        return self._add(cadence, active=True)

    @precondition(lambda self: len(self._model) < MAX_DUTIES)
    @rule(target=duties, cadence=NEW_CADENCES, active=st.booleans())
    def add_duty(self, cadence: dict[str, Any], active: bool) -> str:
        return self._add(cadence, active=active)

    @rule(duty_id=duties, edit=CADENCE_EDITS)
    def edit_cadence(self, duty_id: str, edit: tuple[str, Any]) -> None:
        self._edit(duty_id, *edit)

    @rule(duty_id=duties, owner=st.sampled_from(OWNERS))
    def reassign(self, duty_id: str, owner: str) -> None:
        self._edit(duty_id, "owner_id", owner)

    @rule(duty_id=duties, status=st.sampled_from(("active", "paused", "retired")))
    def set_status(self, duty_id: str, status: str) -> None:
        self._edit(duty_id, "status", status)

    @rule(duty_id=duties, review=st.sampled_from(("approved", "to_review", "to_confirm")))
    def flip_review(self, duty_id: str, review: str) -> None:
        self._edit(duty_id, "review_status", review)

    @rule(
        duty_id=duties,
        bound=st.sampled_from(("effective_from", "effective_to")),
        days=st.none() | st.integers(-10, 10),
    )
    def move_window(self, duty_id: str, bound: str, days: int | None) -> None:
        day = None if days is None else self._next.date() + timedelta(days=days)
        self._edit(duty_id, bound, day)

    @rule(duty_id=duties, zone=st.sampled_from(ZONES), resume=st.booleans())
    def move_while_paused(self, duty_id: str, zone: str, resume: bool) -> None:
        # A pause, then a move (to a zone whose day may be ahead), between
        # two runs: the pause keeps its clock (migration 0026).
        self._edit(duty_id, "status", "paused")
        self._edit(duty_id, "timezone", zone)
        if resume:
            self._edit(duty_id, "status", "active")

    @rule(duty_id=duties, zone=st.sampled_from(ZONES))
    def fix_zone(self, duty_id: str, zone: str) -> None:
        if self._model[duty_id].row["timezone"] == NO_ZONE:
            self._edit(duty_id, "timezone", zone)

    @rule(pick=st.integers(0, 10_000))
    def delete_a_task(self, pick: int) -> None:
        rows = self._conn.execute(
            "SELECT duty_id, owner_id, period_key FROM duly_task"
            " ORDER BY duty_id, owner_id, period_key"
        ).fetchall()
        if not rows:
            return
        duty_id, owner_id, key = rows[pick % len(rows)]
        gone = (str(duty_id), str(owner_id), str(key))
        self._conn.execute(
            "DELETE FROM duly_task WHERE duty_id = %s AND owner_id = %s AND period_key = %s", gone
        )
        self._expected.discard(gone)
        self._log(f"deleted task {gone}")

    @rule()
    def change_the_rules(self) -> None:
        self._rules = MACHINE_RULES[1 - MACHINE_RULES.index(self._rules)]
        self._log(f"rules now {self._rules!r}")

    @rule(hours=st.integers(1, 9 * 24))
    def outage(self, hours: int) -> None:
        horizon = (self._settings.catch_up_days + 1) * 24
        steps = -(-min(hours, horizon) // self._settings.schedule_interval_hours)
        skipped = self._next + steps * self._settings.interval
        if skipped < LAST_CLOCK:
            self._next = skipped
            self._log(f"outage: next scheduled clock {_iso(self._next)}")

    # --- the runs ----------------------------------------------------------------

    @precondition(lambda self: self._next < LAST_CLOCK)
    @rule(locked=st.none() | duties)
    def scheduled_run(self, locked: str | None) -> None:
        self._run(self._next, locked=locked, counts=True)
        self._next += self._settings.interval

    @precondition(lambda self: self._next < LAST_CLOCK)
    @rule()
    def two_runs_at_one_clock(self) -> None:
        self._run(self._next, locked=None, counts=False, concurrent=True)
        self._next += self._settings.interval

    @rule(minutes_back=st.integers(1, 10 * 24 * 60))
    def manual_run_at_a_past_clock(self, minutes_back: int) -> None:
        self._run(self._next - timedelta(minutes=minutes_back), locked=None, counts=False)

    @rule(days_ahead=st.integers(1, 60), minutes=st.integers(0, 24 * 60 - 1))
    def manual_run_at_a_future_clock(self, days_ahead: int, minutes: int) -> None:
        clock = datetime.now(UTC) + timedelta(days=days_ahead, minutes=minutes)
        self._run(clock, locked=None, counts=False)

    # --- driving the database ----------------------------------------------------

    def _latest_clock(self) -> datetime | None:
        return max((run.clock for run in self._ledger if run.counted), default=None)

    def _stamp(self, zone: str) -> date | None:
        latest = self._latest_clock()
        return None if latest is None else _local_day(latest, zone)

    def _add(self, cadence: dict[str, Any], *, active: bool) -> str:
        duty_id = f"d{len(self._model)}"
        row = duty(duty_id, **cadence, status="active" if active else "paused")
        insert_duties(self._conn, [row])
        stamp = self._stamp(row["timezone"])
        # One added not dispatchable owes nothing by its addition (migration 0024).
        self._model[duty_id] = Duty(
            row,
            initially=_is_dispatchable(row),
            kept=stamp,
            fresh=stamp is not None and _is_dispatchable(row),
            bounded=not _is_dispatchable(row),
        )
        self._log(f"added {duty_id} {cadence} {'active' if active else 'paused'} (stamp {stamp})")
        return duty_id

    def _edit(self, duty_id: str, column: str, value: Any) -> None:
        model = self._model[duty_id]
        if model.row[column] == value:
            return
        was = _is_dispatchable(model.row)
        window = model.row["effective_from"], model.row["effective_to"]
        old_zone = model.row["timezone"]
        model.row[column] = value
        self._conn.execute(
            f"UPDATE duly_duty SET {column} = %s WHERE id = %s",  # the column is the machine's own
            (value, duty_id),
        )
        now = _is_dispatchable(model.row)
        stamp = self._stamp(model.row["timezone"])
        # The account's days are the old zone's: a change is judged on them.
        old_stamp = self._stamp(old_zone) if column == "timezone" else stamp
        change = column not in ("status", "review_status")
        # Never before the account's own day: an account after the day of the
        # latest clock in its zone moves back to it.
        judged = max((day for day in (old_stamp, model.kept) if day is not None), default=None)
        if stamp is not None and judged is not None and stamp < judged:
            recast = _recast(model, change, judged)
            _move_back(model, stamp, old_zone)
        else:
            if column in ("effective_from", "effective_to") and stamp is not None:
                judged_from = max(
                    (day for day in (model.kept, model.window_since) if day is not None),
                    default=None,
                )
                model.outside.extend(_outside(window, judged_from, stamp))
                model.window_since = stamp
                # The trigger bounds the account at its own day: no clock.
                model.bounded, model.pause_mark = True, None
            recast = _recast(model, change, old_stamp)
            if column == "timezone":
                _pause_ahead(model, old_zone)
        # A change owes as of its day: placed after the window's last day, it
        # owes nothing (migration 0024), and an earlier change's mark stays.
        after_window = (
            stamp is not None
            and model.row["effective_to"] is not None
            and stamp > model.row["effective_to"]
        )
        edit = Edit(
            stamp,
            dispatchable=now,
            fresh=now
            and (not was or column not in ("status", "review_status"))
            and not after_window,
            change=change,
            recast=recast,
            clock=self._latest_clock(),
        )
        if was and not now and not model.bounded:
            # The first pause since the account was kept bounds it, at its
            # clock's day (migration 0026).
            model.bounded = True
            model.pause_mark = len(model.edits) if edit.clock is not None else None
        elif now and not was and stamp is None and model.kept is None:
            model.bounded, model.pause_mark = False, None
        model.edits.append(edit)
        model.since_kept.append(edit)
        model.fresh = model.fresh or edit.fresh
        self._log(f"{duty_id}.{column} = {value!r} (stamp {edit.stamp})")

    def _run(
        self, clock: datetime, *, locked: str | None, counts: bool, concurrent: bool = False
    ) -> None:
        future = clock > datetime.now(UTC)
        latest = self._latest_clock()
        counted = [run for run in self._ledger if run.counted]
        earliest = min((run.clock for run in counted), default=None)
        previous = max(counted, key=lambda run: run.clock, default=None)
        rejudge = previous is not None and previous.rules != self._rules
        owed_afresh: Mapping[str, datetime] = {} if previous is None else previous.afresh
        origin = (
            earliest - self._settings.interval
            if earliest is not None and earliest < clock
            else clock - self._settings.interval
        )
        self._log(
            f"run at {_iso(clock)}"
            + (" (future)" if future else "")
            + (f" with {locked} locked" if locked else "")
            + (" twice at once" if concurrent else "")
            + (" rejudging" if rejudge else "")
        )
        reports = self._invoke(clock, locked=locked, concurrent=concurrent)
        beyond = changed = 0
        set_aside_afresh: dict[str, datetime] = {}
        for duty_id, model in self._model.items():
            afresh = rejudge or duty_id in owed_afresh
            if duty_id == locked:
                if afresh:
                    set_aside_afresh = {duty_id: min(clock, owed_afresh.get(duty_id, clock))}
                continue
            base = (
                model.kept if model.kept is not None else _local_day(origin, model.row["timezone"])
            )
            judged = judge(
                model,
                clock,
                base=base,
                rejudge=rejudge,
                owed_on=(
                    _local_day(owed_afresh[duty_id], model.row["timezone"])
                    if duty_id in owed_afresh
                    else None
                ),
                catch_up_days=self._settings.catch_up_days,
                created=frozenset(self._expected),
            )
            if judged is None:
                continue
            self._expected |= judged.owed
            beyond += judged.beyond
            changed += judged.changed
            today = periods.local_date(clock, model.row["timezone"])
            # The account moves with the tasks a run writes: where the duty
            # owed nothing and nothing marked it, the day it stands at owes
            # the same.
            moves = (
                bool(judged.owed)
                or judged.beyond
                or model.fresh
                or bool(model.since_kept)
                or afresh
                or (model.row["effective_to"] is not None and today > model.row["effective_to"])
            )
            if not future and (model.kept is None or (today >= model.kept and moves)):
                # Edits placed after today (a run at a past clock) are still
                # to come for the runs after it: a resume there still owes
                # the period current then.
                kept_before = model.kept
                model.kept = today
                model.since_kept = [
                    edit
                    for edit in model.since_kept
                    if edit.stamp is not None and edit.stamp > today
                ]
                _keep_pause(model, kept_before, today)
                model.fresh = any(edit.fresh for edit in model.since_kept)
        self._ledger.append(
            LedgerRun(clock, counted=not future, rules=self._rules, afresh=set_aside_afresh)
        )
        for _ in reports[1:]:
            self._ledger.append(LedgerRun(clock, counted=not future, rules=self._rules))
        self._check_tasks()
        if counts and latest is not None and clock > latest:
            report = reports[0]
            reported = (report["beyond_horizon"], report["changed_while_owed"])
            assert reported == (beyond, changed), (
                f"counts (beyond_horizon, changed_while_owed) {reported} != the model's"
                f" {(beyond, changed)}\n{self._story()}"
            )

    def _invoke(
        self, clock: datetime, *, locked: str | None, concurrent: bool
    ) -> list[dict[str, Any]]:
        event = {"now": _iso(clock)}
        if concurrent:
            reports: list[dict[str, Any]] = [{}, {}]
            failures: list[BaseException] = []

            def run(slot: int) -> None:
                try:
                    reports[slot] = self._handle(event, self._caches[slot], self._settings)
                except BaseException as exc:  # noqa: BLE001 - reported on the main thread
                    failures.append(exc)

            threads = [threading.Thread(target=run, args=(slot,)) for slot in (0, 1)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if failures:
                raise failures[0]
            return reports
        with ExitStack() as held:
            tuning = self._settings
            if locked is not None:
                holder = held.enter_context(psycopg.connect(self._dsn))
                held.callback(holder.rollback)
                holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (locked,))
                tuning = replace(tuning, lock_timeout_ms=LOCK_TIMEOUT_MS)
            return [self._handle(event, self._caches[0], tuning)]

    def _handle(
        self, event: dict[str, Any], cache: ConnectionCache, tuning: Settings
    ) -> dict[str, Any]:
        rules = self._rules
        runtime = replace(
            runtime_for(None, tuning, cache, clock=lambda: datetime.now(UTC)),
            rules=lambda: rules,
        )
        return handle(event, None, runtime)

    # --- what must hold ----------------------------------------------------------

    def _check_tasks(self) -> None:
        rows = self._conn.execute("SELECT duty_id, owner_id, period_key FROM duly_task").fetchall()
        present: set[Identity] = {(str(d), str(o), str(k)) for d, o, k in rows}
        assert len(rows) == len(present), f"a task twice: {sorted(rows)}"
        missing = sorted(self._expected - present)
        extra = sorted(present - self._expected)
        assert (missing, extra) == ([], []), (
            f"tasks missing {missing}, tasks nothing owed {extra}\n{self._story()}"
        )

    @invariant()
    def tasks_are_what_the_accounts_owe(self) -> None:
        self._check_tasks()

    def _log(self, line: str) -> None:
        self._history.append(line)

    def _story(self) -> str:
        accounts = self._conn.execute(
            "SELECT id, timezone, frequency, lead_days, status, review_status, dispatch_through,"
            " dispatch_paused_on, dispatch_changed_on FROM duly_duty ORDER BY id"
        ).fetchall()
        return "\n".join(
            [
                "events:",
                *(f"  {line}" for line in self._history),
                "accounts (id, zone, frequency, lead, status, review, through, paused, changed):",
                *(f"  {row}" for row in accounts),
                "model's accounts: "
                + ", ".join(f"{k}: kept {m.kept} fresh {m.fresh}" for k, m in self._model.items()),
            ]
        )


def test_every_period_a_duty_s_account_owes_is_created_once_and_nothing_else(
    server_dsn: str, template_database: str
) -> None:
    class OnThisServer(OwedMachine):
        def __init__(self) -> None:
            super().__init__(server_dsn, template_database)

    run_state_machine_as_test(OnThisServer, settings=SIZE)
