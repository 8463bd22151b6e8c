"""One run of the dispatcher against the database: pages, plans, writes, report.

The imperative shell around ``plan``: it asks the planner once per frequency
and zone in use, then lets one statement per keyset page of duties insert what
is owed. Each page is its own short transaction, so a run killed at any
instant leaves only whole pages behind and the next run completes the rest.
Pages hold disjoint duties, so several connections can take them in turn.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Final

import psycopg
from psycopg import errors as pg_errors

from dispatch_fn import store
from dispatch_fn.errors import RunFailedError
from dispatch_fn.plan import (
    FAULT_REASONS,
    FORMS,
    SKIP_REASONS,
    Cadence,
    CadenceRefused,
    FaultReason,
    Schedule,
    SkipReason,
    Window,
    check_due_rule,
    classify,
    schedule_for,
    unknown_form_detail,
)
from dispatch_fn.progress import Progress, ProgressMeter
from dispatch_fn.store import Connection, Scope

# Duties per page. Each page statement carries a fixed cost (planning,
# unpacking the schedule arrays, one round trip) of a few milliseconds; at
# 10,000 duties it is spread over ~19,000 owed rows, whose insert sort still
# fits the default 4 MB work_mem (3.4 MB measured with 20-35 character names).
DEFAULT_CHUNK_SIZE: Final = 10_000
# Connections a run dispatches pages on. A page keeps one server backend busy
# while the client waits, so one connection leaves every other core of the
# database idle; two at once made a first run 1.6-1.7x and a no-op run
# 1.4-1.9x faster at 1,000,000 duties on a 2-core server (README, Performance).
DEFAULT_WORKERS: Final = 2
# A report lists at most this many faulty duties; the count covers them all.
FAULT_LIST_LIMIT: Final = 100
# Two runs that touch the same duties can still meet in a deadlock (the
# UPDATE's row order is the executor's) or, under stricter isolation, a
# serialization failure; the page's statement is simply tried again.
_RETRYABLE: Final = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
_ATTEMPTS: Final = 5


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What one invocation asks for: its clock, window, scope and whether to write."""

    now: datetime
    window: Window | None = None
    dry_run: bool = False
    scope: Scope = field(default_factory=Scope)

    @property
    def mode(self) -> str:
        """``scheduled`` or ``backfill``."""
        return "scheduled" if self.window is None else "backfill"


@dataclass(slots=True)
class RunReport:
    """The outcome of a run, as counted by the database."""

    request: RunRequest
    duties_read: int = 0
    tasks_created: int = 0
    tasks_existing: int = 0
    duties_advanced: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    faults: list[dict[str, str]] = field(default_factory=list)
    fault_counts: Counter[str] = field(default_factory=Counter)
    pages: int = 0
    retries: int = 0
    complete: bool = True
    last_duty_id: str | None = None

    @property
    def degraded(self) -> bool:
        """Whether any duty was refused by the engine."""
        return sum(self.fault_counts.values()) > 0

    def as_json(self) -> dict[str, Any]:
        """The report of SPEC §5, JSON-serialisable."""
        window = self.request.window
        return {
            "mode": self.request.mode,
            "now": self.request.now.isoformat(),
            "window": None
            if window is None
            else {"from": _iso(window.from_date), "to": _iso(window.to_date)},
            "dry_run": self.request.dry_run,
            "scope": {
                "organization_id": self.request.scope.organization_id,
                "duty_ids": None
                if self.request.scope.duty_ids is None
                else list(self.request.scope.duty_ids),
            },
            "duties_read": self.duties_read,
            "tasks_created": self.tasks_created,
            "tasks_existing": self.tasks_existing,
            "duties_advanced": self.duties_advanced,
            "skipped": {reason: self.skipped[reason] for reason in SKIP_REASONS},
            "faults": self.faults,
            "fault_counts": {reason: self.fault_counts[reason] for reason in FAULT_REASONS},
            "degraded": self.degraded,
            "complete": self.complete,
            "last_duty_id": self.last_duty_id,
            "pages": self.pages,
            "retries": self.retries,
        }


def run(
    conn: Connection,
    request: RunRequest,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    should_stop: Callable[[], bool] = lambda: False,
    helpers: Sequence[Connection] = (),
    on_progress: Callable[[Progress], None] | None = None,
) -> RunReport:
    """Dispatch (or, dry, count) every task ``request`` owes; return what happened.

    ``conn`` and ``helpers`` must be in autocommit mode: each page is one
    statement, so its own transaction. Pages are shared among ``conn`` and the
    ``helpers``, one thread each.
    ``should_stop`` is asked before each page; when it says yes the run ends
    early with ``complete`` False, and the next run picks up the rest.
    ``on_progress`` is called after each committed page.
    """
    if not all(each.autocommit for each in (conn, *helpers)):
        # Otherwise every page would join one long transaction, and a run
        # killed near its end would lose all of them.
        raise ValueError("dispatch.run needs autocommit connections; each page commits alone")
    report = RunReport(request)
    try:
        _run_pages(
            [conn, *helpers], request, report, chunk_size, should_stop, on_progress=on_progress
        )
    except (psycopg.Error, OSError) as exc:
        # Committed pages stay committed; say which, so the next run's work is known.
        summary = report.as_json()
        summary["complete"] = False
        raise RunFailedError(
            f"run failed after {report.pages} committed page(s), last duty id "
            f"{report.last_duty_id!r}: {type(exc).__name__}: {exc}; "
            f"report so far: {json.dumps(summary)}",
            summary,
        ) from exc
    return report


def _run_pages(
    conns: Sequence[Connection],
    request: RunRequest,
    report: RunReport,
    chunk_size: int,
    should_stop: Callable[[], bool],
    *,
    on_progress: Callable[[Progress], None] | None,
) -> None:
    conn = conns[0]
    _count_undispatchable(conn, request.scope, report)
    ready = _plan_groups(conn, request, report)
    if not ready:
        return
    meter = ProgressMeter(sum(group.duties for group, _ in ready), on_progress)
    statement = store.page_statement(request.scope, ready, dry_run=request.dry_run)
    # One connection walks the keyset alone; several need the pages' bounds
    # up front to take them in turn.
    bounds = store.page_bounds(conn, request.scope, chunk_size) if len(conns) > 1 else []
    pages = _Pages(bounds)
    lock = threading.Lock()
    halt = threading.Event()

    def work(worker: Connection) -> None:
        try:
            while (claimed := pages.claim()) is not None:
                index, after, upto = claimed
                while True:
                    if halt.is_set():
                        return
                    if should_stop():
                        report.complete = False
                        halt.set()
                        return
                    result, retries = _dispatch_page(worker, statement, after, upto, chunk_size)
                    # A short page, or one that reached its bound, ends its range.
                    finished = result.rows < chunk_size or (
                        upto is not None and result.upto == upto
                    )
                    with lock:
                        _count_page(report, result, retries)
                        report.last_duty_id = pages.record(index, result.upto, finished=finished)
                        meter.page(result.duties, report.tasks_created, report.tasks_existing)
                    if finished:
                        break
                    after = result.upto
        except BaseException:
            halt.set()  # the others finish their page and stop
            raise

    if len(conns) == 1:
        work(conn)
        return
    with ThreadPoolExecutor(len(conns), thread_name_prefix="dispatch") as pool:
        futures = [pool.submit(work, worker) for worker in conns]
    for future in futures:
        failure = future.exception()
        if failure is not None:
            raise failure


class _Pages:
    """The ranges of duties a run's connections take in turn, and how far it got.

    Range i is ``(bounds[i-1], bounds[i]]``, the last one open; each usually
    holds one page. ``record`` answers the id up to which every duty has been
    dispatched with no gap behind it: where a stopped run got to.
    """

    def __init__(self, bounds: Sequence[str]) -> None:
        self._lower: list[str | None] = [None, *bounds]
        self._upper: list[str | None] = [*bounds, None]
        self._reached: list[str | None] = list(self._lower)
        self._finished = [False] * len(self._lower)
        self._next = 0
        self._open = 0  # the first range not yet finished
        self._claiming = threading.Lock()

    def claim(self) -> tuple[int, str | None, str | None] | None:
        """The next untaken range as ``(index, after, upto)``, or None when all are taken."""
        with self._claiming:
            index = self._next
            if index == len(self._lower):
                return None
            self._next += 1
        return index, self._lower[index], self._upper[index]

    def record(self, index: int, upto: str | None, *, finished: bool) -> str | None:
        """Note a committed page of range ``index``; return the gapless high-water id.

        Callers serialise their calls.
        """
        if upto is not None:
            self._reached[index] = upto
        self._finished[index] = self._finished[index] or finished
        while self._open < len(self._finished) and self._finished[self._open]:
            self._open += 1
        return self._reached[min(self._open, len(self._reached) - 1)]


def _plan_groups(
    conn: Connection, request: RunRequest, report: RunReport
) -> list[tuple[store.Group, Schedule]]:
    """Plan every group of dispatchable duties once; record the refused ones as faults.

    A schedule serves every anchor of its frequency and zone, so it is
    planned far enough for the largest lead among all of them.
    """
    groups = store.dispatchable_groups(conn, request.scope)
    reach: dict[tuple[str | None, str], int] = {}
    for group in groups:
        memo = (group.frequency, group.timezone)
        reach[memo] = max(reach.get(memo, group.max_lead), group.max_lead)
    schedules: dict[tuple[str | None, str], Schedule | CadenceRefused] = {}
    for (frequency, zone), lead in reach.items():
        try:
            schedules[frequency, zone] = schedule_for(
                frequency, zone, request.now, request.window, lead_horizon=lead
            )
        except CadenceRefused as refused:
            schedules[frequency, zone] = refused
    ready = []
    for group in groups:
        outcome = schedules[group.frequency, group.timezone]
        if isinstance(outcome, Schedule):
            try:
                # The group's anchor, roll and calendar; zero offsets are valid
                # on every anchor, so only those three are judged here.
                check_due_rule(
                    Cadence(
                        group.frequency,
                        group.timezone,
                        group.due_anchor,
                        due_roll=group.due_roll,
                        holiday_calendar=group.holiday_calendar,
                    )
                )
            except CadenceRefused as refused:
                outcome = refused
        if isinstance(outcome, CadenceRefused):
            _record_faults(conn, request.scope, group, refused=outcome, report=report)
        else:
            if group.out_of_range:
                _record_range_faults(conn, request.scope, group, report=report)
            ready.append((group, outcome))
    return ready


def _count_undispatchable(conn: Connection, scope: Scope, report: RunReport) -> None:
    unknown_forms = 0
    for form, status, review, count in store.count_undispatchable(conn, scope):
        reason = classify(form, status, review)
        report.duties_read += count
        if reason == FaultReason.UNKNOWN_FORM:
            unknown_forms += count
            report.fault_counts[reason] += count
        elif reason is not None:
            report.skipped[reason] += count
    if unknown_forms:
        for duty_id, form in store.ids_with_form(conn, scope, FORMS, FAULT_LIST_LIMIT):
            report.faults.append(
                {
                    "duty_id": duty_id,
                    "reason": FaultReason.UNKNOWN_FORM,
                    "detail": unknown_form_detail(form),
                }
            )


def _record_faults(
    conn: Connection,
    scope: Scope,
    group: store.Group,
    *,
    refused: CadenceRefused,
    report: RunReport,
) -> None:
    report.duties_read += group.duties
    report.fault_counts[refused.reason] += group.duties
    room = FAULT_LIST_LIMIT - len(report.faults)
    if room > 0:
        for member in store.group_members(conn, scope, group, room, out_of_range=False):
            report.faults.append(
                {"duty_id": member.duty_id, "reason": refused.reason, "detail": refused.detail}
            )


def _record_range_faults(
    conn: Connection, scope: Scope, group: store.Group, *, report: RunReport
) -> None:
    """Count the group's duties whose offsets or grace the engine refuses; list some by id.

    The page statement sets them aside by the same ranges; each listed one
    carries the engine's own message for its values.
    """
    report.duties_read += group.out_of_range
    report.fault_counts[FaultReason.INVALID_CADENCE] += group.out_of_range
    room = FAULT_LIST_LIMIT - len(report.faults)
    if room <= 0:
        return
    for member in store.group_members(conn, scope, group, room, out_of_range=True):
        cadence = Cadence(
            group.frequency,
            group.timezone,
            member.due_anchor,
            member.due_offset_days,
            due_offset_months=member.due_offset_months,
            due_roll=member.due_roll,
            holiday_calendar=member.holiday_calendar,
            grace_days=member.grace_days,
        )
        try:
            check_due_rule(cadence)
        except CadenceRefused as refused:
            report.faults.append(
                {"duty_id": member.duty_id, "reason": refused.reason, "detail": refused.detail}
            )


def _dispatch_page(
    conn: Connection,
    statement: store.PageStatement,
    after: str | None,
    upto: str | None,
    size: int,
) -> tuple[store.PageResult, int]:
    """The page's result and how many times it was retried."""
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            # One statement in autocommit is one transaction: the page's inserts
            # and its advances commit together, with no BEGIN/COMMIT round trips.
            return store.dispatch_page(conn, statement, after, upto, size), attempt - 1
        except _RETRYABLE:
            if attempt == _ATTEMPTS:
                raise
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _count_page(report: RunReport, result: store.PageResult, retries: int) -> None:
    report.retries += retries
    if result.rows:
        report.pages += 1
    report.duties_read += result.duties
    report.skipped[SkipReason.OUTSIDE_EFFECTIVE_WINDOW] += result.outside_window
    report.skipped[SkipReason.NOTHING_DUE] += result.nothing_due
    report.tasks_created += result.created
    report.tasks_existing += result.owed - result.created
    report.duties_advanced += result.advanced


def _iso(day: date | None) -> str | None:
    return None if day is None else day.isoformat()
