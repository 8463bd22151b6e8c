"""Self-continuation: a run stopped by its deadline hands the rest on.

See docs/contract.md#continuation.

The hand-off is an asynchronous invocation of the same function (and the same
version or alias: the ARN Lambda says it invoked) with the same clock, window
and scope, plus ``resume_after`` and the next ``continuation`` number. The
chain is bounded, so a bug can never keep a function invoking itself.
"""

from __future__ import annotations

import json
from typing import Any, Final, Protocol

from dispatch_fn.bounded import MAX_EVENT_BYTES
from dispatch_fn.errors import HandOffError
from dispatch_fn.planning import RunRequest
from dispatch_fn.run._agenda import STOPPED_BY_DEADLINE, STOPPED_BY_TIMEOUTS
from dispatch_fn.run.outcome import RunReport
from dispatch_fn.settings import MAX_TIMEOUTS_PER_RUN

MAX_CONTINUATIONS: Final = 20
# A hand-off is one small asynchronous invoke that Lambda accepts in
# milliseconds. Without a route to the Lambda API (no interface endpoint, no
# NAT) botocore's defaults would wait a minute per attempt over five attempts;
# these make the run end incomplete, saying why, within seconds instead.
HAND_OFF_CONNECT_TIMEOUT_S: Final = 3
HAND_OFF_READ_TIMEOUT_S: Final = 10
HAND_OFF_ATTEMPTS: Final = 2


class LambdaClient(Protocol):
    """The one call of boto3's Lambda client a hand-off makes."""

    def invoke(self, **kwargs: Any) -> Any:
        """``lambda:Invoke``."""
        ...


def not_handed_off(request: RunRequest, report: RunReport) -> str | None:
    """Why the incomplete run ``report`` must end its chain here; None if it may hand off.

    Only a deadline stop that moved the gapless mark hands off (docs/contract.md#continuation): a
    run stopped by statement timeouts would meet them again, and one whose
    mark did not move would hand the same work on, up to twenty times.
    """
    if report.stopped_by == STOPPED_BY_TIMEOUTS:
        return (
            f"stopped after {MAX_TIMEOUTS_PER_RUN} statements ran past statement_timeout "
            "(DB_STATEMENT_TIMEOUT_MS), all a run may spend; the next run goes on from its "
            "gapless mark: raise the timeout, or lower DISPATCH_PAGE_ROWS or "
            "DISPATCH_CHUNK_SIZE, if runs keep stopping here"
        )
    if report.stopped_by != STOPPED_BY_DEADLINE:
        return f"stopped by {report.stopped_by!r}; only a deadline stop hands off"
    # The mark is None until the first range moved past its lower bound.
    if report.last_duty_id is None:
        return (
            f"stopped by its deadline before its gapless mark moved past "
            f"{request.resume_after!r}: a continuation would start where this run did, "
            "so none is sent"
        )
    return None


def next_event(request: RunRequest, report: RunReport) -> dict[str, Any]:
    """The event of the run that continues ``request`` from where ``report`` stopped.

    Raises ``HandOffError`` when that run would exceed ``MAX_CONTINUATIONS``.
    """
    if report.last_duty_id is None:
        raise HandOffError("a run that dispatched nothing has nothing to hand on")
    following = request.continuation + 1
    if following > MAX_CONTINUATIONS:
        raise HandOffError(
            f"continuation {following} would exceed the bound of {MAX_CONTINUATIONS}; "
            f"the chain stops at duty id {report.last_duty_id!r}"
        )
    # The clock travels as "now": the continuation replays this run's clock,
    # whatever envelope this run came in.
    event: dict[str, Any] = {
        "now": request.now.isoformat(),
        "continuation": following,
        "resume_after": report.last_duty_id,
    }
    if request.window is not None:
        event["from"] = request.window.from_date.isoformat()
        if request.window.to_date is not None:
            event["to"] = request.window.to_date.isoformat()
    if request.dry_run:
        event["dry_run"] = True
    if request.scope.organization_id is not None:
        event["organization_id"] = request.scope.organization_id
    if request.scope.duty_ids is not None:
        event["duty_ids"] = list(request.scope.duty_ids)
    # The event parser refuses a scope that would not fit (events.MAX_SCOPE_BYTES):
    # this is the last check, not the first.
    size = len(json.dumps(event).encode("utf-8"))
    if size > MAX_EVENT_BYTES:
        raise HandOffError(
            f"the continuation's event is {size} bytes; an asynchronous invocation takes at "
            f"most {MAX_EVENT_BYTES}: scope the run by organization_id, or fewer duty_ids"
        )
    return event


def hand_off(client: LambdaClient, function_arn: str, event: dict[str, Any]) -> None:
    """Invoke ``function_arn`` asynchronously with ``event``; raise ``HandOffError`` if refused."""
    from botocore.exceptions import (  # noqa: PLC0415 - AWS path only
        BotoCoreError,
        ClientError,
        ReadTimeoutError,
    )
    from botocore.exceptions import (  # noqa: PLC0415
        ConnectionError as UnreachableError,  # connect timeouts and refused connections too
    )

    try:
        response = client.invoke(
            FunctionName=function_arn,
            InvocationType="Event",
            Payload=json.dumps(event).encode("utf-8"),
        )
    except (UnreachableError, ReadTimeoutError) as exc:
        raise HandOffError(
            f"invoking {function_arn!r} failed: the Lambda API did not answer ({exc}); the "
            "function's subnets need a route to it: a Lambda interface endpoint "
            "(NetworkRoutes=endpoints) or a NAT gateway (docs/deploy.md)"
        ) from exc
    except (BotoCoreError, ClientError) as exc:
        raise HandOffError(f"invoking {function_arn!r} failed: {exc}") from exc
    status = response.get("StatusCode")
    if status != 202:  # Lambda's "accepted" for an Event invocation
        raise HandOffError(f"invoking {function_arn!r} answered status {status!r}; expected 202")


def lambda_client_for(function_arn: str, session: Any = None) -> LambdaClient:
    """A boto3 Lambda client in the function's own region (from its ARN).

    From ``session`` (a ``boto3.session.Session``), else boto3's default one.
    """
    import boto3  # noqa: PLC0415 - only a run that hands off needs it
    from botocore.config import Config  # noqa: PLC0415

    parts = function_arn.split(":")
    if len(parts) < 7 or parts[2] != "lambda":  # arn:partition:lambda:region:...
        raise HandOffError(f"{function_arn!r} is not a Lambda function ARN")
    config = Config(
        connect_timeout=HAND_OFF_CONNECT_TIMEOUT_S,
        read_timeout=HAND_OFF_READ_TIMEOUT_S,
        retries={"total_max_attempts": HAND_OFF_ATTEMPTS, "mode": "standard"},
    )
    clients = boto3 if session is None else session
    client: LambdaClient = clients.client("lambda", region_name=parts[3], config=config)
    return client
