"""One invocation of the dispatcher, with its dependencies passed in.

``handle`` translates an event into a run, and the run's report into JSON, log
lines and metrics; what a run does, how it is recorded and continued, and
what is said beside its report are the run layer's (``run.dispatch_remarked``).
``runtime_for`` builds the run's ``Runtime`` from the settings, a connection
cache, a clock and the Lambda context: ``app.lambda_handler`` from the
function's environment; the CLI, the demo and the tests from their own.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

import psycopg
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from dispatch_fn.aws import queries
from dispatch_fn.aws.events import is_query, parse_event, parse_query
from dispatch_fn.aws.lambda_context import as_lambda_context
from dispatch_fn.bounded import clip
from dispatch_fn.db import Connection
from dispatch_fn.errors import ConfigurationError, EventError
from dispatch_fn.run import (
    Clock,
    ConnectionSource,
    Deadline,
    HandOff,
    Progress,
    RunFailedError,
    RunOutcome,
    Runtime,
    continuation,
    dispatch_remarked,
    throttled,
)
from dispatch_fn.settings import Settings

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "duly-dispatcher")
# Logs go to stderr so stdout carries only EMF metrics (in Lambda) or the
# report (``python -m dispatch_fn invoke``); CloudWatch collects both streams.
# The process's own stderr, not whatever ``sys.stderr`` is replaced with later.
logger = Logger(service=SERVICE, stream=sys.__stderr__)

# A long run logs a "run progress" line at most this often (and its first and last page).
PROGRESS_EVERY_S: Final = 5.0
# Raised while opening connections: the secret, the server, the credentials.
_CONNECT_FAILURES: Final = (ConfigurationError, psycopg.Error)


class ConnectionsBySettings(Protocol):
    """Where an invocation's connections come from: ``database.ConnectionCache`` in Lambda."""

    def get(self, settings: Settings) -> list[Connection]:
        """Up to ``settings.workers`` autocommit connections, at least one."""
        ...

    def reconnect(self, settings: Settings) -> Connection:
        """A fresh autocommit connection, for one that died mid-run."""
        ...

    def discard(self) -> None:
        """Forget the connections, which a failed run may have left unusable."""
        ...


def runtime_for(
    context: Any,
    settings: Settings,
    connections: ConnectionsBySettings,
    *,
    clock: Clock,
    on_progress: Callable[[Progress], None] | None = None,
    aws_session: Any = None,
) -> Runtime:
    """The runtime of one invocation: its settings, its connections, its context's time.

    The Lambda shim and the CLI build one per invocation. ``context`` is the
    Lambda context (None from the CLI): its remaining time is the budget, its
    function ARN where a stopped run hands the rest on. ``on_progress`` hears
    of the run's progress beside the log (the CLI's progress bar).
    ``aws_session`` (a ``boto3.session.Session``; boto3's default one if
    None) makes the hand-off's Lambda client.
    """
    return Runtime(
        tuning=settings,
        budget=_Remaining(context, settings.reserve_ms, settings.statement_timeout_ms),
        connections=_Bound(connections, settings),
        hand_off=_hand_off(context, aws_session),
        on_progress=_both(_log_progress(), on_progress),
        clock=clock,
        request_id=_request_id(context),
    )


def handle(
    event: object, context: Any, runtime: Runtime, *, metrics: Metrics | None = None
) -> dict[str, Any]:
    """Run the dispatch ``event`` asks for and return its report (docs/contract.md#invocation).

    Raises ``EventError`` for a refused event, before anything is written, and
    ``RunFailedError`` for a run that failed (or ``ConfigurationError`` and
    ``psycopg.Error`` for one that could not connect); ``metrics``, when given,
    gets the run's figures (the caller flushes them). ``runtime`` is what
    ``runtime_for`` builds: it must name a connection source.
    """
    started = time.monotonic()
    connections = runtime.connections
    if connections is None:
        raise ValueError("invocation.handle needs a runtime with a connection source; got none")
    start_log_state(context)
    tuning = runtime.tuning
    if is_query(event):
        return _answer(event, runtime, connections, metrics)
    try:
        request = parse_event(
            event,
            current_time=runtime.clock(),
            max_window_days=tuning.max_window_days,
            max_duty_ids=tuning.max_duty_ids,
            interval=tuning.interval,
        )
    except EventError as refused:
        _add(metrics, "RefusedEvents", MetricUnit.Count, 1)
        logger.warning("event refused", extra={"problem": str(refused)})
        raise
    logger.append_keys(mode=request.mode, clock=request.now.isoformat(), dry_run=request.dry_run)
    if metrics is not None:
        # Beside the service-only set the alarms watch, one per mode.
        metrics.add_dimensions(service=SERVICE, mode=request.mode)
    logger.info("run started")
    try:
        conns = connections.get()
    except _CONNECT_FAILURES:
        connections.discard()
        _add(metrics, "FailedRuns", MetricUnit.Count, 1)
        logger.exception("run failed", extra={"report": None})
        raise
    if len(conns) < tuning.workers:
        logger.warning(
            "fewer connections than DISPATCH_WORKERS; the run shares its pages among those",
            extra={"connections": len(conns), "workers": tuning.workers},
        )
    try:
        outcome = dispatch_remarked(conns, request, runtime)
    except RunFailedError as failed:
        # The connection may be mid-transaction or dead; a warm retry starts clean.
        connections.discard()
        _add(metrics, "FailedRuns", MetricUnit.Count, 1)
        logger.exception("run failed", extra={"report": failed.report})
        raise
    duration_ms = round((time.monotonic() - started) * 1000)
    outcome = replace(outcome, duration_ms=duration_ms)
    if request.dry_run:
        # A dry run moves no alarm (docs/contract.md#metrics): none watches this count, and the
        # run metrics the alarms watch are real runs' alone.
        _add(metrics, "DryRuns", MetricUnit.Count, 1)
    else:
        _emit_metrics(metrics, outcome, duration_ms)
    result = outcome.as_json()
    # The explanation is the response's, not the log's: it grows with the window.
    logged = {key: value for key, value in result.items() if key != "explain"}
    logger.info("run finished", extra={"report": logged})
    return result


def _answer(
    event: Any, runtime: Runtime, connections: ConnectionSource, metrics: Metrics | None
) -> dict[str, Any]:
    """A read-only query's answer: nothing written, no run metric (docs/contract.md#queries)."""
    tuning = runtime.tuning
    try:
        query = parse_query(
            event, current_time=runtime.clock(), max_window_days=tuning.max_window_days
        )
    except EventError as refused:
        _add(metrics, "RefusedEvents", MetricUnit.Count, 1)
        logger.warning("query refused", extra={"problem": str(refused)})
        raise
    try:
        conns = connections.get()
        answered = queries.answer(
            conns[0], query, interval=tuning.interval, catch_up_days=tuning.catch_up_days
        )
    except (*_CONNECT_FAILURES, psycopg.Error):
        connections.discard()
        logger.exception("query failed", extra={"query": query.kind})
        raise
    # Not a run metric: no alarm watches it (docs/contract.md#metrics).
    _add(metrics, "QueriesAnswered", MetricUnit.Count, 1)
    logger.info("query answered", extra={"query": query.kind})
    return answered


def start_log_state(context: Any) -> None:
    """Start this invocation's log keys: its Lambda context, and none of the last one's.

    Powertools' ``inject_lambda_context(clear_state=True)`` sets them, so its
    cold-start rule (none under provisioned concurrency, as its ColdStart
    metric counts) and its per-invocation sampling hold here too. ``handle``
    is called by the CLI, the demo and tests as well as by Lambda, so the
    decorator wraps the invocation's start rather than one entry point, on a
    context that ``as_lambda_context`` completes (it reads four attributes).
    """
    logger.inject_lambda_context(_invocation_started, log_event=False, clear_state=True)(
        None, as_lambda_context(context)
    )
    logger.append_keys(request_id=_request_id(context))


def _invocation_started(_event: object, _context: object) -> None:
    """Nothing: the decorator's work is the log state it sets before calling this."""


def failed_before_run(context: Any, metrics: Metrics | None) -> None:
    """Count and log the failure being raised before an event was read (its settings)."""
    start_log_state(context)
    _add(metrics, "FailedRuns", MetricUnit.Count, 1)
    logger.exception("run failed", extra={"report": None})


def _log_progress() -> Callable[[Progress], None]:
    def log(progress: Progress) -> None:
        # A run done in one page says so in "run finished", a moment later.
        if not (progress.finished and progress.pages == 1):
            logger.info("run progress", extra=progress.as_log())

    return throttled(log, PROGRESS_EVERY_S)


def _both(
    first: Callable[[Progress], None], second: Callable[[Progress], None] | None
) -> Callable[[Progress], None]:
    if second is None:
        return first

    def report(progress: Progress) -> None:
        first(progress)
        second(progress)

    return report


def _request_id(context: Any) -> str | None:
    request_id = getattr(context, "aws_request_id", None)
    return None if request_id is None else clip(str(request_id), 200)


class _Remaining:
    """The invocation's time budget, read from the Lambda context when ``should_stop`` asks.

    The run asks before each page; a page already running is bounded by the
    last reading, less the time since (``deadline``), so the context is read
    once per page and the two answers never disagree.
    """

    def __init__(self, context: Any, reserve_ms: int, statement_timeout_ms: int) -> None:
        self._remaining: Callable[[], int] | None = getattr(
            context, "get_remaining_time_in_millis", None
        )
        self._reserve_ms = reserve_ms
        self._statement_timeout_ms = statement_timeout_ms
        self._read: tuple[int, float] | None = None  # (remaining ms, monotonic seconds)

    def should_stop(self) -> bool:
        if self._remaining is None:
            return False
        remaining = self._remaining()
        self._read = (remaining, time.monotonic())
        return remaining < self._reserve_ms

    def time_left_ms(self) -> float:
        """What is left before the run must stop: the reserve kept for the report and hand-off."""
        if self._read is None:
            return math.inf
        remaining, at = self._read
        return remaining - self._reserve_ms - (time.monotonic() - at) * 1000

    def deadline(self) -> Deadline | None:
        if self._remaining is None:
            return None
        return Deadline(self.time_left_ms, self._statement_timeout_ms)


@dataclass(frozen=True, slots=True)
class _Bound:
    """An invocation's connection source: the cache, bound to the invocation's settings."""

    cache: ConnectionsBySettings
    settings: Settings

    def get(self) -> list[Connection]:
        return self.cache.get(self.settings)

    def reconnect(self) -> Connection:
        return self.cache.reconnect(self.settings)

    def discard(self) -> None:
        self.cache.discard()


def _hand_off(context: Any, aws_session: Any) -> HandOff | None:
    # The ARN Lambda invoked (with its version or alias), so the chain stays on one code version.
    arn: str | None = getattr(context, "invoked_function_arn", None)
    if not arn:
        return None

    def send(event: dict[str, Any]) -> None:
        continuation.hand_off(continuation.lambda_client_for(arn, aws_session), arn, event)

    return send


def _add(metrics: Metrics | None, name: str, unit: MetricUnit, value: float) -> None:
    if metrics is not None:
        metrics.add_metric(name=name, unit=unit, value=value)


def _emit_metrics(metrics: Metrics | None, outcome: RunOutcome, duration_ms: int) -> None:
    report = outcome.report
    _add(metrics, "DutiesRead", MetricUnit.Count, report.duties_read)
    _add(metrics, "TasksCreated", MetricUnit.Count, report.tasks_created)
    _add(metrics, "TasksExisting", MetricUnit.Count, report.tasks_existing)
    _add(metrics, "Faults", MetricUnit.Count, report.fault_total)
    # What DegradedRunAlarm watches: the duties whose fault began in this run
    # (db.faults). A run that kept no account of them counts every fault as new.
    new_faults = report.fault_total if outcome.new_faults is None else outcome.new_faults
    _add(metrics, "NewFaults", MetricUnit.Count, new_faults)
    _add(metrics, "Degraded", MetricUnit.Count, int(report.degraded))
    # Owed again by the next run that writes (docs/contract.md#metrics): a count that keeps
    # rising says a lock holder or a slow duty never lets them through.
    _add(metrics, "SetAsideDuties", MetricUnit.Count, len(report.set_aside))
    # Only a chain that ends incomplete: a run that handed its rest on is not one.
    _add(metrics, "Incomplete", MetricUnit.Count, int(outcome.ended_incomplete))
    _add(metrics, "HandedOff", MetricUnit.Count, int(outcome.handed_off))
    _add(metrics, "DurationMs", MetricUnit.Milliseconds, duration_ms)
    # The heartbeat alarm's metric: it fires when none has been 1 for 26 hours.
    request = report.request
    heartbeat = request.mode == "scheduled" and report.complete and not request.dry_run
    _add(metrics, "ScheduledRunsCompleted", MetricUnit.Count, int(heartbeat))
