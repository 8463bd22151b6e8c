"""One invocation as the ledger sees it: recorded, caught up, continued (SPEC §9).

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

from dispatch_fn import catch_up, continuation, dispatch, ledger
from dispatch_fn.errors import RunFailedError
from dispatch_fn.store import Connection

type HandOff = Callable[[dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Options:
    """How the function is configured to run (from ``Settings``)."""

    chunk_size: int = dispatch.DEFAULT_CHUNK_SIZE
    catch_up_days: int = catch_up.DEFAULT_CATCH_UP_DAYS


def execute(
    conns: Sequence[Connection],
    request: dispatch.RunRequest,
    *,
    options: Options,
    request_id: str | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    hand_off: HandOff | None = None,
) -> dict[str, Any]:
    """Run ``request`` on ``conns`` (autocommit), recorded in the ledger; return the report.

    ``hand_off`` sends a continuation's event; without one (a local run) an
    incomplete run simply ends incomplete.
    """
    conn, *helpers = conns
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
    try:
        report = dispatch.run(
            conn,
            request,
            chunk_size=options.chunk_size,
            should_stop=should_stop,
            helpers=helpers,
            catch_up_clocks=clocks,
        )
    except RunFailedError as failed:
        failed.report["run_id"] = run_id
        _record_failure(conn, run_id, failed.report, str(failed))
        raise
    result = report.as_json()
    result["run_id"] = run_id
    result["continuation"] = request.continuation
    result["handed_off"] = False
    result["hand_off_error"] = None
    if not report.complete and hand_off is not None:
        try:
            hand_off(continuation.next_event(request, report))
            result["handed_off"] = True
        except continuation.HandOffError as refused:
            result["hand_off_error"] = str(refused)
    ledger.finish(conn, run_id, "completed" if report.complete else "incomplete", result)
    return result


def _unscoped(request: dispatch.RunRequest) -> bool:
    return request.scope.organization_id is None and request.scope.duty_ids is None


def _record_failure(conn: Connection, run_id: int, report: dict[str, Any], error: str) -> None:
    try:
        ledger.finish(conn, run_id, "failed", report, error)
    except psycopg.Error:
        # The failure may have been the connection itself; the row then stays
        # 'running' and reads as abandoned once the function's timeout passes.
        return
