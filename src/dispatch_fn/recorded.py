"""One run as the ledger sees it: recorded, caught up, continued (SPEC §9).

Around ``dispatch.run``: a ledger row before the first page and after the
last; the missed clocks a scheduled run catches up; the hand-off of a run its
deadline stopped. The handler and the CLI call this with their own
connections, clock budget and Lambda client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
        report = dispatch.run(
            conns,
            request,
            chunk_size=options.chunk_size,
            page_rows=options.page_rows,
            should_stop=should_stop,
            deadline=deadline,
            reconnect=reconnect,
            catch_up_clocks=clocks,
            on_progress=on_progress,
        )
    except RunFailedError as failed:
        failed.report["run_id"] = run_id
        _record_failure(conn, run_id, failed.report, str(failed))
        raise
    except KeyboardInterrupt:
        # Ctrl-C on a local run: ended, not abandoned for the function's timeout.
        # Its committed pages stay; a re-run owes the rest (SPEC §9 has no
        # status of its own for this).
        _record_failure(conn, run_id, {"complete": False, "run_id": run_id}, "interrupted")
        raise
    result = report.as_json()
    result["run_id"] = run_id
    result["continuation"] = request.continuation
    result["resume_after"] = request.resume_after
    result["handed_off"] = False
    result["hand_off_error"] = None
    if report.complete or hand_off is None:
        _record_end(conn, run_id, "completed" if report.complete else "incomplete", result)
        return result
    # Recorded before the hand-off: the continuation finds the run it continues
    # by this row's final report, and may start within milliseconds.
    try:
        following = continuation.next_event(request, report)
    except continuation.HandOffError as refused:
        result["hand_off_error"] = str(refused)
        _record_end(conn, run_id, "incomplete", result)
        return result
    _record_end(conn, run_id, "incomplete", {**result, "handed_off": True})
    try:
        hand_off(following)
    except continuation.HandOffError as refused:
        result["hand_off_error"] = str(refused)
        _record_end(conn, run_id, "incomplete", result)
        return result
    result["handed_off"] = True
    return result


def _unscoped(request: dispatch.RunRequest) -> bool:
    return request.scope.organization_id is None and request.scope.duty_ids is None


def _record_end(conn: Connection, run_id: int, status: str, result: dict[str, Any]) -> None:
    try:
        ledger.finish(conn, run_id, status, result)
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
