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

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from dispatch_fn import continuation, invocation
from dispatch_fn.database import ConnectionCache, connect
from dispatch_fn.errors import EventError, RunFailedError
from dispatch_fn.events import parse_event
from dispatch_fn.explain import MAX_EXPLAINED, explain
from dispatch_fn.settings import Settings

_SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "duly-dispatcher")
# Logs go to stderr so stdout carries only EMF metrics (in Lambda) or the
# report (``python -m dispatch_fn invoke``); CloudWatch collects both streams.
# The process's own stderr, not whatever ``sys.stderr`` is replaced with later.
logger = Logger(service=_SERVICE, stream=sys.__stderr__)
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Duly"), service=_SERVICE
)
# Outside Lambda (tests, `python -m dispatch_fn invoke`) Powertools disables it.
tracer = Tracer(service=_SERVICE)
_connections = ConnectionCache()


@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """Run the dispatch the event asks for and return its report."""
    started = time.monotonic()
    settings = Settings.from_environ(os.environ)
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
    logger.info("run started")
    conns = _connections.get(settings)
    if len(conns) < settings.workers:
        logger.warning(
            "fewer connections than DISPATCH_WORKERS; the run shares its pages among those",
            extra={"connections": len(conns), "workers": settings.workers},
        )
    try:
        result = invocation.execute(
            conns,
            request,
            options=invocation.Options(settings.chunk_size, settings.catch_up_days),
            request_id=getattr(context, "aws_request_id", None),
            should_stop=_deadline(context, settings.reserve_ms),
            hand_off=_hand_off(context),
            reconnect=lambda: connect(settings),
        )
    except RunFailedError as failed:
        # The connection may be mid-transaction or dead; a warm retry starts clean.
        _connections.discard()
        metrics.add_metric("FailedRuns", MetricUnit.Count, 1)
        logger.exception("run failed", extra={"report": failed.report})
        raise
    duty_ids = request.scope.duty_ids
    if request.dry_run and duty_ids is not None and len(duty_ids) <= MAX_EXPLAINED:
        # A console user's "why": the planner's verdict per candidate period.
        result["explain"] = explain(conns[0], duty_ids, request.now, request.window)
    result["duration_ms"] = round((time.monotonic() - started) * 1000)
    _emit_metrics(result)
    logger.info("run finished", extra={"report": result})
    return result


def _deadline(context: Any, reserve_ms: int) -> Callable[[], bool]:
    remaining: Callable[[], int] | None = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return lambda: False
    return lambda: remaining() < reserve_ms


def _hand_off(context: Any) -> invocation.HandOff | None:
    # The ARN Lambda invoked (with its version or alias), so the chain stays on one code version.
    arn: str | None = getattr(context, "invoked_function_arn", None)
    if not arn:
        return None

    def send(event: dict[str, Any]) -> None:
        continuation.hand_off(continuation.lambda_client_for(arn), arn, event)

    return send


def _emit_metrics(result: dict[str, Any]) -> None:
    metrics.add_metric("DutiesRead", MetricUnit.Count, result["duties_read"])
    metrics.add_metric("TasksCreated", MetricUnit.Count, result["tasks_created"])
    metrics.add_metric("TasksExisting", MetricUnit.Count, result["tasks_existing"])
    metrics.add_metric("Faults", MetricUnit.Count, sum(result["fault_counts"].values()))
    metrics.add_metric("Degraded", MetricUnit.Count, int(result["degraded"]))
    # Only a chain that ends incomplete: a run that handed its rest on is not one.
    ended_incomplete = not result["complete"] and not result["handed_off"]
    metrics.add_metric("Incomplete", MetricUnit.Count, int(ended_incomplete))
    metrics.add_metric("HandedOff", MetricUnit.Count, int(result["handed_off"]))
    metrics.add_metric("DurationMs", MetricUnit.Milliseconds, result["duration_ms"])
    # The heartbeat alarm's metric: it fires when none has been 1 for 26 hours.
    heartbeat = result["mode"] == "scheduled" and result["complete"] and not result["dry_run"]
    metrics.add_metric("ScheduledRunsCompleted", MetricUnit.Count, int(heartbeat))
