"""The Lambda entry point: an event in, a run, a JSON report out.

Only translation lives here — event to request, report to JSON and metrics;
what a run does is ``dispatch.run``'s business.
"""

from __future__ import annotations

if not __package__:  # pragma: no cover - only when Lambda loads the built artifact
    # Lambda imports this file as the top-level module ``app``: CodeUri is the
    # package directory itself. Register that directory as the ``dispatch_fn``
    # package so every module keeps its one import spelling.
    import importlib.util
    import sys
    from pathlib import Path

    _here = Path(__file__).resolve().parent
    _spec = importlib.util.spec_from_file_location(
        "dispatch_fn", _here / "__init__.py", submodule_search_locations=[str(_here)]
    )
    assert _spec is not None  # noqa: S101 - the file is beside us
    assert _spec.loader is not None  # noqa: S101
    sys.modules["dispatch_fn"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["dispatch_fn"])

import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from dispatch_fn import dispatch
from dispatch_fn.database import ConnectionCache
from dispatch_fn.errors import ConfigurationError, EventError, RunFailedError
from dispatch_fn.events import parse_event
from dispatch_fn.explain import MAX_EXPLAINED, explain
from dispatch_fn.lambda_context import as_lambda_context
from dispatch_fn.progress import Progress, throttled
from dispatch_fn.settings import Settings

_SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "duly-dispatcher")
# Logs go to stderr so stdout carries only EMF metrics (in Lambda) or the
# report (``python -m dispatch_fn invoke``); CloudWatch collects both streams.
# The process's own stderr, not whatever ``sys.stderr`` is replaced with later.
logger = Logger(service=_SERVICE, stream=sys.__stderr__)
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Duly"), service=_SERVICE
)
_connections = ConnectionCache()
# A long run logs a "run progress" line at most this often (and its first and last page).
_PROGRESS_EVERY_S = 5.0
# Raised while opening connections: the secret, the server, the credentials.
_CONNECT_FAILURES = (ConfigurationError, psycopg.Error)


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """Run the dispatch the event asks for and return its report."""
    return handle(event, context)


def handle(
    event: Any, context: Any, on_progress: Callable[[Progress], None] | None = None
) -> dict[str, Any]:
    """``lambda_handler``, also telling ``on_progress`` of each page (the CLI's progress bar)."""
    report: dict[str, Any] = _instrumented(event, as_lambda_context(context), on_progress)
    return report


# Tracing needs no SDK here: the function's active tracing records the init and
# invocation segments (ADR 0006). Lambda-context keys are cleared per invocation.
# Powertools' ColdStart metric ignores POWERTOOLS_METRICS_DISABLED, so ask for it only when enabled.
@metrics.log_metrics(capture_cold_start_metric=not is_metrics_disabled())
@logger.inject_lambda_context(clear_state=True)
def _instrumented(
    event: Any, context: Any, on_progress: Callable[[Progress], None] | None
) -> dict[str, Any]:
    started = time.monotonic()
    try:
        settings = Settings.from_environ(os.environ)
    except ConfigurationError:
        _run_failed(None)
        raise
    try:
        request = parse_event(
            event, current_time=datetime.now(UTC), max_window_days=settings.max_window_days
        )
    except EventError as refused:
        metrics.add_metric("RefusedEvents", MetricUnit.Count, 1)
        logger.warning("event refused", extra={"problem": str(refused)})
        raise
    logger.append_keys(
        mode=request.mode,
        clock=request.now.isoformat(),
        request_id=getattr(context, "aws_request_id", None),
        dry_run=request.dry_run,
    )
    metrics.add_dimensions(service=_SERVICE, mode=request.mode)
    logger.info("run started")
    log_progress = throttled(
        lambda progress: logger.info("run progress", extra=progress.as_log()), _PROGRESS_EVERY_S
    )
    try:
        conn, *helpers = _connections.get(settings)
        if len(helpers) + 1 < settings.workers:
            logger.warning(
                "fewer connections than DISPATCH_WORKERS; the run shares its pages among those",
                extra={"connections": len(helpers) + 1, "workers": settings.workers},
            )
        report = dispatch.run(
            conn,
            request,
            chunk_size=settings.chunk_size,
            should_stop=_deadline(context, settings.reserve_ms),
            helpers=helpers,
            on_progress=_both(log_progress, on_progress),
        )
    except (RunFailedError, *_CONNECT_FAILURES) as failed:
        _run_failed(failed.report if isinstance(failed, RunFailedError) else None)
        raise
    result = report.as_json()
    duty_ids = request.scope.duty_ids
    if request.dry_run and duty_ids is not None and len(duty_ids) <= MAX_EXPLAINED:
        # A console user's "why": the planner's verdict per candidate period.
        result["explain"] = explain(conn, duty_ids, request.now, request.window)
    result["duration_ms"] = round((time.monotonic() - started) * 1000)
    _emit_metrics(result)
    logger.info("run finished", extra={"report": result})
    return result


def _run_failed(so_far: dict[str, object] | None) -> None:
    """Count and log the failure being raised, with the report so far if pages ran."""
    # The connection may be mid-transaction or dead; a warm retry starts clean.
    _connections.discard()
    metrics.add_metric("FailedRuns", MetricUnit.Count, 1)
    logger.exception("run failed", extra={"report": so_far})


def _both(
    first: Callable[[Progress], None], second: Callable[[Progress], None] | None
) -> Callable[[Progress], None]:
    if second is None:
        return first

    def report(progress: Progress) -> None:
        first(progress)
        second(progress)

    return report


def _deadline(context: Any, reserve_ms: int) -> Callable[[], bool]:
    remaining: Callable[[], int] | None = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return lambda: False
    return lambda: remaining() < reserve_ms


def _emit_metrics(result: dict[str, Any]) -> None:
    metrics.add_metric("DutiesRead", MetricUnit.Count, result["duties_read"])
    metrics.add_metric("TasksCreated", MetricUnit.Count, result["tasks_created"])
    metrics.add_metric("TasksExisting", MetricUnit.Count, result["tasks_existing"])
    metrics.add_metric("Faults", MetricUnit.Count, sum(result["fault_counts"].values()))
    metrics.add_metric("Degraded", MetricUnit.Count, int(result["degraded"]))
    metrics.add_metric("Incomplete", MetricUnit.Count, int(not result["complete"]))
    metrics.add_metric("DurationMs", MetricUnit.Milliseconds, result["duration_ms"])
    # The heartbeat alarm's metric: it fires when none has been 1 for 26 hours.
    heartbeat = result["mode"] == "scheduled" and result["complete"] and not result["dry_run"]
    metrics.add_metric("ScheduledRunsCompleted", MetricUnit.Count, int(heartbeat))
