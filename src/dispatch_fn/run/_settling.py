"""Settling one step of a run: what it runs, in which order, and what each answer means.

A step dispatches one page of a range: the page statement over the range's
next duties, each owing what its account says (docs/contract.md#account).
When the server refuses a page for
one row's content, a duty's row is locked elsewhere, or a page runs past
statement_timeout, the page is halved until the duties to blame stand alone;
they are set aside and the rest is dispatched (docs/adr/0003-failing-pages.md,
docs/adr/0009-bounded-pages.md). Near the calendar's edge the planner judges
the page's duties first and those it refuses are set aside (``calendar_edge``).

Nothing here does I/O or reads a clock, as psycopg writes its protocol:
``settle`` is a generator that yields commands (``Dispatch``, ``ListIds``,
``ReadDuties``, ``FindLocked``, ``SpendTimeout``, ``Wait``) and is sent each
command's reply (``Committed``, ``Ids``, ``Duties``, ``Allowance``, or one of
the failures ``Locked``, ``Refused``, ``TimedOut``, ``Conflict``,
``DeadlineReached``, ``Lost``, ``Failed``); it returns the step's ``Outcome``.
``_pages`` drives it on a connection; the rules are tested without a server.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Protocol

from dispatch_fn.planning import Fault

if TYPE_CHECKING:
    from dispatch_fn.db import PageResult

# A statement that meets a deadlock or a serialization failure (two runs on
# the same duties) is simply tried again, this many times in all.
ATTEMPTS: Final = 5
# Past this many duties set aside in one step the error is not one row's: the
# step fails instead of being taken apart one statement per duty.
MAX_SET_ASIDE_PER_PAGE: Final = 32
LOCKED_DETAIL: Final = "its row was locked by another transaction; the next run dispatches it"
TIMED_OUT_DETAIL: Final = (
    "the dispatch statement runs past statement_timeout on this duty alone;"
    " the next run tries it again"
)
EDITED_DETAIL: Final = (
    "its row changed during the backfill into values the backfill did not plan for (a"
    " group, lead or due rule); the same backfill run again creates what this one did not"
)


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
    EDITED = "edited"  # changed since the run planned, into values it did not plan for


@dataclass(frozen=True, slots=True)
class Job:
    """The next page of range ``range_no``: the first duties after ``after``, up to ``upto``."""

    range_no: int
    after: str | None
    upto: str | None
    deferred: int = 0  # times put back after a lock timeout
    lost: int = 0  # times a connection died under it
    # The page's own statement probes for its owed rows before inserting
    # (page_write_rerun.sql): the board's guess when it handed the job out
    # (agenda.Board.take).
    probe: bool = False


@dataclass(frozen=True, slots=True)
class SetAside(Fault):
    """A duty left out of its page, and the server's (or the planner's) words for why."""

    reason: SetAsideReason


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
    error: Exception | None = None


class Judge(Protocol):
    """The planner at the calendar's edge (``calendar_edge.Edge``): which duties it refuses, why."""

    def refused(self, duties: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], str]]:
        """``(duty row, detail)`` of the duties the planner refuses."""
        ...


@dataclass(frozen=True, slots=True)
class PageShape:
    """What every step of a run shares: its page bounds, and the planner near the calendar's edge.

    A page holds at most ``size`` duties and, past its first duty, at most
    ``rows`` candidate rows (None: no bound). ``edge`` (None: far from the
    calendar's edges) judges each page's duties before they are dispatched.
    A duty a page leaves unjudged (``PageResult.unplaced``) that is not
    ``faulted`` was edited since the run planned: it is set aside (edited).
    """

    size: int
    rows: int | None = None
    edge: Judge | None = None
    # (organization_id, id) of the duties counted as faults before the pages.
    faulted: frozenset[tuple[str, str]] = frozenset()


# Commands: what a step asks its driver to do.


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Run the page statement on the first ``size`` duties in ``(after, upto]`` not set aside.

    Within the run's deadline, and past its first duty within ``rows``
    candidate rows (None: no bound); ``probe``: through the statement's
    probing variant (``Job.probe``). Set aside: the ids ``excluded``, every
    row of each, and the rows ``excluded_keys`` (``(organization_id, id)``)
    alone. Replied to with ``Committed`` or a failure.
    """

    after: str | None
    upto: str | None
    size: int
    rows: int | None
    excluded: tuple[str, ...]
    probe: bool = False
    excluded_keys: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ListIds:
    """The ids ``Dispatch`` with these arguments would take, in the server's order: ``Ids``."""

    after: str | None
    upto: str | None
    size: int
    rows: int | None
    excluded: tuple[str, ...]
    excluded_keys: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ReadDuties:
    """The rows of the first ``size`` duties in ``(after, upto]`` not ``excluded``: ``Duties``."""

    after: str | None
    upto: str | None
    size: int
    excluded: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FindLocked:
    """The rows of ``ids`` another transaction holds locked: ``Locks``."""

    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SpendTimeout:
    """Take one statement timeout from the run's allowance: ``Allowance``."""


@dataclass(frozen=True, slots=True)
class Wait:
    """Pause before a statement is tried again (the reply is None)."""

    seconds: float


type Command = Dispatch | ListIds | ReadDuties | FindLocked | SpendTimeout | Wait


# Replies: what the driver saw.


@dataclass(frozen=True, slots=True)
class Committed:
    """The statement ran and committed; the server's counts."""

    page: PageResult


@dataclass(frozen=True, slots=True)
class Ids:
    """Duty ids, in the server's order."""

    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Locks:
    """Locked duty rows: ``(organization_id, id)`` of each, and the ids with an unlocked row.

    On a layout keyed by ``(organization_id, id)`` another organisation's
    duty may share a locked row's id (docs/adr/0005): that row alone is set
    aside, and the duty beside it dispatched.
    """

    keys: tuple[tuple[str, str], ...]
    shared: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Duties:
    """Duty rows, in the server's order."""

    rows: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Allowance:
    """Whether the run's allowance had a statement timeout left to spend."""

    granted: bool


@dataclass(frozen=True, slots=True)
class Locked:
    """A row the statement needs was locked past lock_timeout (SQLSTATE 55P03)."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Refused:
    """The server refused one row's values (SQLSTATE classes 22, 23, 54); ``detail`` says how."""

    error: Exception
    detail: str


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The statement ran past the session's own statement_timeout (57014)."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Conflict:
    """A deadlock, a serialization failure or a duty's key moved under it: run it again.

    ``persisting``: what the failure means if every attempt meets it (None:
    the step stops); a key that stays missing is one row's to split out.
    """

    error: Exception
    persisting: Refused | None = None


@dataclass(frozen=True, slots=True)
class DeadlineReached:
    """The run's deadline cancelled the statement (None: it came before the statement began)."""

    error: Exception | None


@dataclass(frozen=True, slots=True)
class Lost:
    """The connection died under the statement."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Failed:
    """Any other error: the statement's or the server's, not one row's."""

    error: Exception


type Splittable = Locked | Refused | TimedOut
type Reply = (
    Committed | Ids | Locks | Duties | Allowance | Splittable | Conflict | DeadlineReached | Lost
    | Failed | None
)  # fmt: skip
type Steps[T] = Generator[Command, Reply, T]


@dataclass(frozen=True, slots=True)
class _Stop:
    """The step ends here; ``settled`` is the last id up to which its duties were settled."""

    failure: Failure
    error: Exception | None
    settled: str | None = None


@dataclass(frozen=True, slots=True)
class _Apart:
    """The page is to be taken apart; ``failed`` is what its ids just met (None: try them)."""

    failed: Splittable | None


@dataclass(frozen=True, slots=True)
class _Span:
    """Duties to settle: ``ids``, the next after ``after``; ``failed`` is what they just met."""

    after: str | None
    ids: Sequence[str]
    failed: Splittable | None = None


@dataclass(slots=True)
class _Record:
    # What the step has committed and set aside so far, in order; only appended to.
    pages: list[PageResult] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)
    retries: int = 0
    isolated: int = 0  # duties set aside because a statement failed on them alone
    probe: bool = False  # the job's: every page statement of the step probes first
    # Rows left out while each row of an id is tried alone (``_settle_namesakes``).
    held_back: tuple[tuple[str, str], ...] = ()
    # Ids set aside by key every read row of which is locked: left out whole.
    locked_out: set[str] = field(default_factory=set)

    def _whole(self, each: SetAside) -> bool:
        return each.organization_id is None or each.duty_id in self.locked_out

    def excluded(self) -> tuple[str, ...]:
        """The ids set aside, every row of each."""
        return tuple(dict.fromkeys(each.duty_id for each in self.set_aside if self._whole(each)))

    def excluded_keys(self) -> tuple[tuple[str, str], ...]:
        """The rows set aside alone, by ``(organization_id, id)``: their id is shared."""
        return (
            tuple(
                (each.organization_id, each.duty_id)
                for each in self.set_aside
                if each.organization_id is not None and not self._whole(each)
            )
            + self.held_back
        )

    def outcome(
        self,
        job: Job,
        *,
        reached: str | None = None,
        more: bool = False,
        stop: _Stop | None = None,
        set_aside: Sequence[SetAside] | None = None,
    ) -> Outcome:
        return Outcome(
            job,
            pages=tuple(self.pages),
            retries=self.retries,
            set_aside=tuple(self.set_aside if set_aside is None else set_aside),
            reached=reached,
            more=more,
            failure=None if stop is None else stop.failure,
            error=None if stop is None else stop.error,
        )


def settle(walk: PageShape, job: Job) -> Steps[Outcome]:
    """The commands that dispatch the page ``job`` names; returns what the step did."""
    record = _Record(probe=job.probe)
    if walk.edge is None:
        return (yield from _ordinary(walk, job, record))
    return (yield from _judged_steps(walk, walk.edge, job, record))


def _ordinary(walk: PageShape, job: Job, record: _Record) -> Steps[Outcome]:
    """A page as the server bounds it: tried whole, then, if it fails, its very ids."""
    first = yield from _page(walk, record, job.after, job.upto)
    if isinstance(first, Committed):
        return record.outcome(job, reached=first.page.upto, more=_more(walk, job, first.page))
    verdict = yield from _verdict(job, record, first)
    if isinstance(verdict, _Stop):
        return _stopped(job, record, verdict)
    # The very duties the page took, cut by the same row budget.
    listed = yield ListIds(job.after, job.upto, walk.size, walk.rows, ())
    if not isinstance(listed, Ids):
        return _stopped(job, record, _stop_of(listed))
    if not listed.ids:
        return record.outcome(job, reached=job.after)
    stop = yield from _settle_ids(walk, job, record, _Span(job.after, listed.ids, verdict.failed))
    if stop is not None:
        return _stopped(job, record, stop, listed.ids)
    # The row budget may have cut the page short of its size: the range goes
    # on unless it ended here (an empty page after it says so).
    last = listed.ids[-1]
    return record.outcome(job, reached=last, more=not _ends_range(job, last))


def _judged_steps(walk: PageShape, edge: Judge, job: Job, record: _Record) -> Steps[Outcome]:
    """A page near the calendar's edge: its duties judged first, then dispatched up to the last."""
    read = yield ReadDuties(job.after, job.upto, walk.size)
    if not isinstance(read, Duties):
        return _stopped(job, record, _stop_of(read))
    record.set_aside.extend(_refused_by_planner(read.rows, edge.refused(read.rows)))
    ids = [str(duty["id"]) for duty in read.rows]
    if not ids:
        return record.outcome(job, reached=job.after)
    failure, cursor = yield from _through(walk, record, job.after, ids[-1])
    if failure is not None:
        stop = yield from _judged_apart(walk, job, record, ids, (cursor, failure))
        if stop is not None:
            return _stopped(job, record, stop, ids)
    return record.outcome(job, reached=ids[-1], more=_judged_more(walk, job, ids))


def _refused_by_planner(
    rows: Sequence[Mapping[str, Any]], refused: Sequence[tuple[Mapping[str, Any], str]]
) -> list[SetAside]:
    """The duties the planner refused, set aside by key: a fault is its own organisation's."""
    return [
        SetAside(str(row["id"]), SetAsideReason.REFUSED, detail, _organization_of(row))
        for row, detail in refused
    ]


def _through(
    walk: PageShape, record: _Record, cursor: str | None, last: str
) -> Steps[tuple[Splittable | _Stop | None, str | None]]:
    """Dispatch the duties after ``cursor`` up to ``last``, in as many pages as needed.

    Bounded by the judged ids, so the duties set aside do not pull unjudged
    ones into a page. Returns what stopped it (None: nothing) and the last id
    a committed page reached, which is also how far the step's duties are
    settled.
    """
    while True:
        reply = yield from _page(walk, record, cursor, last)
        if not isinstance(reply, Committed):
            return reply, cursor
        if reply.page.upto in {None, last}:
            return None, last
        cursor = reply.page.upto


def _judged_apart(
    walk: PageShape,
    job: Job,
    record: _Record,
    ids: Sequence[str],
    failed: tuple[str | None, Splittable | _Stop],
) -> Steps[_Stop | None]:
    """Settle the judged duties no committed page reached, after a page of them failed.

    The pages behind the cursor are stored, the planner's judgement is made.
    """
    cursor, failure = failed
    verdict = yield from _verdict(job, record, failure)
    if isinstance(verdict, _Stop):
        return replace(verdict, settled=cursor)
    rest = yield from _following(record, ids, cursor)
    if isinstance(rest, _Stop):
        return rest
    return (yield from _settle_ids(walk, job, record, _Span(cursor, rest, verdict.failed), cursor))


def _verdict(job: Job, record: _Record, failure: Splittable | _Stop) -> Steps[_Stop | _Apart]:
    """What follows a page that failed on its first try: the step ends, or the page is split."""
    if isinstance(failure, _Stop):
        return failure
    if isinstance(failure, Locked):
        # Tried again later, unless the step committed pages already: a step
        # done again would do them again.
        if job.deferred == 0 and not record.pages:
            return _Stop(Failure.LOCKED, failure.error)
        # Once deferred, its locked duties are left out and the rest tried.
        return _Apart(None if job.deferred else failure)
    stop = yield from _spend(failure)
    return stop or _Apart(failure)


def _settle_ids(
    walk: PageShape, job: Job, record: _Record, span: _Span, settled: str | None = None
) -> Steps[_Stop | None]:
    """Settle a page's ids; once locked already, its locked duties are set aside untried."""
    aside = set(record.excluded())
    kept = [duty_id for duty_id in span.ids if duty_id not in aside]
    if job.deferred and kept:
        # Only those not set aside already: a duty the planner refused may be locked too.
        locked = yield FindLocked(tuple(kept))
        if not isinstance(locked, Locks):
            return _stop_of(locked)
        # Each locked row is set aside by its key, whether or not a row of its
        # id is free: the ledger and the fault account then keep this
        # organisation's duty, never a namesake's the run did not read (a
        # judgement owed afresh, an ended fault). An id every read row of
        # which is locked is left out whole.
        record.set_aside.extend(
            SetAside(duty_id, SetAsideReason.LOCKED, LOCKED_DETAIL, organization_id=organization)
            for organization, duty_id in locked.keys
        )
        gone = {duty_id for _, duty_id in locked.keys} - locked.shared
        record.locked_out |= gone
        kept = [duty_id for duty_id in kept if duty_id not in gone]
    return (yield from _settle(walk, record, replace(span, ids=kept), settled))


def _settle(
    walk: PageShape, record: _Record, span: _Span, settled: str | None = None
) -> Steps[_Stop | None]:
    """Dispatch every duty of ``span``; set aside those the page statement fails on alone.

    A span that failed is halved, and each half tried in id order; one that
    failed alone is set aside. Halving keeps the cost of one bad duty in a
    page of n at about 2 log2(n) statements, every good half committed as it
    goes; ``settled`` is how far.
    """
    pending = [span]
    while pending:
        moved = yield from _settle_span(walk, record, pending)
        if isinstance(moved, _Stop):
            return replace(moved, settled=settled)
        if moved is not None:
            settled = moved
    return None


def _settle_span(
    walk: PageShape, record: _Record, pending: list[_Span]
) -> Steps[_Stop | str | None]:
    """Settle the span on top of ``pending``, queueing what remains of it; how far it settled."""
    now = pending.pop()
    if not now.ids:
        return None
    if now.failed is not None:
        return (yield from _settle_failed(walk, record, now, pending))
    reply = yield from _page(walk, record, now.after, now.ids[-1])
    if isinstance(reply, _Stop):
        return reply
    if not isinstance(reply, Committed):
        pending.append(replace(now, failed=reply))
        return (yield from _spend(reply))
    reached = now.ids[-1] if reply.page.upto is None else reply.page.upto
    if reached != now.ids[-1]:
        # The row budget ended the statement before the span's last id: the rest follows.
        rest = yield from _following(record, now.ids, reached)
        if isinstance(rest, _Stop):
            return rest
        pending.append(_Span(reached, rest))
    return reached


def _settle_failed(
    walk: PageShape, record: _Record, span: _Span, pending: list[_Span]
) -> Steps[_Stop | str | None]:
    """Queue the halves of a span that failed, first half on top; or settle its one id."""
    ids = span.ids
    if len(ids) == 1:
        stop = yield from _settle_namesakes(walk, record, span)
        return stop or ids[0]
    half = len(ids) // 2
    pending.extend([_Span(ids[half - 1], ids[half:]), _Span(span.after, ids[:half])])
    return None


def _settle_namesakes(walk: PageShape, record: _Record, span: _Span) -> Steps[_Stop | None]:
    """Set aside the one id a span failed on; of rows of several organisations, each that fails.

    On a layout keyed by ``(organization_id, id)`` an id may repeat across
    organisations (docs/adr/0005): each row is tried with the others left
    out, so a row the server refuses keeps no other organisation's duty from
    its tasks.
    """
    duty_id, failed = span.ids[0], span.failed
    assert failed is not None  # noqa: S101 - only spans that failed are settled alone
    read = yield ReadDuties(span.after, duty_id, walk.size, record.excluded())
    if not isinstance(read, Duties):
        return _stop_of(read)
    aside = set(record.excluded_keys())
    organizations = [
        organization
        for organization in (_organization_of(row) for row in read.rows if row["id"] == duty_id)
        if organization is not None and (organization, duty_id) not in aside
    ]
    alone = _alone(duty_id, failed)
    if len(organizations) < 2:
        # Its one row, by key where the read named it: a fault is its
        # organisation's, not that of a namesake the page did not read.
        only = organizations[0] if organizations else None
        return _isolate(record, replace(alone, organization_id=only), failed)
    for organization in organizations:
        record.held_back = tuple(
            (other, duty_id) for other in organizations if other != organization
        )
        reply = yield from _page(walk, record, span.after, duty_id)
        record.held_back = ()
        if isinstance(reply, _Stop):
            return reply
        if isinstance(reply, Committed):
            continue
        stop = yield from _spend(reply)
        alone = _alone(duty_id, reply)
        stop = stop or _isolate(record, replace(alone, organization_id=organization), reply)
        if stop is not None:
            return stop
    return None


def _organization_of(row: Mapping[str, Any]) -> str | None:
    organization = row.get("organization_id")
    return None if organization is None else str(organization)


def _isolate(record: _Record, alone: SetAside, failed: Splittable) -> _Stop | None:
    """Set aside a duty a statement failed on alone, within the page's allowance of them."""
    if record.isolated >= MAX_SET_ASIDE_PER_PAGE:
        return _Stop(Failure.ERROR, failed.error)
    record.isolated += 1
    record.set_aside.append(alone)
    return None


def _alone(duty_id: str, failed: Splittable) -> SetAside:
    """A duty the statement failed on alone, and why."""
    match failed:
        case Locked():
            return SetAside(duty_id, SetAsideReason.LOCKED, LOCKED_DETAIL)
        case TimedOut():
            # Its values are fine, its page was slow: not a fault, tried again next run.
            return SetAside(duty_id, SetAsideReason.TIMED_OUT, TIMED_OUT_DETAIL)
        case Refused(detail=detail):
            return SetAside(duty_id, SetAsideReason.REFUSED, detail)


def _page(
    walk: PageShape, record: _Record, after: str | None, upto: str | None
) -> Steps[Committed | Splittable | _Stop]:
    """The page statement over the duties in ``(after, upto]`` not set aside."""
    command = Dispatch(
        after,
        upto,
        walk.size,
        walk.rows,
        record.excluded(),
        probe=record.probe,
        excluded_keys=record.excluded_keys(),
    )
    reply = yield from _dispatch_step(record, command)
    if isinstance(reply, Committed):
        record.pages.append(reply.page)
        # Left unjudged and no fault the run counted: edited since the run
        # planned, set aside by its key, a namesake's own row being another
        # duty (docs/contract.md#set-aside).
        record.set_aside.extend(
            SetAside(duty_id, SetAsideReason.EDITED, EDITED_DETAIL, organization)
            for organization, duty_id in reply.page.unplaced
            if (organization, duty_id) not in walk.faulted
        )
    return reply


def _dispatch_step(record: _Record, command: Dispatch) -> Steps[Committed | Splittable | _Stop]:
    """One statement, tried again after a conflict (``Conflict``)."""
    attempt = 1
    while True:
        reply = yield command
        if not isinstance(reply, Conflict):
            return _answer(reply)
        if attempt == ATTEMPTS:
            return reply.persisting or _Stop(Failure.ERROR, reply.error)
        record.retries += 1
        yield Wait(0.05 * attempt)
        attempt += 1


def _answer(reply: Reply) -> Committed | Splittable | _Stop:
    if isinstance(reply, Committed | Locked | Refused | TimedOut):
        return reply
    return _stop_of(reply)


def _following(
    record: _Record, ids: Sequence[str], point: str | None
) -> Steps[Sequence[str] | _Stop]:
    """Those of ``ids`` (in the server's order) that sort after ``point``."""
    if point is None or not ids:
        return ids
    if point in ids:
        return ids[ids.index(point) + 1 :]
    # A duty made dispatchable since ``ids`` were read ended a page: only the
    # server knows how its collation orders it among them. The last id
    # bounded the page that ended at ``point``, so it follows it.
    listed = yield ListIds(
        point, ids[-1], len(ids), None, record.excluded(), record.excluded_keys()
    )
    if not isinstance(listed, Ids):
        return _stop_of(listed)
    later = set(listed.ids)
    return [duty_id for duty_id in ids[:-1] if duty_id in later] + [ids[-1]]


def _spend(failure: Splittable) -> Steps[_Stop | None]:
    # Splitting a page that timed out costs timeouts again: a run spends few.
    if not isinstance(failure, TimedOut):
        return None
    allowance = yield SpendTimeout()
    if isinstance(allowance, Allowance) and allowance.granted:
        return None
    return _Stop(Failure.TIMEOUTS, failure.error)


def _stop_of(reply: Reply) -> _Stop:
    """The stop a reply other than the one asked for means."""
    match reply:
        case DeadlineReached(error=error):
            return _Stop(Failure.DEADLINE, error)
        case Lost(error=error):
            return _Stop(Failure.LOST, error)
        case Locked(error=error) | Refused(error=error) | TimedOut(error=error):
            return _Stop(Failure.ERROR, error)
        case Conflict(error=error) | Failed(error=error):
            return _Stop(Failure.ERROR, error)
        case _:
            raise TypeError(f"no command of a step is answered with {reply!r}")


def _stopped(job: Job, record: _Record, stop: _Stop, ids: Sequence[str] = ()) -> Outcome:
    """The outcome of a step that ended early; ``ids``: its duties in page order, once listed."""
    if stop.failure not in (Failure.DEADLINE, Failure.TIMEOUTS):
        return record.outcome(job, stop=stop)
    # How far it settled (its cancelled statement committed nothing); the
    # rest is the continuation's, or the next run's, which finds again the
    # duties set aside past that point (locked, or refused by the planner).
    reached = job.after if stop.settled is None else stop.settled
    settled = set(ids[: ids.index(reached) + 1]) if reached in ids else set()
    # An edited duty's page committed, so it lies up to that point, listed
    # or not (an edit may make a duty read that the list did not hold).
    kept = [
        each
        for each in record.set_aside
        if each.duty_id in settled or each.reason is SetAsideReason.EDITED
    ]
    return record.outcome(job, reached=reached, more=True, stop=stop, set_aside=kept)


def _more(walk: PageShape, job: Job, page: PageResult) -> bool:
    # A page short of its size (not for its row budget), or one that reached
    # its range's bound, ends the range.
    return (page.rows >= walk.size or page.cut) and not _ends_range(job, page.upto)


def _judged_more(walk: PageShape, job: Job, ids: Sequence[str]) -> bool:
    return len(ids) >= walk.size and not _ends_range(job, ids[-1])


def _ends_range(job: Job, reached: str | None) -> bool:
    return job.upto is not None and reached == job.upto
