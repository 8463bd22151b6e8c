"""A stand-in for Lambda's context object, for runs outside Lambda.

Powertools reads the function's name, memory, ARN and request id from the
context to stamp every log line (``Logger.inject_lambda_context``, which
raises ``AttributeError`` on a context without them) and the cold-start
metric; the CLI, the demo and tests have no such object (or a partial one),
so they get this instead (docs/adr/0010-libraries-before-hand-rolled-code.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

LOCAL_FUNCTION_NAME: Final = "duly-dispatcher-local"
# Outside Lambda nothing stops a run, so the deadline is never near.
_NO_DEADLINE_MS: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class LocalContext:
    """The attributes of Lambda's context that the handler and Powertools read."""

    function_name: str = LOCAL_FUNCTION_NAME
    memory_limit_in_mb: int = 0
    invoked_function_arn: str = f"local:{LOCAL_FUNCTION_NAME}"
    aws_request_id: str = field(default_factory=lambda: f"local-{uuid.uuid4()}")
    remaining_ms: Callable[[], int] | None = None

    def get_remaining_time_in_millis(self) -> int:
        """The wrapped context's remaining time, or no deadline at all."""
        return _NO_DEADLINE_MS if self.remaining_ms is None else self.remaining_ms()


def as_lambda_context(context: Any) -> Any:
    """``context`` itself when it is Lambda's; otherwise a ``LocalContext`` keeping its parts.

    A partial context (a test's, with only a deadline and a request id) keeps
    that deadline and request id.
    """
    if context is not None and all(
        hasattr(context, name)
        for name in ("function_name", "memory_limit_in_mb", "invoked_function_arn")
    ):
        return context
    request_id = getattr(context, "aws_request_id", None)
    remaining: Callable[[], int] | None = getattr(context, "get_remaining_time_in_millis", None)
    if request_id is None:
        return LocalContext(remaining_ms=remaining)
    return LocalContext(aws_request_id=str(request_id), remaining_ms=remaining)
