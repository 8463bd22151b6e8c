"""One step of a run on one connection: the driver of ``settling.settle``.

A worker thread calls ``execute`` and hands its ``Outcome`` back; nothing here
knows about other connections or the report. ``settling`` decides what a step
runs and what each answer means; this module runs each command on the
connection, with the run's deadline, and maps what psycopg raises (its
SQLSTATE) to the typed replies ``settling`` expects. It is the only place of
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
from dispatch_fn.db import store
from dispatch_fn.db.sql import Connection
from dispatch_fn.db.store import PageStatement, Scope
from dispatch_fn.planning.calendar_edge import Edge
from dispatch_fn.run import settling
from dispatch_fn.run.runtime import Deadline, PageWriter
from dispatch_fn.run.settling import (
    MAX_SET_ASIDE_PER_PAGE,
    Failure,
    Job,
    Outcome,
    SetAside,
    SetAsideReason,
)

__all__ = [
    "MAX_SET_ASIDE_PER_PAGE",
    "MAX_TIMEOUTS_PER_RUN",
    "Failure",
    "Job",
    "Outcome",
    "SetAside",
    "SetAsideReason",
    "TimeoutAllowance",
    "Walk",
    "execute",
]

_RETRYABLE: Final = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
# SQLSTATE classes of errors one row's values can cause: 22 data exception
# (a value out of range, a bad encoding), 23 integrity constraint violation (a
# CHECK or foreign key the row breaks, e.g. its duty deleted meanwhile), 54
# program limit exceeded (an index entry too large). Splitting the page finds
# the row; errors of any other class are the statement's or the server's.
_ROW_CAUSED_CLASSES: Final = ("22", "23", "54")
# A statement the server cancelled (57014) under the session's own
# statement_timeout ran too long for its rows: split like a row-caused error.
# Under a timeout lowered to the run's deadline, the run has run out of time.
_TIMED_OUT: Final = pg_errors.QueryCanceled
# The default allowance of timeouts a run may split (settings.py says why).
MAX_TIMEOUTS_PER_RUN: Final = settings.MAX_TIMEOUTS_PER_RUN


class TimeoutAllowance:
    """How many statement timeouts the steps of one run may still split; shared by its threads."""

    def __init__(self, allowed: int = MAX_TIMEOUTS_PER_RUN) -> None:
        self._left = allowed
        self._lock = threading.Lock()

    def spend(self) -> bool:
        """Take one timeout from the allowance; False once none is left."""
        with self._lock:
            self._left -= 1
            return self._left >= 0


@dataclass(frozen=True, slots=True)
class Walk:
    """What every step of one run shares: the statements, their scope and the page bounds.

    ``extras`` (catch-up, and what set-aside duties are owed again: those
    also in ``repaying``) run after ``statement`` on exactly the duties it
    covered. A page holds at most ``size`` duties and, past its first duty,
    at most ``rows`` candidate rows (None: no bound); ``deadline`` (None: none)
    cancels a statement that would run past the run's end.
    """

    statement: PageStatement
    scope: Scope
    size: int
    extras: tuple[PageStatement, ...] = ()
    repaying: tuple[PageStatement, ...] = ()
    # Groups near the calendar's edge: the planner judges their duties first.
    edge: Edge | None = None
    rows: int | None = None
    deadline: Deadline | None = None
    timeouts: TimeoutAllowance = field(default_factory=TimeoutAllowance)
    # What writes each page (Runtime.dispatch_page).
    dispatch_page: PageWriter = store.dispatch_page

    def plan(self) -> settling.Walk:
        """What ``settling`` needs of the walk: the bounds, and which statements follow a page."""
        extras = tuple(
            settling.Target(n, repaying=any(extra is each for each in self.repaying))
            for n, extra in enumerate(self.extras)
        )
        return settling.Walk(self.size, self.rows, extras, self.edge)

    def statement_of(self, target: settling.Target) -> PageStatement:
        """The statement ``target`` names."""
        return self.statement if target.extra is None else self.extras[target.extra]


def execute(conn: Connection, walk: Walk, job: Job) -> Outcome:
    """Dispatch the page ``job`` names on ``conn``; never raises a database error."""
    steps = settling.settle(walk.plan(), job)
    try:
        command = next(steps)
        while True:
            command = steps.send(_perform(conn, walk, command))
    except StopIteration as done:
        outcome: Outcome = done.value
        return outcome


def _perform(conn: Connection, walk: Walk, command: settling.Command) -> settling.Reply:
    """Run one command of a step on ``conn``; what the server said, as a typed reply."""
    match command:
        case settling.Dispatch():
            return _dispatch(conn, walk, command)
        case settling.ListIds(target, after, upto, size, rows, excluded):
            statement = walk.statement_of(target)
            return _listing(conn, lambda: settling.Ids(tuple(store.page_taken_ids(
                conn, statement, after, upto, size, page_rows=rows, excluded=excluded,
            ))))  # fmt: skip
        case settling.ReadDuties(after, upto, size):
            return _listing(conn, lambda: settling.Duties(tuple(
                store.page_duty_rows(conn, walk.scope, after, upto, size=size)
            )))  # fmt: skip
        case settling.FindLocked(ids):
            return _listing(conn, lambda: settling.Ids(tuple(store.locked_ids(conn, ids))))
        case settling.SpendTimeout():
            return settling.Allowance(walk.timeouts.spend())
        case settling.Wait(seconds):
            time.sleep(seconds)
            return None


def _dispatch(conn: Connection, walk: Walk, command: settling.Dispatch) -> settling.Reply:
    """Run the statement, cancelled by the server if it would outlast the run's deadline.

    Far from the deadline (no lowered limit) the page runs as one autocommit
    statement under the session's statement_timeout.
    """
    limit = None if walk.deadline is None else walk.deadline.limit_ms()
    if limit is not None and limit <= 0:
        return settling.DeadlineReached(None)
    try:
        page = walk.dispatch_page(
            conn, walk.statement_of(command.target), command.after, command.upto, command.size,
            page_rows=command.rows, excluded=command.excluded, time_limit_ms=limit,
            probe=command.probe,
        )  # fmt: skip
    except _TIMED_OUT as exc:
        # A lowered limit is below statement_timeout (Deadline.limit_ms): it
        # was the deadline that cancelled the statement.
        return settling.TimedOut(exc) if limit is None else settling.DeadlineReached(exc)
    except psycopg.Error as exc:
        return _failure(conn, exc)
    return settling.Committed(page)


def _failure(conn: Connection, exc: psycopg.Error) -> settling.Reply:
    """What an error of a dispatch statement means for the step."""
    if isinstance(exc, pg_errors.LockNotAvailable):
        return settling.Locked(exc)
    # Two runs that touch the same duties can still meet in a deadlock (the
    # UPDATE's row order is the executor's) or, under stricter isolation, a
    # serialization failure; the statement is simply tried again.
    if isinstance(exc, _RETRYABLE):
        return settling.Conflict(exc)
    if (exc.sqlstate or "")[:2] in _ROW_CAUSED_CLASSES:
        return settling.Refused(exc, _describe(exc))
    return _lost_or_failed(conn, exc)


def _listing(conn: Connection, read: Callable[[], settling.Reply]) -> settling.Reply:
    try:
        return read()
    except psycopg.Error as exc:
        return _lost_or_failed(conn, exc)


def _lost_or_failed(conn: Connection, exc: psycopg.Error) -> settling.Lost | settling.Failed:
    return settling.Lost(exc) if conn.broken or conn.closed else settling.Failed(exc)


def _describe(exc: psycopg.Error) -> str:
    # The server's first line names the problem (e.g. the index and the row
    # size); the detail that follows quotes values, which stay out of reports.
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return (
        f"the dispatch statement fails on this duty alone: {type(exc).__name__} "
        f"(SQLSTATE {exc.sqlstate}): {first_line[:200]}"
    )
