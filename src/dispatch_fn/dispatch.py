"""One run of the dispatcher against the database: pages, plans, writes, report.

The imperative shell around ``plan``: it asks the planner once per frequency
and zone in use, then lets one statement per keyset page of duties insert what
is owed. Each page is its own short transaction, so a run killed at any
instant leaves only whole pages behind and the next run completes the rest.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
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
    CadenceRefused,
    Schedule,
    Window,
    check_due_anchor,
    classify,
    schedule_for,
    unknown_form_detail,
)
from dispatch_fn.store import Connection, Scope

# Duties per page. Each page statement carries a fixed cost (planning,
# unpacking the schedule arrays, one round trip) of a few milliseconds; at
# 10,000 duties it is spread over ~19,000 owed rows, whose insert sort still
# fits the default 4 MB work_mem (3.4 MB measured with 20-35 character names).
DEFAULT_CHUNK_SIZE: Final = 10_000
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
) -> RunReport:
    """Dispatch (or, dry, count) every task ``request`` owes; return what happened.

    ``conn`` must be in autocommit mode: each page is one statement, so its
    own transaction.
    ``should_stop`` is asked before each page; when it says yes the run ends
    early with ``complete`` False, and the next run picks up the rest.
    """
    if not conn.autocommit:
        # Otherwise every page would join one long transaction, and a run
        # killed near its end would lose all of them.
        raise ValueError("dispatch.run needs an autocommit connection; each page commits alone")
    report = RunReport(request)
    try:
        _run_pages(conn, request, report, chunk_size, should_stop)
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
    conn: Connection,
    request: RunRequest,
    report: RunReport,
    chunk_size: int,
    should_stop: Callable[[], bool],
) -> None:
    _count_undispatchable(conn, request.scope, report)
    ready = _plan_groups(conn, request, report)
    if not ready:
        return
    statement = store.page_statement(request.scope, ready, dry_run=request.dry_run)
    after: str | None = None
    while True:
        if should_stop():
            report.complete = False
            break
        result = _dispatch_page(conn, statement, after, chunk_size, report=report)
        if result.upto is None:
            break
        report.pages += 1
        report.last_duty_id = after = result.upto


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
                check_due_anchor(group.due_anchor)
            except CadenceRefused as refused:
                outcome = refused
        if isinstance(outcome, CadenceRefused):
            _record_faults(conn, request.scope, group, refused=outcome, report=report)
        else:
            ready.append((group, outcome))
    return ready


def _count_undispatchable(conn: Connection, scope: Scope, report: RunReport) -> None:
    unknown_forms = 0
    for form, status, count in store.count_by_form_and_status(conn, scope):
        reason = classify(form, status)
        report.duties_read += count
        if reason == "unknown_form":
            unknown_forms += count
            report.fault_counts[reason] += count
        elif reason is not None:
            report.skipped[reason] += count
    if unknown_forms:
        for duty_id, form in store.ids_with_form(conn, scope, FORMS, FAULT_LIST_LIMIT):
            report.faults.append(
                {"duty_id": duty_id, "reason": "unknown_form", "detail": unknown_form_detail(form)}
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
        for duty_id in store.ids_in_group(conn, scope, group, room):
            report.faults.append(
                {"duty_id": duty_id, "reason": refused.reason, "detail": refused.detail}
            )


def _dispatch_page(
    conn: Connection,
    statement: store.PageStatement,
    after: str | None,
    size: int,
    *,
    report: RunReport,
) -> store.PageResult:
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            # One statement in autocommit is one transaction: the page's inserts
            # and its advances commit together, with no BEGIN/COMMIT round trips.
            result = store.dispatch_page(conn, statement, after, size)
            break
        except _RETRYABLE:
            if attempt == _ATTEMPTS:
                raise
            report.retries += 1
            time.sleep(0.05 * attempt)
    report.duties_read += result.duties
    report.skipped["outside_effective_window"] += result.outside_window
    report.skipped["nothing_due"] += result.nothing_due
    report.tasks_created += result.created
    report.tasks_existing += result.owed - result.created
    report.duties_advanced += result.advanced
    return result


def _iso(day: date | None) -> str | None:
    return None if day is None else day.isoformat()
