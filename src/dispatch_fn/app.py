"""The Lambda entry point: ``invocation.handle`` bound to the function's environment.

Settings come from the environment on each invocation, the connections are
kept warm between invocations, and the clock is the wall clock.
"""

from __future__ import annotations

import atexit
import os
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Metrics, Tracer

from dispatch_fn.database import ConnectionCache
from dispatch_fn.invocation import SERVICE, handle
from dispatch_fn.settings import Settings

metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Duly"), service=SERVICE)
# Outside Lambda (tests, scripts) Powertools disables it.
tracer = Tracer(service=SERVICE)
# A warm container's connections, checked and replaced as needed on each run.
_connections = ConnectionCache()
# Lambda freezes or kills the process; a script or test that imported the
# handler exits, and its connections should close then rather than be collected.
atexit.register(_connections.discard)


@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """Run the dispatch the event asks for and return its report (SPEC §5)."""
    return handle(
        event,
        context,
        settings=Settings.from_environ(os.environ),
        connections=_connections,
        clock=lambda: datetime.now(UTC),
        metrics=metrics,
    )
