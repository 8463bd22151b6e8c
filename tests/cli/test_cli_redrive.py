"""`python -m dispatch_fn redrive`: what failed is invoked again, and its queue drained.

Against moto's SQS and Lambda (moto accepts an asynchronous invoke and runs
nothing): the failed-run queue holds Lambda's destination records, the
schedule's dead-letter queue the schedule's payload itself.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from moto import mock_aws

from dispatch_fn.cli import ExitStatus, main, redrive

_REGION = "eu-west-1"
SCHEDULED = {"scheduled_time": "2026-11-29T01:00:00Z"}
BACKFILL = {"from": "2025-10-01", "to": "2026-10-31"}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Both queues and the function, in moto; each Invoke the command's session sends is kept."""
    for name, value in {
        "AWS_DEFAULT_REGION": _REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws(config={"lambda": {"use_docker": False}}):
        role = boto3.client("iam").create_role(RoleName="dispatcher", AssumeRolePolicyDocument="{}")
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as bundle:
            bundle.writestr("app.py", "def lambda_handler(event, context):\n    return event\n")
        arn = boto3.client("lambda").create_function(
            FunctionName="duly-dispatcher-prod-dispatch",
            Runtime="python3.12",
            Role=role["Role"]["Arn"],
            Handler="app.lambda_handler",
            Code={"ZipFile": archive.getvalue()},
        )["FunctionArn"]
        sqs = boto3.client("sqs")
        invoked: list[dict[str, Any]] = []

        def capture(params: dict[str, Any], **_: Any) -> None:
            invoked.append(dict(params))

        session = boto3.session.Session()
        session.events.register("provide-client-params.lambda.Invoke", capture)
        yield {
            "session": session,
            "sqs": sqs,
            "function_arn": arn,
            "failed_runs": sqs.create_queue(QueueName="failed-runs")["QueueUrl"],
            "dead_letters": sqs.create_queue(QueueName="schedule-dlq")["QueueUrl"],
            "invoked": invoked,
        }


def _destination_record(event: dict[str, Any], function_arn: str) -> str:
    """What Lambda sends the failed-run queue for an event that failed after its retries."""
    return json.dumps({
        "version": "1.0",
        "timestamp": "2026-11-29T07:00:00.000Z",
        "requestContext": {
            "requestId": "e4b46cbf-b738-4d2c-8d08-a3c3f3e1a2c5",
            "functionArn": f"{function_arn}:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": 3,
        },
        "requestPayload": event,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST",
                            "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": "run 41 failed: connection lost",
                            "errorType": "RunFailedError"},
    })  # fmt: skip


def _dead_letter(aws: dict[str, Any]) -> None:
    """What Scheduler sends its dead-letter queue: the payload, the error in attributes."""
    aws["sqs"].send_message(
        QueueUrl=aws["dead_letters"],
        MessageBody=json.dumps(SCHEDULED),
        MessageAttributes={
            "ERROR_CODE": {
                "DataType": "String",
                "StringValue": "AWS.Scheduler.ThrottlingException",
            },
            "ERROR_MESSAGE": {"DataType": "String", "StringValue": "Rate exceeded"},
            "TARGET_ARN": {"DataType": "String", "StringValue": aws["function_arn"]},
        },
    )


def _waiting(aws: dict[str, Any], queue: str) -> int:
    attributes = aws["sqs"].get_queue_attributes(
        QueueUrl=aws[queue],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


@pytest.fixture
def both_queues(aws: dict[str, Any]) -> dict[str, Any]:
    aws["sqs"].send_message(
        QueueUrl=aws["failed_runs"], MessageBody=_destination_record(BACKFILL, aws["function_arn"])
    )
    _dead_letter(aws)
    return aws


def test_each_queues_message_is_read_for_its_event_function_and_error(
    both_queues: dict[str, Any],
) -> None:
    sqs = both_queues["sqs"]
    [record] = redrive.receive_all(sqs, both_queues["failed_runs"])
    assert (record.source, record.event) == ("failed-run record", BACKFILL)
    assert record.function == f"{both_queues['function_arn']}:$LATEST"
    assert record.error == "RunFailedError: run 41 failed: connection lost"
    [letter] = redrive.receive_all(sqs, both_queues["dead_letters"])
    assert (letter.source, letter.event) == ("schedule dead letter", SCHEDULED)
    assert letter.function == both_queues["function_arn"]
    assert letter.error == "AWS.Scheduler.ThrottlingException: Rate exceeded"


def test_a_dry_run_invokes_nothing_and_leaves_both_queues_as_they_were(
    both_queues: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        ["redrive", both_queues["failed_runs"], both_queues["dead_letters"]],
        aws_session=both_queues["session"],
    )
    assert status == ExitStatus.OK
    out = capsys.readouterr().out
    assert out.count("would redrive: ") == 2
    assert "nothing was invoked or deleted (add --execute to redrive them)" in out
    assert both_queues["invoked"] == []
    assert (_waiting(both_queues, "failed_runs"), _waiting(both_queues, "dead_letters")) == (1, 1)
    # Visible again at once: a second look sees them.
    assert len(list(redrive.receive_all(both_queues["sqs"], both_queues["failed_runs"]))) == 1


def test_execute_invokes_each_event_asynchronously_where_it_was_sent_and_drains_the_queues(
    both_queues: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        ["redrive", both_queues["failed_runs"], both_queues["dead_letters"], "--execute"],
        aws_session=both_queues["session"],
    )
    assert status == ExitStatus.OK, capsys.readouterr()
    calls = both_queues["invoked"]
    assert [json.loads(call["Payload"]) for call in calls] == [BACKFILL, SCHEDULED]
    assert {call["InvocationType"] for call in calls} == {"Event"}
    assert [call["FunctionName"] for call in calls] == [
        f"{both_queues['function_arn']}:$LATEST", both_queues["function_arn"],
    ]  # fmt: skip
    assert (_waiting(both_queues, "failed_runs"), _waiting(both_queues, "dead_letters")) == (0, 0)
    assert "2 of 2 message(s) redriven and deleted" in capsys.readouterr().out


def test_function_overrides_where_the_messages_say_they_were_sent(
    both_queues: dict[str, Any],
) -> None:
    assert main(
        ["redrive", both_queues["failed_runs"], "--execute", "--function",
         "duly-dispatcher-prod-dispatch"],
        aws_session=both_queues["session"],
    ) == ExitStatus.OK  # fmt: skip
    assert [call["FunctionName"] for call in both_queues["invoked"]] == [
        "duly-dispatcher-prod-dispatch"
    ]


def test_what_cannot_be_redriven_stays_in_the_queue_and_the_command_says_so(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    sqs = aws["sqs"]
    sqs.send_message(QueueUrl=aws["dead_letters"], MessageBody="not json")
    sqs.send_message(QueueUrl=aws["dead_letters"], MessageBody=json.dumps(SCHEDULED))  # no target
    sqs.send_message(
        QueueUrl=aws["failed_runs"],
        MessageBody=_destination_record(BACKFILL, aws["function_arn"].replace("prod", "gone")),
    )

    def function_not_found(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        # moto's Lambda without Docker accepts any name; the real one answers 404.
        error = {"Code": "ResourceNotFoundException", "Message": "Function not found"}
        return AWSResponse("https://lambda", 404, HTTPHeaders(), None), {
            "Error": error, "ResponseMetadata": {"HTTPStatusCode": 404},
        }  # fmt: skip

    session: boto3.session.Session = aws["session"]
    # A before-call handler's answer stands in for the call (the stubs type it as None).
    session.events.register(
        "before-call.lambda.Invoke",
        function_not_found,  # type: ignore[arg-type]
    )
    status = main(
        ["redrive", aws["failed_runs"], aws["dead_letters"], "--execute"],
        aws_session=aws["session"],
    )
    assert status == ExitStatus.FAILED
    out = capsys.readouterr().out
    assert out.count("left in the queue: ") == 3
    assert "the body is not JSON" in out
    assert "no function named: give --function" in out
    assert "ResourceNotFoundException" in out
    assert (_waiting(aws, "failed_runs"), _waiting(aws, "dead_letters")) == (1, 2)


def test_empty_queues_say_so(aws: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["redrive", aws["failed_runs"], "--execute"], aws_session=aws["session"]) == (
        ExitStatus.OK
    )
    assert "the queues are empty: nothing to redrive" in capsys.readouterr().out
