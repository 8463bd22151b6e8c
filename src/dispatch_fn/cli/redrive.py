"""``python -m dispatch_fn redrive QUEUE_URL...``: re-invoke what failed, and drain the queue.

Two queues hold what did not run (docs/operations.md#the-failure-queues):

- the failed-run queue holds Lambda's destination records: the event is the
  record's ``requestPayload``, the function its ``requestContext.functionArn``
  (with the version or alias it was invoked as) and the error its
  ``responsePayload``;
- the schedule's dead-letter queue holds the schedule's own payload as the
  message body, with the target in the ``TARGET_ARN`` attribute and the error
  in ``ERROR_CODE`` and ``ERROR_MESSAGE``.

A dry run (the default) lists each message and what would be invoked, and
leaves the queue as it was. With ``--execute`` each event is invoked again,
asynchronously as the schedule invokes it (a retried run replays its own
clock, and the run is idempotent), and its message deleted once Lambda has
accepted the invocation; a message that cannot be read or invoked stays.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from botocore.exceptions import BotoCoreError, ClientError

from dispatch_fn.bounded import clip

# Seconds a received message stays hidden while this command decides about it.
_HIDDEN_S: Final = 120
# The most messages one call reads; a queue holding more is drained all the same.
_BATCH: Final = 10
# A bound on one command's work: the queues keep 14 days of one run a day, so
# more than this means something else is filling them.
MAX_MESSAGES: Final = 1000
# Lambda's answer to an accepted asynchronous invocation.
_ACCEPTED: Final = 202

type Source = Literal["failed-run record", "schedule dead letter", "unreadable"]


@dataclass(frozen=True, slots=True)
class Failed:
    """One message: what failed, where it was sent, and why."""

    queue_url: str
    message_id: str
    receipt_handle: str
    source: Source
    event: Any
    function: str | None
    error: str | None


@dataclass(slots=True)
class Outcome:
    """What the command did (or, dry, would do) with each message."""

    redriven: list[Failed] = field(default_factory=list)
    left: list[tuple[Failed, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether every message was (or would be) redriven."""
        return not self.left


def read_message(queue_url: str, message: Mapping[str, Any]) -> Failed:
    """What one queue message asks to run again, whichever queue it came from."""
    body = str(message.get("Body", ""))
    base = {
        "queue_url": queue_url,
        "message_id": str(message["MessageId"]),
        "receipt_handle": str(message["ReceiptHandle"]),
    }
    try:
        parsed = json.loads(body)
    except ValueError:
        return Failed(**base, source="unreadable", event=None, function=None,
                      error=f"the body is not JSON: {clip(body)!r}")  # fmt: skip
    if isinstance(parsed, dict) and "requestPayload" in parsed and "requestContext" in parsed:
        context = parsed.get("requestContext") or {}
        response = parsed.get("responsePayload")
        error = (
            f"{response.get('errorType')}: {response.get('errorMessage')}"
            if isinstance(response, dict)
            else context.get("condition")
        )
        return Failed(
            **base,
            source="failed-run record",
            event=parsed["requestPayload"],
            function=context.get("functionArn"),
            error=None if error is None else clip(str(error)),
        )
    attributes = message.get("MessageAttributes") or {}

    def attribute(name: str) -> str | None:
        value = attributes.get(name, {}).get("StringValue")
        return None if value is None else str(value)

    code, why = attribute("ERROR_CODE"), attribute("ERROR_MESSAGE")
    return Failed(
        **base,
        source="schedule dead letter",
        event=parsed,
        function=attribute("TARGET_ARN"),
        error=None if code is None and why is None else clip(f"{code}: {why}"),
    )


def receive_all(sqs: Any, queue_url: str) -> Iterator[Failed]:
    """Every message of the queue, each hidden for a while so that it is read once."""
    seen = 0
    while seen < MAX_MESSAGES:
        answer = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=_BATCH,
            VisibilityTimeout=_HIDDEN_S,
            # Long polling asks every SQS server, so an empty answer means an empty queue.
            WaitTimeSeconds=1,
            MessageAttributeNames=["All"],
        )
        messages = answer.get("Messages", [])
        if not messages:
            return
        for message in messages:
            seen += 1
            yield read_message(queue_url, message)


def redrive(
    sqs: Any,
    lambda_client: Any,
    queue_urls: Sequence[str],
    *,
    function: str | None = None,
    execute: bool = False,
) -> Outcome:
    """Redrive every message of ``queue_urls``: invoke its event again, then delete it.

    ``function`` overrides where each message says it was sent. Dry (the
    default), nothing is invoked or deleted, and each message is made visible
    again at once, so the queue is as it was.
    """
    outcome = Outcome()
    for queue_url in queue_urls:
        # All of it first: a message made visible again must not be read twice.
        for failed in list(receive_all(sqs, queue_url)):
            target = function or failed.function
            if failed.source == "unreadable":
                outcome.left.append((failed, failed.error or "unreadable"))
            elif target is None:
                outcome.left.append((failed, "no function named: give --function"))
            elif not execute:
                outcome.redriven.append(failed)
            else:
                problem = _invoke(lambda_client, target, failed.event)
                if problem is None:
                    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=failed.receipt_handle)
                    outcome.redriven.append(failed)
                else:
                    outcome.left.append((failed, problem))
            if not execute or any(left is failed for left, _ in outcome.left):
                # Back in the queue now, rather than after the hidden while.
                sqs.change_message_visibility(
                    QueueUrl=queue_url, ReceiptHandle=failed.receipt_handle, VisibilityTimeout=0
                )
    return outcome


def _invoke(lambda_client: Any, function: str, event: Any) -> str | None:
    """Invoke ``function`` asynchronously with ``event``; None once accepted, else why not."""
    try:
        answer = lambda_client.invoke(
            FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode()
        )
    except (ClientError, BotoCoreError) as exc:
        return f"invoking {function} failed: {exc}"
    status = answer.get("StatusCode")
    if status != _ACCEPTED:
        return f"invoking {function} answered {status}; expected {_ACCEPTED} (accepted)"
    return None


def lines(outcome: Outcome, *, execute: bool) -> list[str]:
    """What the command says: one line per message, then the totals."""
    verb = "redriven" if execute else "would redrive"
    said = [
        f"{verb}: {failed.source} {failed.message_id} -> {failed.function or '?'}"
        f"  event {clip(json.dumps(failed.event), 200)}"
        + (f"  (failed: {failed.error})" if failed.error else "")
        for failed in outcome.redriven
    ]
    said += [
        f"left in the queue: {failed.source} {failed.message_id}: {why}"
        for failed, why in outcome.left
    ]
    total = len(outcome.redriven) + len(outcome.left)
    if total == 0:
        said.append("the queues are empty: nothing to redrive")
    elif execute:
        said.append(f"{len(outcome.redriven)} of {total} message(s) redriven and deleted")
    else:
        said.append(
            f"dry run: {len(outcome.redriven)} of {total} message(s) would be redriven; nothing"
            " was invoked or deleted (add --execute to redrive them)"
        )
    return said
