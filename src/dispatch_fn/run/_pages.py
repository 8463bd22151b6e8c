"""One step of a run on one connection: the driver of ``_settling.settle``.

A worker thread calls ``take_step`` and hands its ``Outcome`` back; nothing here
knows about other connections or the report. ``_settling`` decides what a step
runs and what each answer means; this module runs each command on the
connection, with the run's deadline, and maps what psycopg raises (its
SQLSTATE) to the typed replies ``_settling`` expects. It is the only place of
the run loop that knows the server's errors.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import psycopg
from psycopg import errors as pg_errors

from dispatch_fn import settings
from dispatch_fn.db import (
    Connection,
    LockedRows,
    PageStatement,
    dispatch_page,
    locked_rows,
    page_duty_rows,
    page_taken_ids,
)
from dispatch_fn.planning import Edge, Scope
from dispatch_fn.run import _settling
from dispatch_fn.run._settling import Job, Outcome
from dispatch_fn.run.runtime import Deadline, PageWriter

_RETRYABLE: Final = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
# The task's foreign key to its duty (migration 0011, the partitioned layout)
# names the very duty row the statement read, so it fails only where that
# row's key changed under the statement: the duty moved to another
# organisation while the insert waited on it. Like a deadlock, that is the
# moment's, not the row's: run again, the statement reads the row as it now
# is. Should it persist, it is split out as any row's error.
_DUTY_FOREIGN_KEY: Final = "duly_task_duty"
# SQLSTATE classes of errors one row's values can cause: 22 data exception
# (a value out of range, a bad encoding), 23 integrity constraint violation (a
# CHECK or another foreign key the row breaks), 54 program limit exceeded (an
# index entry too large). Splitting the page finds the row; errors of any
# other class are the statement's or the server's.
_ROW_CAUSED_CLASSES: Final = ("22", "23", "54")
# A statement the server cancelled (57014) under the session's own
# statement_timeout ran too long for its rows: split like a row-caused error.
# Under a timeout lowered to the run's deadline, the run has run out of time.
_TIMED_OUT: Final = pg_errors.QueryCanceled


class TimeoutAllowance:
    """How many statement timeouts the steps of one run may still split; shared by its threads."""

    def __init__(self, allowed: int = settings.MAX_TIMEOUTS_PER_RUN) -> None:
        self._left = allowed
        self._lock = threading.Lock()

    def spend(self) -> bool:
        """Take one timeout from the allowance; False once none is left."""
        with self._lock:
            self._left -= 1
            return self._left >= 0


@dataclass(frozen=True, slots=True)
class Pages:
    """What every step of one run shares: the page statement, its scope and the page bounds.

    A page holds at most ``size`` duties and, past its first duty,
    at most ``rows`` candidate rows (None: no bound); ``deadline`` (None: none)
    cancels a statement that would run past the run's end.
    """

    statement: PageStatement
    scope: Scope
    size: int
    # Groups near the calendar's edge: the planner judges their duties first.
    edge: Edge | None = None
    # (organization_id, id) of the duties the run counted as faults before its
    # pages: a page leaves them unjudged, as it does a duty edited since.
    faulted: frozenset[tuple[str, str]] = frozenset()
    rows: int | None = None
    deadline: Deadline | None = None
    timeouts: TimeoutAllowance = field(default_factory=TimeoutAllowance)
    # What writes each page (Runtime.dispatch_page).
    dispatch_page: PageWriter = dispatch_page

    def plan(self) -> _settling.PageShape:
        """What ``_settling`` needs of the walk: the bounds, and the planner at the edge."""
        return _settling.PageShape(self.size, self.rows, self.edge, self.faulted)


def take_step(conn: Connection, walk: Pages, job: Job) -> Outcome:
    """Dispatch the page ``job`` names on ``conn``; never raises a database error."""
    steps = _settling.settle(walk.plan(), job)
    try:
        command = next(steps)
        while True:
            command = steps.send(_perform(conn, walk, command))
    except StopIteration as done:
        outcome: Outcome = done.value
        return outcome


def _perform(conn: Connection, walk: Pages, command: _settling.Command) -> _settling.Reply:
    """Run one command of a step on ``conn``; what the server said, as a typed reply."""
    match command:
        case _settling.Dispatch():
            return _run_statement(conn, walk, command)
        case _settling.ListIds(after, upto, size, rows, excluded, excluded_keys):
            return _listing(conn, lambda: _settling.Ids(tuple(page_taken_ids(
                conn, walk.statement, after, upto, size, page_rows=rows, excluded=excluded,
                excluded_keys=excluded_keys,
            ))))  # fmt: skip
        case _settling.ReadDuties(after, upto, size, excluded):
            return _listing(conn, lambda: _settling.Duties(tuple(
                page_duty_rows(conn, walk.scope, after, upto, size=size, excluded=excluded)
            )))  # fmt: skip
        case _settling.FindLocked(ids):
            return _listing(conn, lambda: _locks(locked_rows(conn, ids, walk.scope)))
        case _settling.SpendTimeout():
            return _settling.Allowance(walk.timeouts.spend())
        case _settling.Wait(seconds):
            time.sleep(seconds)
            return None


def _run_statement(conn: Connection, walk: Pages, command: _settling.Dispatch) -> _settling.Reply:
    """Run the statement, cancelled by the server if it would outlast the run's deadline.

    Far from the deadline (no lowered limit) the page runs as one autocommit
    statement under the session's statement_timeout.
    """
    limit = None if walk.deadline is None else walk.deadline.limit_ms()
    if limit is not None and limit <= 0:
        return _settling.DeadlineReached(None)
    try:
        page = walk.dispatch_page(
            conn, walk.statement, command.after, command.upto, command.size,
            page_rows=command.rows, excluded=command.excluded,
            excluded_keys=command.excluded_keys, time_limit_ms=limit,
            probe=command.probe,
        )  # fmt: skip
    except _TIMED_OUT as exc:
        # A lowered limit is below statement_timeout (Deadline.limit_ms): it
        # was the deadline that cancelled the statement.
        return _settling.TimedOut(exc) if limit is None else _settling.DeadlineReached(exc)
    except psycopg.Error as exc:
        return _failure(conn, exc)
    return _settling.Committed(page)


def _failure(conn: Connection, exc: psycopg.Error) -> _settling.Reply:
    """What an error of a dispatch statement means for the step."""
    if isinstance(exc, pg_errors.LockNotAvailable):
        return _settling.Locked(exc)
    # Two runs that touch the same duties can still meet in a deadlock (the
    # UPDATE's row order is the executor's) or, under stricter isolation, a
    # serialization failure; the statement is simply tried again.
    if isinstance(exc, _RETRYABLE):
        return _settling.Conflict(exc)
    if (
        isinstance(exc, pg_errors.ForeignKeyViolation)
        and exc.diag.constraint_name == _DUTY_FOREIGN_KEY
    ):
        return _settling.Conflict(exc, persisting=_settling.Refused(exc, _describe(exc)))
    if (exc.sqlstate or "")[:2] in _ROW_CAUSED_CLASSES:
        return _settling.Refused(exc, _describe(exc))
    return _lost_or_failed(conn, exc)


def _locks(found: LockedRows) -> _settling.Locks:
    return _settling.Locks(found.keys, found.shared)


def _listing(conn: Connection, read: Callable[[], _settling.Reply]) -> _settling.Reply:
    try:
        return read()
    except psycopg.Error as exc:
        return _lost_or_failed(conn, exc)


def _lost_or_failed(conn: Connection, exc: psycopg.Error) -> _settling.Lost | _settling.Failed:
    return _settling.Lost(exc) if conn.broken or conn.closed else _settling.Failed(exc)


def _describe(exc: psycopg.Error) -> str:
    # The server's first line names the problem (e.g. the index and the row
    # size); the detail that follows quotes values, which stay out of reports.
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return (
        f"the dispatch statement fails on this duty alone: {type(exc).__name__} "
        f"(SQLSTATE {exc.sqlstate}): {first_line[:200]}"
    )
