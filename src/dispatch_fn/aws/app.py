"""The Lambda entry point: ``invocation.handle`` bound to the function's environment.

Settings come from the environment on each invocation, the connections are
kept warm between invocations, and the clock is the wall clock: bound into
one ``Runtime`` per invocation, with the Lambda context's time and ARN.
"""

from __future__ import annotations

import atexit
import os
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from dispatch_fn.aws import rotation
from dispatch_fn.aws.invocation import SERVICE, failed_before_run, handle, logger, runtime_for
from dispatch_fn.aws.lambda_context import as_lambda_context
from dispatch_fn.db import Connection, ConnectionCache, connect, conninfo_with_secret
from dispatch_fn.errors import ConfigurationError
from dispatch_fn.settings import Settings

__all__ = ["lambda_handler", "metrics"]

metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Duly"), service=SERVICE)
# A warm container's connections, checked and replaced as needed on each run.
_connections = ConnectionCache()
# Lambda freezes or kills the process; a script or test that imported the
# handler exits, and its connections should close then rather than be collected.
atexit.register(_connections.discard)


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """Run the dispatch the event asks for and return its report (docs/contract.md#invocation)."""
    # Powertools' cold-start metric reads the function's name from a full context.
    report: dict[str, Any] = _published(event, as_lambda_context(context), context)
    return report


# Tracing needs no SDK here: the function's active tracing records the init and
# invocation segments (ADR 0006). Powertools' ColdStart metric ignores
# POWERTOOLS_METRICS_DISABLED, so it is asked for only when metrics are enabled.
@metrics.log_metrics(capture_cold_start_metric=not is_metrics_disabled())
def _published(event: Any, _lambda_context: Any, context: Any) -> dict[str, Any]:
    try:
        settings = Settings.from_environ(os.environ)
    except ConfigurationError:
        failed_before_run(context, metrics)
        raise
    if rotation.is_rotation(event):
        return _rotated(event, settings)
    runtime = runtime_for(context, settings, _connections, clock=lambda: datetime.now(UTC))
    return handle(event, context, runtime, metrics=metrics)


def _rotated(event: Any, settings: Settings) -> dict[str, Any]:
    """A step of the rotation of the dispatcher's secret.

    See docs/operations.md#rotating-the-dispatchers-password.
    """
    import boto3  # noqa: PLC0415 - only a rotation needs its own client

    secrets = boto3.client("secretsmanager", region_name=settings.aws_region)

    def signed_in(fields: Any) -> Connection:
        return connect(settings, conninfo_with_secret(settings, fields))

    step = str(event.get("Step"))
    try:
        done = rotation.rotate(event, secrets=secrets, connect=signed_in)
    except Exception:
        # Secrets Manager retries the step, and marks the rotation failed at last.
        logger.exception("rotation step failed", extra={"step": step})
        raise
    logger.info("rotation step", extra={"step": step, "done": done})
    # Not a run metric: no alarm watches it (docs/contract.md#metrics).
    metrics.add_metric(name="RotationSteps", unit=MetricUnit.Count, value=1)
    return {"rotation": done}
