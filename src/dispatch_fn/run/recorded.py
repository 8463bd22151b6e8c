"""One run as the ledger sees it: recorded and continued (docs/contract.md#ledger).

Around ``dispatch``: a ledger row before the first page and after the
last, with the duties it set aside; the hand-off of a run its deadline
stopped; the faults it keeps on the duties' account (db.faults,
docs/contract.md#metrics). The handler and the CLI call this with the runtime
they built: its budget, its hand-off, its tuning.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import replace
from datetime import datetime
from typing import Any

import psycopg

from dispatch_fn.db import Connection, faults, ledger
from dispatch_fn.errors import HandOffError
from dispatch_fn.planning import RunRequest, origin_clock
from dispatch_fn.run import _rules, continuation
from dispatch_fn.run._dispatch import dispatch
from dispatch_fn.run.errors import RunFailedError
from dispatch_fn.run.outcome import Ending, RunOutcome, RunReport, unreported
from dispatch_fn.run.runtime import LOCAL, HandOff, Runtime


def dispatch_recorded(
    conns: Sequence[Connection], request: RunRequest, runtime: Runtime = LOCAL
) -> RunOutcome:
    """Run ``request`` on ``conns`` (autocommit), recorded in the ledger; return how it ended.

    Without a hand-off in ``runtime`` (a local run) an incomplete run simply
    ends incomplete.
    """
    conn = conns[0]
    if not all(each.autocommit for each in conns):
        # The ledger's rows must commit on their own, never with a page's.
        raise ValueError("dispatch_recorded needs autocommit connections: each write commits alone")
    try:
        # The latest clock dispatched: whether this run's pages find their
        # rows present from the first (a re-run).
        dispatched: datetime | None = None
        if request.mode == "scheduled" and not request.dry_run and not request.scope.named:
            dispatched = ledger.latest_completed_clock(conn)
        # Rules that changed since the previous run (a new tz or holidays
        # release, or new owed rules) move what is owed without touching a
        # row: this run judges every account it reads afresh, or, the rules
        # the same, those the previous run set aside while it judged them so.
        wall_clock = runtime.clock()
        judged_by = runtime.rules()
        afresh = _rules.afresh(ledger.previous_judgement(conn), judged_by)
        request = replace(request, scope=replace(request.scope, afresh=afresh))
        origin = origin_clock(ledger.earliest_clock(conn), request.now, request.interval)
        # The next days a run reads by were judged at the latest clock: a run
        # at an earlier one (a manual run at a past clock) reads every duty.
        latest = ledger.latest_scheduled_clock(conn)
        reads_owed_only = latest is None or request.now >= latest
        run_id = ledger.start(
            conn,
            request,
            request_id=runtime.request_id,
            continues_run=ledger.continued_run(conn, request),
            rules=judged_by,
            # The one wall clock: the run keeps accounts, and the trigger
            # counts it as the latest clock, by the same judgement (a clock
            # read from the function's time may run ahead of the server's).
            started_at=wall_clock,
        )
    except psycopg.Error as exc:
        raise RunFailedError(
            f"run not started: the run ledger is unreachable: {type(exc).__name__}: {exc}", None
        ) from exc
    try:
        report = dispatch(
            conns,
            request,
            runtime,
            dispatched_clock=dispatched,
            origin=origin,
            # A manual run at a future clock is never the clock an account
            # stands at (as the ledger never counts it as the latest clock).
            keeps_accounts=request.now <= wall_clock,
            reads_owed_only=reads_owed_only,
        )
    except RunFailedError as failed:
        recorded_failure = _recorded(failed, run_id)
        if not request.dry_run and failed.outcome is not None:
            # The pages it committed set these aside: the ledger keeps who they were.
            with suppress(psycopg.Error):
                _keep_set_aside(conn, run_id, failed.outcome.report)
        _record_failure(conn, run_id, recorded_failure.report, str(recorded_failure))
        raise recorded_failure from failed.__cause__
    except KeyboardInterrupt:
        # Ctrl-C on a local run: ended, not abandoned for the function's timeout.
        # Its committed pages stay; a re-run owes the rest. The ledger gives it
        # no status of its own: failed, error 'interrupted' (docs/contract.md#ledger).
        _record_failure(conn, run_id, unreported(run_id), "interrupted")
        raise
    ended = _end_recorded(conn, RunOutcome(report, run_id), hand_off=runtime.hand_off)
    if request.dry_run:
        return ended
    # Kept once the ledger row has ended: a run that cannot end its row fails,
    # and its retry must still find these faults new; a run lost between the
    # two only leaves them to be counted new once more, never hides one. A
    # continuation already handed on judges the duties past this run's mark
    # only, so the two never remove each other's rows.
    return replace(ended, new_faults=faults.record(conn, run_id, _fault_judgement(report)))


def _fault_judgement(report: RunReport) -> faults.Judged:
    """What the run found of the duties in its scope, as the fault account keeps it."""
    request = report.request
    return faults.Judged(
        clock=request.now,
        scope=request.scope,
        faults=report.faults,
        complete=report.complete,
        upto=report.last_duty_id,
        # Left out of their page (locked, timed out, edited): the run did not judge them.
        set_aside=report.set_aside,
    )


def _recorded(failed: RunFailedError, run_id: int) -> RunFailedError:
    """The same failure, its outcome that of ledger row ``run_id``."""
    if failed.outcome is None:
        return failed
    return RunFailedError(str(failed), replace(failed.outcome, run_id=run_id))


def _end_recorded(
    conn: Connection,
    outcome: RunOutcome,
    *,
    hand_off: HandOff | None,
) -> RunOutcome:
    """Record how the run ended, and hand the rest on if it stopped for its deadline."""
    report, run_id = outcome.report, outcome.run_id
    assert run_id is not None  # noqa: S101 - a recorded run has its ledger row
    request = report.request
    ended = replace(outcome, ending=Ending())
    if not request.dry_run:
        _record_set_aside(conn, ended)
    if report.complete:
        _record_end(conn, "completed", ended)
        return ended
    reason = continuation.not_handed_off(request, report)
    if reason is None and hand_off is None:
        reason = (
            f"stopped by its deadline at duty id {report.last_duty_id!r}; a local run hands "
            "nothing off: run the same event again with resume_after to go on"
        )
    if reason is not None or hand_off is None:
        stopped = replace(ended, ending=Ending(incomplete_reason=reason))
        _record_end(conn, "incomplete", stopped)
        return stopped
    # Recorded before the hand-off: the continuation finds the run it continues
    # by this row's final report, and may start within milliseconds.
    try:
        following = continuation.next_event(request, report)
    except HandOffError as refused:
        return _not_handed(conn, ended, refused)
    handed = replace(ended, ending=Ending(handed_off=True))
    _record_end(conn, "incomplete", handed)
    try:
        hand_off(following)
    except HandOffError as refused:
        return _not_handed(conn, ended, refused)
    return handed


def _not_handed(conn: Connection, outcome: RunOutcome, refused: HandOffError) -> RunOutcome:
    why = str(refused)
    ended = replace(outcome, ending=Ending(hand_off_error=why, incomplete_reason=why))
    _record_end(conn, "incomplete", ended)
    return ended


def _record_set_aside(conn: Connection, outcome: RunOutcome) -> None:
    """Keep this run's set-aside duties in the ledger, before its row ends."""
    report, run_id = outcome.report, outcome.run_id
    assert run_id is not None  # noqa: S101 - a recorded run has its ledger row
    try:
        _keep_set_aside(conn, run_id, report)
    except psycopg.Error as exc:
        # The tasks are written and the duties' accounts still owe what was
        # set aside; what is lost is the record of who was, so the run fails
        # loudly rather than end quietly with a hole in the ledger.
        failed = RunFailedError(
            f"run {run_id} finished but the duties it set aside could not be recorded: "
            f"{type(exc).__name__}: {exc}",
            outcome,
        )
        _record_failure(conn, run_id, failed.report, str(failed))
        raise failed from exc


def _keep_set_aside(conn: Connection, run_id: int, report: RunReport) -> None:
    """The ledger's record of the duties ``report`` set aside, and whom its run judged afresh."""
    ledger.record_set_aside(
        conn,
        run_id,
        report.set_aside_rows,
        owed_from=report.request.now,
        afresh=report.request.scope.afresh,
        judged_at=report.request.scope.afresh.owed_at,
    )


def _record_end(conn: Connection, status: str, outcome: RunOutcome) -> None:
    run_id = outcome.run_id
    assert run_id is not None  # noqa: S101 - a recorded run has its ledger row
    reason = None if outcome.ending is None else outcome.ending.incomplete_reason
    try:
        # An incomplete run's reason is the row's error: `runs` shows it.
        ledger.finish(conn, run_id, status, outcome.as_json(), reason)
    except psycopg.Error as exc:
        # Every page is committed; only the record of it is missing (the row
        # stays 'running'). Raised so the handler starts its next run on fresh
        # connections and the failure is seen.
        raise RunFailedError(
            f"run {run_id} finished ({status}) but its ledger row could not be written: "
            f"{type(exc).__name__}: {exc}",
            outcome,
        ) from exc


def _record_failure(conn: Connection, run_id: int, report: dict[str, Any], error: str) -> None:
    try:
        ledger.finish(conn, run_id, "failed", report, error)
    except psycopg.Error:
        # The failure may have been the connection itself; the row then stays
        # 'running' and reads as abandoned once the function's timeout passes.
        return
