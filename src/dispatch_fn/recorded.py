"""One run as the ledger sees it: recorded, caught up, continued (SPEC §9).

Around ``dispatch.run``: a ledger row before the first page and after the
last; the missed clocks a scheduled run catches up; the hand-off of a run its
deadline stopped. The handler and the CLI call this with their own
connections, clock budget and Lambda client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from dispatch_fn import catch_up, continuation, dispatch, ledger, settings
from dispatch_fn._pages import Deadline
from dispatch_fn._sql import Connection
from dispatch_fn.errors import RunFailedError
from dispatch_fn.progress import Progress

type HandOff = Callable[[dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Options:
    """How the function is configured to run (from ``Settings``)."""

    chunk_size: int = dispatch.DEFAULT_CHUNK_SIZE
    page_rows: int | None = dispatch.DEFAULT_PAGE_ROWS
    catch_up_days: int = settings.DEFAULT_CATCH_UP_DAYS


def execute(
    conns: Sequence[Connection],
    request: dispatch.RunRequest,
    *,
    options: Options,
    request_id: str | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    deadline: Deadline | None = None,
    hand_off: HandOff | None = None,
    reconnect: Callable[[], Connection] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> dict[str, Any]:
    """Run ``request`` on ``conns`` (autocommit), recorded in the ledger; return the report.

    ``hand_off`` sends a continuation's event; without one (a local run) an
    incomplete run simply ends incomplete.
    """
    conn = conns[0]
    if not all(each.autocommit for each in conns):
        # The ledger's rows must commit on their own, never with a page's.
        raise ValueError("recorded.execute needs autocommit connections: each write commits alone")
    try:
        clocks: tuple[Any, ...] = ()
        if request.mode == "scheduled" and not request.dry_run and _unscoped(request):
            clocks = catch_up.missed_clocks(
                ledger.latest_completed_clock(conn), request.now, options.catch_up_days
            )
        run_id = ledger.start(
            conn,
            request,
            request_id=request_id,
            continues_run=ledger.continued_run(conn, request),
        )
    except psycopg.Error as exc:
        raise RunFailedError(
            f"run not started: the run ledger is unreachable: {type(exc).__name__}: {exc}",
            {"complete": False, "run_id": None},
        ) from exc
    try:
        # A question about the duties in scope, not the ledger alone: its
        # failure is the run's, recorded as a run that failed before its pages.
        owed = None if request.dry_run else _owed_again(conn, request, options.catch_up_days)
    except psycopg.Error as exc:
        failed = dispatch.failed_before_pages(request, exc)
        failed.report["run_id"] = run_id
        _record_failure(conn, run_id, failed.report, str(failed))
        raise failed from exc
    try:
        report = dispatch.run(
            conns,
            request,
            chunk_size=options.chunk_size,
            page_rows=options.page_rows,
            should_stop=should_stop,
            deadline=deadline,
            reconnect=reconnect,
            catch_up_clocks=clocks,
            owed_again=owed,
            on_progress=on_progress,
        )
    except RunFailedError as failed:
        failed.report["run_id"] = run_id
        if not request.dry_run and failed.set_aside:
            # The pages it committed set these aside: owed again like any others.
            with suppress(psycopg.Error):
                ledger.record_set_aside(
                    conn, run_id, failed.set_aside, owed_from=_owed_from(request, clocks)
                )
        _record_failure(conn, run_id, failed.report, str(failed))
        raise
    except KeyboardInterrupt:
        # Ctrl-C on a local run: ended, not abandoned for the function's timeout.
        # Its committed pages stay; a re-run owes the rest (SPEC §9 has no
        # status of its own for this).
        _record_failure(conn, run_id, {"complete": False, "run_id": run_id}, "interrupted")
        raise
    return _ended(conn, run_id, report, clocks, owed=owed, hand_off=hand_off)


def _ended(
    conn: Connection,
    run_id: int,
    report: dispatch.RunReport,
    clocks: tuple[datetime, ...],
    *,
    owed: catch_up.OwedAgain | None,
    hand_off: HandOff | None,
) -> dict[str, Any]:
    """Record how the run ended, and hand the rest on if it stopped for its deadline."""
    request = report.request
    result = report.as_json()
    result["run_id"] = run_id
    result["continuation"] = request.continuation
    result["resume_after"] = request.resume_after
    result["handed_off"] = False
    result["hand_off_error"] = None
    result["incomplete_reason"] = None
    if not request.dry_run:
        _record_set_aside(conn, run_id, report, (owed, _owed_from(request, clocks)), result)
    if report.complete:
        _record_end(conn, run_id, "completed", result)
        return result
    result["incomplete_reason"] = continuation.not_handed_off(request, report)
    if result["incomplete_reason"] is None and hand_off is None:
        result["incomplete_reason"] = (
            f"stopped by its deadline at duty id {report.last_duty_id!r}; a local run hands "
            "nothing off: run the same event again with resume_after to go on"
        )
    if result["incomplete_reason"] is not None or hand_off is None:
        _record_end(conn, run_id, "incomplete", result)
        return result
    # Recorded before the hand-off: the continuation finds the run it continues
    # by this row's final report, and may start within milliseconds.
    try:
        following = continuation.next_event(request, report)
    except continuation.HandOffError as refused:
        return _not_handed(conn, run_id, result, refused)
    _record_end(conn, run_id, "incomplete", {**result, "handed_off": True})
    try:
        hand_off(following)
    except continuation.HandOffError as refused:
        return _not_handed(conn, run_id, result, refused)
    result["handed_off"] = True
    return result


def _not_handed(
    conn: Connection, run_id: int, result: dict[str, Any], refused: continuation.HandOffError
) -> dict[str, Any]:
    result["hand_off_error"] = result["incomplete_reason"] = str(refused)
    _record_end(conn, run_id, "incomplete", result)
    return result


def _owed_again(
    conn: Connection, request: dispatch.RunRequest, catch_up_days: int
) -> catch_up.OwedAgain | None:
    """What earlier runs' set-aside duties in scope are owed by this run (SPEC §9)."""
    found = ledger.owed_again(conn, request.scope)
    return catch_up.OwedAgain.of(found, request.now, days=catch_up_days, interval=request.interval)


def _owed_from(request: dispatch.RunRequest, clocks: tuple[datetime, ...]) -> datetime:
    # A duty set aside misses the clocks its run caught up as well as its own.
    return min((*clocks, request.now))


def _record_set_aside(
    conn: Connection,
    run_id: int,
    report: dispatch.RunReport,
    owing: tuple[catch_up.OwedAgain | None, datetime],
    result: dict[str, Any],
) -> None:
    """Keep this run's set-aside duties, and mark what it repaid; before its ledger row ends.

    ``owing`` is what the run owed earlier set-aside duties, and the first
    clock it owed its own.
    """
    owed, owed_from = owing
    try:
        ledger.record_set_aside(conn, run_id, report.set_aside_pairs, owed_from=owed_from)
        if owed is not None:
            ledger.mark_repaid(
                conn,
                run_id,
                owed.set_aside,
                again=report.set_aside_ids,
                upto=report.last_duty_id,
                complete=report.complete,
            )
    except psycopg.Error as exc:
        # The tasks are written; what is lost is the record of who is owed
        # again, so the run fails loudly rather than end quietly with a hole.
        failed = RunFailedError(
            f"run {run_id} finished but the duties it set aside could not be recorded: "
            f"{type(exc).__name__}: {exc}",
            result,
        )
        _record_failure(conn, run_id, result, str(failed))
        raise failed from exc


def _unscoped(request: dispatch.RunRequest) -> bool:
    return request.scope.organization_id is None and request.scope.duty_ids is None


def _record_end(conn: Connection, run_id: int, status: str, result: dict[str, Any]) -> None:
    try:
        # An incomplete run's reason is the row's error: `runs` shows it.
        ledger.finish(conn, run_id, status, result, result.get("incomplete_reason"))
    except psycopg.Error as exc:
        # Every page is committed; only the record of it is missing (the row
        # stays 'running'). Raised so the handler starts its next run on fresh
        # connections and the failure is seen.
        raise RunFailedError(
            f"run {run_id} finished ({status}) but its ledger row could not be written: "
            f"{type(exc).__name__}: {exc}",
            result,
        ) from exc


def _record_failure(conn: Connection, run_id: int, report: dict[str, Any], error: str) -> None:
    try:
        ledger.finish(conn, run_id, "failed", report, error)
    except psycopg.Error:
        # The failure may have been the connection itself; the row then stays
        # 'running' and reads as abandoned once the function's timeout passes.
        return
