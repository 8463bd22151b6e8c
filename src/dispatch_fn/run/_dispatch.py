"""One run of the dispatcher against the database: pages, plans, writes, report.

The imperative shell around ``plan``: it asks the planner once per frequency
and zone in use, then lets one statement per keyset page of duties insert what
is owed. Each page is its own short transaction, so a run killed at any
instant leaves only whole pages behind and the next run completes the rest.
Pages hold disjoint duties, so several connections can take them in turn:
worker threads only execute steps (``_pages.take_step``); ``_walk`` alone decides
what runs next, and ``_fold`` alone turns the outcomes into the report.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import chain
from typing import Any, Final

import psycopg

from dispatch_fn.db import (
    Connection,
    DueRule,
    Group,
    Rules,
    any_dispatchable,
    census,
    due_rules,
    estimated_duties,
    fault_members,
    ids_with_form,
    lookups,
    page_bounds,
    page_statement,
)
from dispatch_fn.errors import CadenceRefused
from dispatch_fn.planning import (
    FORMS,
    Cadence,
    Edge,
    Fault,
    FaultReason,
    RunRequest,
    Schedule,
    Scope,
    check_cadence_rule,
    classify,
    lead_bucket,
    near_edge,
    page_plan,
    previous_clock,
    schedule_within_calendar,
    unknown_form_detail,
)
from dispatch_fn.run import _agenda, _pages, _settling
from dispatch_fn.run._agenda import CONNECTION_ATTEMPTS, STOPPED_BY_DEADLINE
from dispatch_fn.run._lapses import lapsed_unseen
from dispatch_fn.run.errors import RunFailedError
from dispatch_fn.run.outcome import PAGE_SKIPS, RunOutcome, RunReport
from dispatch_fn.run.progress import ProgressMeter
from dispatch_fn.run.runtime import LOCAL, Runtime


def dispatch(
    conns: Sequence[Connection],
    request: RunRequest,
    runtime: Runtime = LOCAL,
    *,
    dispatched_clock: datetime | None = None,
    origin: datetime | None = None,
    keeps_accounts: bool = True,
    reads_owed_only: bool = True,
) -> RunReport:
    """Dispatch (or, dry, count) every task ``request`` owes; return what happened.

    ``conns`` must be in autocommit mode: each page is one statement, so its
    own transaction. Pages are shared among them, one thread each. A page
    holds at most ``Tuning.chunk_size`` duties (or somewhat fewer, where that
    spares weighing them: ``store.PageStatement.page_size``) and, past its
    first, at most ``Tuning.page_rows`` candidate rows. The runtime's budget
    is asked before each page, and bounds a page already running: either way
    the run ends early with ``complete`` False, and the next run picks up the
    rest. A connection that dies is replaced from ``runtime.connections`` (at
    most ``CONNECTION_ATTEMPTS`` per run, closed when the run ends). A page past
    statement_timeout is split, at most ``Tuning.max_timeouts`` times per run.
    What each duty owes is its own account's answer (docs/contract.md#account),
    back to ``Tuning.catch_up_days``, and judged afresh as the scope's
    ``afresh`` says (every one read, the rules having changed since the
    previous run, or those that run set aside while it judged them so); ``origin``: the
    clock a duty with no account and no mark owes from (None: the scheduled
    clock before the run); ``keeps_accounts`` False: a run at a clock later
    than the wall clock writes no account, so the scheduled runs before its
    clock still owe their own days; ``reads_owed_only`` False: a scheduled
    run at a clock before the latest one reads every duty in its scope.
    ``dispatched_clock``, the latest clock a completed run dispatched (None:
    unknown), says whether the first pages probe for their rows before
    inserting (``page_plan.probes_from_the_start``); later pages go by what
    the pages before them found. Either way the same rows are written.
    """
    if not conns:
        raise ValueError("dispatch needs at least one connection; got none")
    if not all(each.autocommit for each in conns):
        # Otherwise every page would join one long transaction, and a run
        # killed near its end would lose all of them.
        raise ValueError("dispatch needs autocommit connections; each page commits alone")
    tuning = runtime.tuning
    if request.window is None and not request.scope.afresh.every and reads_owed_only:
        # A scheduled run reads only the duties whose next owed day has come,
        # and those owed a fresh judgement (docs/contract.md#account); one
        # whose rules changed reads them all, as does one at a clock before
        # the latest, for which no next day was judged.
        request = replace(request, scope=replace(request.scope, owed_at=request.now))
    try:
        preamble, planned = _prepare(conns[0], request, (tuning.catch_up_days, origin))
        ready, rules = planned.ready, planned.rules
        if not ready:
            walked = _Walked((), (), complete=True)
            return _not_read(conns[0], _fold(request, preamble, [], walked))
        statement = page_statement(
            request.scope,
            ready,
            rules,
            dry_run=request.dry_run,
            rejudge=request.scope.afresh.every,
            keeps_accounts=keeps_accounts,
        )
        size = statement.page_size(tuning.chunk_size, tuning.page_rows)
        # The pages' bounds up front, so that connections take pages in turn and
        # a page put back (its locks held elsewhere) does not hold up the next.
        bounds = page_bounds(conns[0], request.scope, size)
    except (psycopg.Error, OSError) as exc:
        raise failed_before_pages(request, exc) from exc
    ranges = list(zip([None, *bounds], [*bounds, None], strict=True))
    walk = _pages.Pages(
        statement,
        request.scope,
        size,
        edge=_edge_of(request, ready, tuning.catch_up_days),
        faulted=frozenset(
            (each.organization_id, each.duty_id)
            for each in preamble.faults
            if each.organization_id is not None
        ),
        rows=tuning.page_rows,
        deadline=runtime.budget.deadline(),
        timeouts=_pages.TimeoutAllowance(tuning.max_timeouts),
        dispatch_page=runtime.dispatch_page,
    )
    meter = ProgressMeter(sum(group.duties for group, _ in ready), runtime.on_progress)
    source = runtime.connections
    reconnect = None if source is None else source.reconnect
    board = _agenda.Board(
        ranges, probe=page_plan.probes_from_the_start(dispatched_clock, request.now)
    )
    walked = _walk(conns, walk, board, runtime.budget.should_stop, reconnect, meter=meter)
    if not walked.complete and not walked.fatal:
        reached = gapless_mark(ranges, walked.outcomes)
        preamble = _reached(conns[0], request, (tuning.catch_up_days, origin), reached, preamble)
    report = _fold(request, preamble, ranges, walked)
    if not walked.fatal:
        report = _not_read(conns[0], report)
        report = _lapsed_unseen(conns[0], report, walked, tuning.catch_up_days)
    if walked.fatal:
        # Committed pages stay committed; say which, so the next run's work is known.
        problems = "; ".join(
            f"range after {o.job.after!r} up to {o.job.upto!r}: {type(o.error).__name__}: {o.error}"
            for o in walked.fatal
        )
        raise _failed(report, f"{len(walked.fatal)} page(s) failed: {problems}") from (
            walked.fatal[0].error
        )
    return report


def _not_read(conn: Connection, report: RunReport) -> RunReport:
    """The report with the estimate of the duties an owed-only run passed over.

    Of the duties in its scope, up to its gapless mark if it stopped early
    (the continuation counts the rest), whatever their state: ``duties_read``
    counts those it does not dispatch too.
    """
    scope = report.request.scope
    if scope.owed_at is None:
        return report
    if not report.complete:
        if report.last_duty_id is None:
            return replace(report, duties_not_read=0)  # it reached no duty
        scope = replace(scope, reach=report.last_duty_id)
    try:
        estimate = estimated_duties(conn, replace(scope, owed_at=None))
    except psycopg.Error:
        return report  # an estimate is not worth failing a run that wrote its pages
    return replace(report, duties_not_read=max(0, estimate - report.duties_read))


def _lapsed_unseen(
    conn: Connection, report: RunReport, walked: _Walked, catch_up_days: int
) -> RunReport:
    """The report with the duties whose periods lapsed before its first candidate counted.

    A page flags an account it cannot judge that far back (page_owed.sql's
    ``lapse_probe``, the account as the page read it, before it moved it);
    the planner judges each with the duty's stored row. Rare: an account
    bounded by a pause, a span or its window's end, older than the horizon.
    """
    pages = chain.from_iterable(outcome.pages for outcome in walked.outcomes)
    probes = [probe for page in pages for probe in page.lapse_probes]
    if not probes:
        return report
    afresh = report.request.scope.afresh
    try:
        rows = lookups.duty_rows_by_key(
            conn, [(probe.organization_id, probe.duty_id) for probe in probes]
        )
    except psycopg.Error:
        return report  # a count is not worth failing a run that wrote its pages
    lapsed = 0
    schedules: dict[Any, Any] = {}  # plan's schedule memo, shared by the probes at one clock
    for probe in probes:
        row = rows.get((probe.organization_id, probe.duty_id))
        if row is None:
            continue
        try:
            lapsed += lapsed_unseen(
                conn,
                row,
                probe.account,
                report.request.now,
                origin=probe.origin,
                catch_up_days=catch_up_days,
                rejudge=afresh.every,
                owed_afresh_at=afresh.owed_at((probe.organization_id, probe.duty_id)),
                schedules=schedules,
            )
        except psycopg.Error:
            return report  # a count is not worth failing a run that wrote its pages
    if not lapsed:
        return report
    counted = {**report.counted, "lapsed": report.counted.get("lapsed", 0) + lapsed}
    return replace(report, counted=counted)


def failed_before_pages(request: RunRequest, exc: Exception) -> RunFailedError:
    """The failure of a run that wrote nothing: it failed before its first page."""
    empty = _fold(request, _Preamble(), [], _Walked((), (), complete=False))
    return _failed(empty, f"{type(exc).__name__}: {exc}")


def _failed(report: RunReport, problem: str) -> RunFailedError:
    return RunFailedError(
        f"run failed after {report.pages} committed page(s), last duty id "
        f"{report.last_duty_id!r}: {problem}; report so far: {json.dumps(report.as_json())}",
        RunOutcome(report),
    )


@dataclass(frozen=True, slots=True)
class _Walked:
    """Every step's outcome in the order they ended, those that failed the run, completeness."""

    outcomes: tuple[_settling.Outcome, ...]
    fatal: tuple[_settling.Outcome, ...]
    complete: bool
    stopped_by: str | None = None  # RunReport.stopped_by


def _walk(
    conns: Sequence[Connection],
    walk: _pages.Pages,
    board: _agenda.Board,
    should_stop: Callable[[], bool],
    reconnect: Callable[[], Connection] | None,
    *,
    meter: ProgressMeter,
) -> _Walked:
    """Hand out the ranges' pages to idle connections until none is left.

    The only place that schedules: workers execute one step each and return;
    what follows each outcome is the board's to decide (``agenda``), on this
    thread.
    """
    links = _Links(list(conns), reconnect)
    running: dict[Future[_settling.Outcome], Connection] = {}
    try:
        with ThreadPoolExecutor(len(conns), thread_name_prefix="dispatch") as pool:
            while _hand_out(pool, running, links, board, (walk, should_stop)):
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    _take_back(running.pop(future), future.result(), board, links, meter)
        return _walked(board, links.idle, walk.scope)
    finally:
        links.close()


def _hand_out(
    pool: ThreadPoolExecutor,
    running: dict[Future[_settling.Outcome], Connection],
    links: _Links,
    board: _agenda.Board,
    walking: tuple[_pages.Pages, Callable[[], bool]],
) -> bool:
    """Give idle connections the next jobs, ``should_stop`` asked before each; any running?"""
    walk, should_stop = walking
    while links.idle and board.open():
        if should_stop():
            board.stop(STOPPED_BY_DEADLINE)
            break
        job = board.take()
        conn = links.idle.pop(0)
        running[pool.submit(_pages.take_step, conn, walk, job)] = conn
    return bool(running)


def _take_back(
    conn: Connection,
    outcome: _settling.Outcome,
    board: _agenda.Board,
    links: _Links,
    meter: ProgressMeter,
) -> None:
    """One step ended: the board decides what follows; its connection is idle again, or replaced."""
    alive = board.record(outcome)
    meter.page(sum(page.duties for page in outcome.pages), board.created, board.existing)
    if alive:
        links.idle.append(conn)
    elif board.wants_connections():
        links.reopen()


def _walked(board: _agenda.Board, idle: Sequence[Connection], scope: Scope) -> _Walked:
    board.finish(connections_left=bool(idle))
    left = board.agenda.left()
    complete = not board.fatal and (not left or not _any_left(idle, scope, left))
    return _Walked(
        tuple(board.outcomes),
        tuple(board.fatal),
        complete=complete,
        stopped_by=None if complete else board.stopped_by,
    )


class _Links:
    """The run's connections: those idle, and the fresh ones it opened in place of dead ones."""

    def __init__(self, idle: list[Connection], reconnect: Callable[[], Connection] | None) -> None:
        self.idle = idle
        self._reconnect = reconnect
        self._opened: list[Connection] = []

    def reopen(self) -> None:
        """A fresh connection in place of one that died, if the run may still open one."""
        if self._reconnect is None or len(self._opened) >= CONNECTION_ATTEMPTS:
            return
        try:
            fresh = self._reconnect()
        except psycopg.OperationalError:
            return  # the others carry on
        self._opened.append(fresh)
        self.idle.append(fresh)

    def close(self) -> None:
        for each in self._opened:
            each.close()


def _any_left(idle: Sequence[Connection], scope: Scope, jobs: Sequence[_settling.Job]) -> bool:
    """Whether the pages a stopped run did not take hold any duty (a last page exactly full)."""
    if not idle:
        return True
    try:
        return any(any_dispatchable(idle[0], scope, job.after, job.upto) for job in jobs)
    except psycopg.Error:
        return True  # unknown: the next run will see


def gapless_mark(
    ranges: Sequence[tuple[str | None, str | None]], outcomes: Sequence[_settling.Outcome]
) -> str | None:
    """The id up to which every duty was dispatched (or set aside) with no gap behind it.

    Range n is ``ranges[n] = (lower, upper]``; a range's steps run one after
    another, so its last successful outcome says how far it got.
    """
    return _gapless(ranges, outcomes)[0]


def _gapless(
    ranges: Sequence[tuple[str | None, str | None]], outcomes: Sequence[_settling.Outcome]
) -> tuple[str | None, int]:
    """``gapless_mark``, and the number of the range it lies in (every range's: all finished)."""
    reached: dict[int, str | None] = {}
    finished: set[int] = set()
    for outcome in (each for each in outcomes if each.failure in _agenda.SETTLED):
        if outcome.reached is not None:
            reached[outcome.job.range_no] = outcome.reached
        if not outcome.more:
            finished.add(outcome.job.range_no)
    mark = None
    for n, (lower, _) in enumerate(ranges):
        mark = reached.get(n, lower)
        if n not in finished:
            return mark, n
    return mark, len(ranges)


@dataclass(frozen=True, slots=True)
class _Preamble:
    """What a run learns before its pages: the duties it will not dispatch, and why."""

    duties_read: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    fault_counts: Mapping[str, int] = field(default_factory=dict)
    faults: tuple[Fault, ...] = ()


def _prepare(
    conn: Connection, request: RunRequest, reach: tuple[int, datetime | None]
) -> tuple[_Preamble, _Planned]:
    """What the run will not dispatch and why, and the groups it will, each planned once."""
    duties_read = 0
    skipped: Counter[str] = Counter()
    fault_counts: Counter[str] = Counter()
    faults: list[Fault] = []
    counted = census(conn, request.scope)
    for each in counted.undispatchable:
        reason = classify(each.form, each.status, each.review_status)
        duties_read += each.duties
        if reason == FaultReason.UNKNOWN_FORM:
            fault_counts[reason] += each.duties
        elif reason is not None:
            skipped[reason] += each.duties
    # Every fault, not only the report's first hundred: the run keeps them all
    # on account (db.faults), so NewFaults is exact whatever their number.
    if fault_counts[FaultReason.UNKNOWN_FORM]:
        faults.extend(
            Fault(
                each.duty_id,
                FaultReason.UNKNOWN_FORM,
                unknown_form_detail(each.form),
                each.organization_id,
            )
            for each in ids_with_form(conn, request.scope, FORMS)
        )
    ready: list[tuple[Group, Schedule]] = []
    refused_groups: dict[tuple[str | None, str, int], tuple[Group, CadenceRefused]] = {}
    catch_up_days = reach[0]
    for group, outcome in _plan_groups(counted.groups, request, reach):
        if isinstance(outcome, Schedule):
            ready.append((group, outcome))
        else:
            refused_groups[group.frequency, group.timezone, group.lead_bucket] = (group, outcome)
            duties_read += group.duties
            fault_counts[outcome.reason] += group.duties
    refused_keys = [group for group, _ in refused_groups.values()]
    # The census counted every dispatchable duty's rule; a refused group's
    # duties are that group's faults, so its rules are counted again without them.
    found: Sequence[DueRule] = counted.rules
    if not ready:
        found = ()
    elif refused_keys:
        found = due_rules(conn, request.scope, refused_keys)
    rules, rule_faults = _judge_rules(found)
    duties_read += rule_faults.total()
    fault_counts.update(rule_faults)
    if sum(fault_counts.values()) > fault_counts[FaultReason.UNKNOWN_FORM]:
        faults.extend(
            _fault_list(
                conn,
                request.scope,
                refused_groups,
                (rules, _edge_of(request, ready, catch_up_days)),
            )
        )
    return _Preamble(duties_read, skipped, fault_counts, tuple(faults)), _Planned(ready, rules)


def _reached(
    conn: Connection,
    request: RunRequest,
    reach: tuple[int, datetime | None],
    mark: str | None,
    preamble: _Preamble,
) -> _Preamble:
    """What a run stopped early learnt of the duties up to its gapless mark ``mark``.

    The continuation starts after the mark and counts the rest, so a chain
    counts each duty of its scope once, as one run would. None: it reached none.
    """
    if mark is None:
        return _Preamble()
    scope = replace(request.scope, reach=mark)
    try:
        return _prepare(conn, replace(request, scope=scope), reach)[0]
    except psycopg.Error:
        return preamble  # counted past the mark, rather than fail a run that wrote its pages


@dataclass(frozen=True, slots=True)
class _Planned:
    """What the page statements bind: each planned group with its schedule, and the rules."""

    ready: list[tuple[Group, Schedule]]
    rules: Rules


def _edge_of(
    request: RunRequest, ready: Sequence[tuple[Group, Schedule]], catch_up_days: int
) -> Edge | None:
    """The groups whose duties the planner judges page by page (``calendar_edge``), if any."""
    groups = frozenset(
        (group.frequency, group.timezone) for group, schedule in ready if near_edge(schedule)
    )
    previous = previous_clock(request.now, request.interval)
    if not groups:
        return None
    return Edge(request.now, request.window, groups, previous, catch_up_days)


def _plan_groups(
    groups: Sequence[Group], request: RunRequest, reach: tuple[int, datetime | None]
) -> list[tuple[Group, Schedule | CadenceRefused]]:
    """Every group of dispatchable duties with its schedule, or the engine's refusal.

    A group is a frequency, zone and lead bucket, so its schedule is planned
    for the largest lead of its bucket (one duty with a lead of years widens
    its own bucket's schedule, not everyone's: docs/adr/0009), or, near the
    calendar's end, for the largest the calendar allows
    (``schedule_within_calendar``).
    """
    catch_up_days, origin = reach
    previous = previous_clock(request.now, request.interval) if origin is None else origin
    planned: list[tuple[Group, Schedule | CadenceRefused]] = []
    for group in groups:
        outcome = schedule_within_calendar(
            group.frequency,
            group.timezone,
            request.now,
            request.window,
            group.max_lead,
            previous=previous,
            catch_up_days=catch_up_days,
        )
        if isinstance(outcome, CadenceRefused):
            planned.append((group, outcome))
        else:
            # The lead the schedule reaches: near the calendar's end, less than
            # the group's largest (a duty edited past it is the next run's).
            schedule, lead = outcome
            planned.append((replace(group, max_lead=lead), schedule))
    return planned


def _judge_rules(found: Sequence[DueRule]) -> tuple[Rules, Counter[str]]:
    """The due rules in use, accepted or refused, and the faults they account for, by reason.

    A refused rule's duties are its faults; an accepted rule's are those whose
    offsets or grace lie out of range. Zero offsets are valid on every anchor,
    so a rule is judged on its anchor, roll and calendar alone.
    """
    accepted: list[DueRule] = []
    refused: list[DueRule] = []
    faults: Counter[str] = Counter()
    for rule in found:
        try:
            check_cadence_rule(
                Cadence(
                    None,
                    due_anchor=rule.due_anchor,
                    due_roll=rule.due_roll,
                    holiday_calendar=rule.holiday_calendar,
                )
            )
        except CadenceRefused as refusal:
            refused.append(rule)
            faults[refusal.reason] += rule.duties
        else:
            accepted.append(rule)
            faults[FaultReason.INVALID_CADENCE] += rule.out_of_range
    return Rules(tuple(accepted), tuple(refused)), +faults


def _fault_list(
    conn: Connection,
    scope: Scope,
    refused_groups: Mapping[tuple[str | None, str, int], tuple[Group, CadenceRefused]],
    judged: tuple[Rules, Edge | None],
) -> list[Fault]:
    """Every duty counted as a fault before the pages, with its reason, in id order.

    A duty of a refused group carries the group's refusal; any other is judged
    again as the planner judges a duty row, so it carries the engine's own
    message for its values. Near the calendar's edge that is the planner's
    whole judgement: a lead reaching past the calendar is refused first.
    """
    rules, edge = judged
    groups = [group for group, _ in refused_groups.values()]
    faults = []
    for row in fault_members(conn, scope, groups, rules):
        key = (row["frequency"], row["timezone"], lead_bucket(row["lead_days"]))
        refusal = refused_groups.get(key, (None, None))[1]
        if refusal is None and edge is not None:
            refusal = edge.refusal(row)
        if refusal is None:
            try:
                check_cadence_rule(Cadence.of(row))
            except CadenceRefused as refused:
                refusal = refused
        if refusal is not None:
            faults.append(
                Fault(str(row["id"]), refusal.reason, refusal.detail, str(row["organization_id"]))
            )
    return faults


def _fold(
    request: RunRequest,
    preamble: _Preamble,
    ranges: Sequence[tuple[str | None, str | None]],
    walked: _Walked,
) -> RunReport:
    """The run's report, from what it learnt first and every step's outcome: the one tally.

    Every statement that committed counts, even in a step that failed later
    (its rows were written); duties set aside count only from steps that
    finished or settled up to their stop (``_agenda.SETTLED``), since a step
    done again finds them again, and, in a run that stopped early, only up
    to its gapless mark: its continuation reads those past it again, their
    accounts unmoved.
    """
    pages = list(chain.from_iterable(outcome.pages for outcome in walked.outcomes))
    counted: Counter[str] = Counter()
    for page in pages:
        counted.update(page.counts())
    mark, within = _gapless(ranges, walked.outcomes)
    set_aside = _settled_set_asides(
        [outcome for outcome in walked.outcomes if outcome.job.range_no <= within]
    )
    refused = [each for each in set_aside if each.reason is _settling.SetAsideReason.REFUSED]
    faults, fault_counts = _faults(preamble, refused)
    return RunReport(
        request,
        # A duty set aside was read by no page: counted here.
        duties_read=preamble.duties_read + counted["duties"] + len(set_aside),
        counted=dict(counted),
        skipped=_skipped(preamble, counted),
        faults=faults,
        fault_counts=fault_counts,
        # A duty whose statement timed out alone waits for the next run as a
        # locked one does: its values are fine, not a fault (docs/adr/0009).
        # One edited since the run planned is the next run's as an edit after
        # the run would be, its account unmoved: only a backfill, whose
        # periods no scheduled run owes, sets it aside (docs/contract.md#set-aside).
        set_aside=tuple(
            each
            for each in set_aside
            if each.reason in _WAITING
            or (each.reason is _settling.SetAsideReason.EDITED and request.window is not None)
        ),
        # A fault that, mended without an edit, would otherwise never be
        # judged afresh: its next owed day may be far off (migration 0025).
        refused_afresh=tuple(
            each for each in refused if (each.organization_id, each.duty_id) in request.scope.afresh
        ),
        # Pages that held any candidate row.
        pages=sum(bool(page.rows) for page in pages),
        retries=sum(outcome.retries for outcome in walked.outcomes),
        complete=walked.complete,
        stopped_by=walked.stopped_by,
        last_duty_id=mark,
    )


def _settled_set_asides(outcomes: Sequence[_settling.Outcome]) -> list[_settling.SetAside]:
    """The duties set aside by steps that settled them, in range order (so in id order)."""
    finished = [outcome for outcome in outcomes if outcome.failure in _agenda.SETTLED]
    finished.sort(key=lambda outcome: outcome.job.range_no)
    return list(chain.from_iterable(outcome.set_aside for outcome in finished))


def _faults(
    preamble: _Preamble, refused: Sequence[_settling.SetAside]
) -> tuple[tuple[Fault, ...], Counter[str]]:
    """Every fault, and the count by reason: those found before the pages, then those refused.

    A duty whose task the server refuses to store is reported as a cadence
    fault: docs/contract.md#one-run fixes the fault reasons, and the detail names the problem.
    """
    faults = [
        *preamble.faults,
        *(Fault(each.duty_id, FaultReason.INVALID_CADENCE, each.detail, each.organization_id)
          for each in refused),
    ]  # fmt: skip
    counts = Counter(preamble.fault_counts)
    counts[FaultReason.INVALID_CADENCE] += len(refused)
    return tuple(faults), counts


def _skipped(preamble: _Preamble, counted: Mapping[str, int]) -> Counter[str]:
    skipped = Counter(preamble.skipped)
    for count, reason in PAGE_SKIPS.items():
        skipped[reason] += counted.get(count, 0)
    return skipped


_WAITING: Final = (_settling.SetAsideReason.LOCKED, _settling.SetAsideReason.TIMED_OUT)
