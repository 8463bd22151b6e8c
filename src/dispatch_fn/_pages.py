"""One step of a run on one connection: a page, or the duties that make a page fail.

A worker thread calls ``execute`` and hands its ``Outcome`` back; nothing here
knows about other connections, the deadline or the report. When the server
refuses a page for one row's content, or a duty's row is locked elsewhere, the
page is split until the duties to blame are found alone; they are set aside and
the rest of the page is dispatched (docs/adr/0003-failing-pages.md). A page is
bounded in rows by ``Walk.rows``; one that still runs past statement_timeout is
split the same way, up to ``Walk.timeouts`` per run, and one the run's deadline
cancels ends the step (docs/adr/0009-bounded-pages.md). What a step committed
is never run again by the same step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

import psycopg
from psycopg import errors as pg_errors

from dispatch_fn import store
from dispatch_fn._edge import Edge
from dispatch_fn._sql import Connection
from dispatch_fn.store import PageResult, PageStatement, Scope

# Two runs that touch the same duties can still meet in a deadlock (the
# UPDATE's row order is the executor's) or, under stricter isolation, a
# serialization failure; the page's statement is simply tried again.
_RETRYABLE: Final = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
_ATTEMPTS: Final = 5
# SQLSTATE classes of errors one row's values can cause: 22 data exception
# (a value out of range, a bad encoding), 23 integrity constraint violation (a
# CHECK or foreign key the row breaks, e.g. its duty deleted meanwhile), 54
# program limit exceeded (an index entry too large). Splitting the page finds
# the row; errors of any other class are the statement's or the server's.
_ROW_CAUSED_CLASSES: Final = ("22", "23", "54")
# Past this many duties set aside in one page the error is not one row's: the
# page fails instead of being taken apart one statement per duty.
MAX_SET_ASIDE_PER_PAGE: Final = 32
# A statement the server cancelled (57014) under the session's own
# statement_timeout ran too long for its rows: split like a row-caused error.
# Under a timeout lowered to the run's deadline, the run has run out of time.
_TIMED_OUT: Final = pg_errors.QueryCanceled
# Each timeout costs a whole statement_timeout (300 s by default): past this
# many in one run, the run stops splitting and ends incomplete instead.
MAX_TIMEOUTS_PER_RUN: Final = 4


class Failure(StrEnum):
    """Why a step ended without finishing its page."""

    LOCKED = "locked"  # lock_timeout on its first try: the run tries it again later
    LOST = "lost"  # the connection died: the page is done again on another one
    DEADLINE = "deadline"  # the run's deadline cancelled it: the run stops, incomplete
    TIMEOUTS = "timeouts"  # one timeout past the run's allowance: the run stops, incomplete
    ERROR = "error"  # anything else: the run fails


class SetAsideReason(StrEnum):
    """Why a duty was left out of the page it belongs to."""

    LOCKED = "locked"  # another transaction held its row past lock_timeout
    REFUSED = "refused"  # the statement fails on this duty alone
    TIMED_OUT = "timed_out"  # the statement runs past statement_timeout on this duty alone


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a run must end, as its page statements see it.

    ``time_left_ms`` is what remains before the run must stop (its reserve for
    the report already taken off); ``statement_timeout_ms`` is the sessions'
    own statement_timeout. A statement starts with the smaller of the two.
    """

    time_left_ms: Callable[[], float]
    statement_timeout_ms: int

    def limit_ms(self) -> int | None:
        """What the next statement may take, when the deadline comes before the timeout."""
        left = self.time_left_ms()
        return int(left) if left < self.statement_timeout_ms else None


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


class _TimeoutsSpentError(Exception):
    """A statement timed out after the run had spent its allowance of timeouts."""

    def __init__(self, error: psycopg.Error) -> None:
        super().__init__("the run's statements timed out more often than it may split them")
        self.error = error


class _DeadlineReachedError(Exception):
    """A statement of the step was cancelled by the run's deadline, or would start past it."""

    def __init__(self, error: psycopg.Error | None) -> None:
        super().__init__("the run's deadline came before the page's statement ended")
        self.error = error


@dataclass(frozen=True, slots=True)
class Job:
    """The next page of range ``range_no``: the first duties after ``after``, up to ``upto``."""

    range_no: int
    after: str | None
    upto: str | None
    deferred: int = 0  # times put back after a lock timeout
    lost: int = 0  # times a connection died under it


@dataclass(frozen=True, slots=True)
class SetAside:
    """A duty left out of its page, and the server's words for why."""

    duty_id: str
    reason: SetAsideReason
    detail: str
    # Its duty was counted already by a page the step committed (a catch-up
    # statement refused it after its page at the run's clock was stored).
    counted: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one step did: every statement it committed, and where its range stands.

    ``reached`` is the last id the step covered (None if it covered none);
    ``more`` says the range may hold duties after it. On a ``failure`` the
    committed pages still count, and ``error`` is what the server said.
    """

    job: Job
    pages: tuple[PageResult, ...] = ()
    retries: int = 0
    set_aside: tuple[SetAside, ...] = ()
    reached: str | None = None
    more: bool = False
    failure: Failure | None = None
    error: psycopg.Error | None = None
    caught: tuple[PageResult, ...] = ()  # the catch-up statements' results (SPEC §9)
    repaid: tuple[PageResult, ...] = ()  # those owed again to set-aside duties (SPEC §9)


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


@dataclass(slots=True)
class _Step:
    # What one call of ``execute`` has committed so far; local to that call.
    pages: list[PageResult] = field(default_factory=list)
    retries: int = 0
    set_aside: list[SetAside] = field(default_factory=list)
    caught: list[PageResult] = field(default_factory=list)
    repaid: list[PageResult] = field(default_factory=list)
    isolated: int = 0  # duties set aside because a statement failed on them alone
    # Near the calendar's edge: the ids the planner judged for this step, and
    # the last id a committed page of them reached (the step's own cursor).
    judged: list[str] | None = None
    cursor: str | None = None
    # Whether ``settled`` was set: the last id up to which every duty of the
    # step is dispatched or set aside, in id order (halves settle in order).
    settled: tuple[str | None] | None = None

    def excluded(self) -> list[str]:
        return [each.duty_id for each in self.set_aside]

    def outcome(
        self,
        job: Job,
        *,
        reached: str | None = None,
        more: bool = False,
        failure: Failure | None = None,
        error: psycopg.Error | None = None,
    ) -> Outcome:
        pages, set_aside = tuple(self.pages), tuple(self.set_aside)
        return Outcome(
            job, pages, self.retries, set_aside, reached, more, failure, error,
            tuple(self.caught), tuple(self.repaid),
        )  # fmt: skip


def execute(conn: Connection, walk: Walk, job: Job) -> Outcome:
    """Dispatch the page ``job`` names on ``conn``; never raises a database error."""
    step = _Step()
    failed: psycopg.Error | None
    try:
        try:
            reached, more = _take(conn, walk, job, step)
        except pg_errors.LockNotAvailable as exc:
            # Tried again later, unless the step committed pages already: a
            # step done again would do them again.
            if job.deferred == 0 and not step.pages:
                return step.outcome(job, failure=Failure.LOCKED, error=exc)
            # Once deferred, its locked duties are left out and the rest tried.
            failed = None if job.deferred else exc
        except psycopg.Error as exc:
            if not _splittable(exc):
                raise
            _spend(walk, exc)
            failed = exc
        else:
            return step.outcome(job, reached=reached, more=more)
        return _taken_apart(conn, walk, job, step, failed)
    except _DeadlineReachedError as stopped:
        # Where the step began: its cancelled statement committed nothing.
        return step.outcome(job, reached=job.after, failure=Failure.DEADLINE, error=stopped.error)
    except _TimeoutsSpentError as spent:
        return _spent(job, step, spent.error)
    except psycopg.Error as exc:
        failure = Failure.LOST if conn.broken or conn.closed else Failure.ERROR
        return step.outcome(job, failure=failure, error=exc)


def _take(conn: Connection, walk: Walk, job: Job, step: _Step) -> tuple[str | None, bool]:
    """The page as first tried: how far it reached, and whether its range goes on."""
    if walk.edge is None:
        result = _page(conn, walk, job.after, job.upto, step)
        return result.upto, _more(walk, job, result)
    ids = _judge_edge(conn, walk, walk.edge, job, step)
    if not ids:
        return job.after, False
    step.judged, step.cursor = ids, job.after
    _through(conn, walk, ids[-1], step)
    return ids[-1], _judged_more(walk, job, ids)


def _judged_more(walk: Walk, job: Job, ids: list[str]) -> bool:
    return len(ids) >= walk.size and not _ends_range(job, ids[-1])


def _taken_apart(
    conn: Connection, walk: Walk, job: Job, step: _Step, failed: psycopg.Error | None
) -> Outcome:
    """The page failed on content, ran out of time or, once more, met a lock: find the duties.

    ``failed`` is the error of the page just tried, when its ids are those
    settled (None: try them again first, the locked ones left out).
    """
    if step.judged is not None:
        # Only the judged duties no committed page reached: the pages behind
        # the step's cursor are stored, the planner's judgement is made.
        judged = step.judged
        rest = _following(conn, walk.statement, judged, step.cursor, step)
        _settle_ids(conn, walk, job, (step.cursor, rest), step, failed=failed)
        return step.outcome(job, reached=judged[-1], more=_judged_more(walk, job, judged))
    # The very duties the page took, cut by the same row budget.
    ids = store.page_taken_ids(
        conn, walk.statement, job.after, job.upto, walk.size, page_rows=walk.rows
    )
    if not ids:
        return step.outcome(job, reached=job.after)
    _settle_ids(conn, walk, job, (job.after, ids), step, failed=failed)
    # The row budget may have cut the page short of its size: the range goes
    # on unless it ended here (an empty page after it says so).
    return step.outcome(job, reached=ids[-1], more=not _ends_range(job, ids[-1]))


def _settle_ids(
    conn: Connection,
    walk: Walk,
    job: Job,
    page: tuple[str | None, list[str]],
    step: _Step,
    *,
    failed: psycopg.Error | None,
) -> None:
    after, ids = page
    # Once locked already, the locked duties are set aside without a try.
    if job.deferred and ids:
        for duty_id in store.locked_ids(conn, ids):
            step.set_aside.append(SetAside(duty_id, SetAsideReason.LOCKED, _LOCKED_DETAIL))
    aside = set(step.excluded())
    _settle(conn, walk, after, [i for i in ids if i not in aside], step, failed=failed)


_LOCKED_DETAIL: Final = "its row was locked by another transaction; the next run dispatches it"
_TIMED_OUT_DETAIL: Final = (
    "the dispatch statement runs past statement_timeout on this duty alone;"
    " the next run tries it again"
)


def _spent(job: Job, step: _Step, error: psycopg.Error) -> Outcome:
    """The step that met one timeout too many: how far it settled, the rest for the next run."""
    reached = job.after if step.settled is None else step.settled[0]
    if step.judged is not None and reached is not None and reached in step.judged:
        # Duties the planner refused past that point are judged again then.
        beyond = set(step.judged[step.judged.index(reached) + 1 :])
        step.set_aside = [each for each in step.set_aside if each.duty_id not in beyond]
    return step.outcome(job, reached=reached, more=True, failure=Failure.TIMEOUTS, error=error)


def _judge_edge(conn: Connection, walk: Walk, edge: Edge, job: Job, step: _Step) -> list[str]:
    """The page's ids; those the planner refuses at the calendar's edge are set aside."""
    duties = store.page_duty_rows(conn, walk.scope, job.after, job.upto, size=walk.size)
    step.set_aside.extend(
        SetAside(duty_id, SetAsideReason.REFUSED, detail)
        for duty_id, detail in edge.refused(duties)
    )
    return [str(duty["id"]) for duty in duties]


def _more(walk: Walk, job: Job, result: PageResult) -> bool:
    # A page short of its size (not for its row budget), or one that reached
    # its range's bound, ends the range.
    return (result.rows >= walk.size or result.cut) and not _ends_range(job, result.upto)


def _ends_range(job: Job, reached: str | None) -> bool:
    return job.upto is not None and reached == job.upto


def _through(conn: Connection, walk: Walk, last: str, step: _Step) -> None:
    """Dispatch the duties after the step's cursor up to ``last``, in as many pages as needed.

    Bounded by the judged ids, so the duties set aside do not pull unjudged
    ones into the page; the cursor moves with every page committed.
    """
    while True:
        result = _page(conn, walk, step.cursor, last, step)
        if result.upto is None or result.upto == last:
            return
        step.cursor = result.upto
        step.settled = (result.upto,)


def _following(
    conn: Connection, statement: PageStatement, ids: list[str], point: str | None, step: _Step
) -> list[str]:
    """Those of ``ids`` (in the server's order) that sort after ``point``."""
    if point is None or not ids:
        return ids
    if point in ids:
        return ids[ids.index(point) + 1 :]
    # A duty made dispatchable since ``ids`` were read ended a page: only the
    # server knows how its collation orders it among them. The last id
    # bounded the page that ended at ``point``, so it follows it.
    later = set(
        store.page_taken_ids(conn, statement, point, ids[-1], len(ids), excluded=step.excluded())
    )
    return [i for i in ids[:-1] if i in later] + ids[-1:]


def _settle(
    conn: Connection,
    walk: Walk,
    after: str | None,
    ids: list[str],
    step: _Step,
    *,
    extra: PageStatement | None = None,
    failed: psycopg.Error | None = None,
) -> None:
    """Dispatch ``ids``, the range's next duties after ``after``; set aside any that fail alone.

    ``extra`` (None: the page with its catch-up) is the one catch-up statement
    to settle, its page at the run's clock committed already; ``failed`` is
    what the statement over all of ``ids`` just raised, so it is not run
    again (a timeout would cost a whole statement_timeout). Halving keeps
    the cost of one bad duty in a page of n at about 2 log2(n) statements,
    every good half committed as it goes.
    """
    if failed is not None and ids:
        _split(conn, walk, (after, ids), step, extra=extra, exc=failed)
        return
    while ids:
        try:
            if extra is None:
                result = _page(conn, walk, after, ids[-1], step)
            else:
                result = _caught(conn, walk, extra, (after, ids[-1]), step)
        except psycopg.Error as exc:
            if not (isinstance(exc, pg_errors.LockNotAvailable) or _splittable(exc)):
                raise
            _spend(walk, exc)
            _split(conn, walk, (after, ids), step, extra=extra, exc=exc)
            return
        # Only the page itself settles duties: while a catch-up statement is
        # being settled, the statements after it have not run on this page,
        # so a stop here must not count its duties as done.
        if result.upto is None or result.upto == ids[-1]:
            if extra is None:
                step.settled = (ids[-1],)
            return
        if extra is None:
            step.settled = (result.upto,)
        # The row budget ended the statement before ids[-1]: the rest follows.
        ids = _following(conn, extra or walk.statement, ids, result.upto, step)
        after = result.upto


def _split(
    conn: Connection,
    walk: Walk,
    page: tuple[str | None, list[str]],
    step: _Step,
    *,
    extra: PageStatement | None,
    exc: psycopg.Error,
) -> None:
    """The statement over the page's ids failed with ``exc``: settle each half, or set it aside."""
    after, ids = page
    if len(ids) > 1:
        half = len(ids) // 2
        _settle(conn, walk, after, ids[:half], step, extra=extra)
        _settle(conn, walk, ids[half - 1], ids[half:], step, extra=extra)
        return
    if step.isolated >= MAX_SET_ASIDE_PER_PAGE:
        raise exc
    step.isolated += 1
    step.set_aside.append(_alone(ids[0], exc, counted=extra is not None))
    if extra is None:
        step.settled = (ids[0],)


def _alone(duty_id: str, exc: psycopg.Error, *, counted: bool) -> SetAside:
    """A duty the statement failed on alone, and why."""
    if isinstance(exc, pg_errors.LockNotAvailable):
        return SetAside(duty_id, SetAsideReason.LOCKED, _LOCKED_DETAIL, counted)
    if isinstance(exc, _TIMED_OUT):
        # Its values are fine, its page was slow: not a fault, tried again next run.
        return SetAside(duty_id, SetAsideReason.TIMED_OUT, _TIMED_OUT_DETAIL, counted)
    return SetAside(duty_id, SetAsideReason.REFUSED, _describe(exc), counted)


def _spend(walk: Walk, exc: psycopg.Error) -> None:
    # Splitting a page that timed out costs timeouts again: a run spends few.
    if isinstance(exc, _TIMED_OUT) and not walk.timeouts.spend():
        raise _TimeoutsSpentError(exc) from exc


def _page(
    conn: Connection, walk: Walk, after: str | None, upto: str | None, step: _Step
) -> PageResult:
    result = _statement(conn, walk.statement, walk, (after, upto), step, rows=walk.rows)
    step.pages.append(result)
    if result.upto is not None:
        # The same duties again, at each missed clock: bounded by the page's
        # last id (and by nothing else), so exactly the duties the page covered.
        for extra in walk.extras:
            _catch_up(conn, walk, extra, (after, result.upto), step)
    return result


def _catch_up(
    conn: Connection,
    walk: Walk,
    extra: PageStatement,
    bounds: tuple[str | None, str | None],
    step: _Step,
) -> None:
    """Run one catch-up statement over a committed page; settle it alone if it fails."""
    try:
        _caught(conn, walk, extra, bounds, step)
    except psycopg.Error as exc:
        if not (isinstance(exc, pg_errors.LockNotAvailable) or _splittable(exc)):
            raise
        _spend(walk, exc)
        # The page at the run's clock is stored: only this statement is split.
        after, upto = bounds
        ids = store.page_taken_ids(conn, extra, after, upto, walk.size, excluded=step.excluded())
        _settle(conn, walk, after, ids, step, extra=extra, failed=exc)


def _caught(
    conn: Connection,
    walk: Walk,
    extra: PageStatement,
    bounds: tuple[str | None, str | None],
    step: _Step,
) -> PageResult:
    result = _statement(conn, extra, walk, bounds, step, rows=None)
    repaying = any(extra is each for each in walk.repaying)
    (step.repaid if repaying else step.caught).append(result)
    return result


def _statement(
    conn: Connection,
    statement: PageStatement,
    walk: Walk,
    bounds: tuple[str | None, str | None],
    step: _Step,
    *,
    rows: int | None,
) -> PageResult:
    after, upto = bounds
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            return _within_deadline(
                walk.deadline,
                lambda limit: store.dispatch_page(
                    conn, statement, after, upto, walk.size, page_rows=rows,
                    excluded=step.excluded(), time_limit_ms=limit,
                ),
            )  # fmt: skip
        except _RETRYABLE:
            if attempt == _ATTEMPTS:
                raise
            step.retries += 1
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _within_deadline(
    deadline: Deadline | None, page: Callable[[int | None], PageResult]
) -> PageResult:
    """Run ``page``, cancelled by the server if it would outlast the run's deadline.

    ``page`` is given the lowered statement timeout, or None far from the
    deadline (the page then runs as one autocommit statement).
    """
    limit = None if deadline is None else deadline.limit_ms()
    if limit is not None and limit <= 0:
        raise _DeadlineReachedError(None)
    try:
        return page(limit)
    except _TIMED_OUT as exc:
        if limit is None:
            raise
        # The lowered timeout is below statement_timeout (Deadline.limit_ms):
        # it was the deadline that cancelled the page.
        raise _DeadlineReachedError(exc) from exc


def _splittable(exc: psycopg.Error) -> bool:
    # One row's content, or a page too long for statement_timeout: halving finds out.
    return _row_caused(exc) or isinstance(exc, _TIMED_OUT)


def _row_caused(exc: psycopg.Error) -> bool:
    return (exc.sqlstate or "")[:2] in _ROW_CAUSED_CLASSES


def _describe(exc: psycopg.Error) -> str:
    # The server's first line names the problem (e.g. the index and the row
    # size); the detail that follows quotes values, which stay out of reports.
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return (
        f"the dispatch statement fails on this duty alone: {type(exc).__name__} "
        f"(SQLSTATE {exc.sqlstate}): {first_line[:200]}"
    )
