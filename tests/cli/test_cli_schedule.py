"""`python -m dispatch_fn schedule status|pause|resume STACK`: the one kill switch.

Against moto's CloudFormation and Scheduler: a stack holding the template's
parameter and output, and its schedule.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from dispatch_fn.cli import ExitStatus, schedule
from support import cli

STACK = "duly-dispatcher-prod"
SCHEDULE = f"{STACK}-dispatch"


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("cron(0 1 * * ? *)", "2026-12-04T23:00:00+00:00", "2026-12-05T01:00:00+00:00"),
        ("cron(0 1 * * ? *)", "2026-12-05T00:30:00+00:00", "2026-12-05T01:00:00+00:00"),
        ("cron(0 1 * * ? *)", "2026-12-05T01:00:00+00:00", "2026-12-06T01:00:00+00:00"),
        ("cron(0 1/6 * * ? *)", "2026-12-05T02:00:00+00:00", "2026-12-05T07:00:00+00:00"),
        ("cron(0 1/6 * * ? *)", "2026-12-05T19:30:00+00:00", "2026-12-06T01:00:00+00:00"),
        ("rate(1 day)", "2026-12-05T19:30:00+00:00", None),
    ],
)
def test_the_next_run_of_the_templates_schedules(
    expression: str, after: str, expected: str | None
) -> None:
    found = schedule.next_run(expression, datetime.fromisoformat(after))
    assert (found and found.isoformat()) == expected


class Stacks:
    """CloudFormation's DescribeStacks and UpdateStack over one stack, as boto3 answers them.

    moto's CloudFormation needs packages the project does not pin; these two calls are all
    the command makes, and ``updates`` keeps what each update sent.
    """

    def __init__(self) -> None:
        self.parameters = {"DispatchScheduleState": "ENABLED", "DispatchChunkSize": "5000"}
        self.updates: list[dict[str, Any]] = []

    def describe_stacks(self, StackName: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        if StackName != STACK:
            raise ClientError(
                {"Error": {"Code": "ValidationError",
                           "Message": f"Stack with id {StackName} does not exist"}},
                "DescribeStacks",
            )  # fmt: skip
        return {"Stacks": [{
            "StackName": STACK,
            "StackStatus": "UPDATE_COMPLETE",
            "Capabilities": ["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
            "Parameters": [{"ParameterKey": key, "ParameterValue": value}
                           for key, value in self.parameters.items()],
            "Outputs": [{"OutputKey": "ScheduleName", "OutputValue": SCHEDULE}],
        }]}  # fmt: skip

    def update_stack(self, **sent: Any) -> dict[str, Any]:
        assert sent["StackName"] == STACK
        self.updates.append(sent)
        for parameter in sent["Parameters"]:
            if not parameter.get("UsePreviousValue"):
                self.parameters[parameter["ParameterKey"]] = parameter["ParameterValue"]
        return {"StackId": STACK}


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name, value in {
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        scheduler = boto3.client("scheduler")
        scheduler.create_schedule(
            Name=SCHEDULE,
            ScheduleExpression="cron(0 1 * * ? *)",
            ScheduleExpressionTimezone="UTC",
            State="ENABLED",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={
                "Arn": "arn:aws:lambda:eu-west-1:123456789012:function:x",
                "RoleArn": "arn:aws:iam::123456789012:role/x",
            },
        )
        yield {"cloudformation": Stacks(), "scheduler": scheduler}


_NOW = datetime(2026, 12, 4, 23, 0, tzinfo=UTC)


def test_status_says_the_stacks_word_the_schedules_and_the_next_run(
    stack: dict[str, Any],
) -> None:
    found = schedule.status(stack["cloudformation"], stack["scheduler"], STACK, now=_NOW)
    assert (found.parameter, found.state, found.drifted) == ("ENABLED", "ENABLED", False)
    assert found.next_run == datetime(2026, 12, 5, 1, 0, tzinfo=UTC)
    assert "next run    2026-12-05T01:00:00+00:00" in found.lines()


def test_pause_changes_only_the_stacks_schedule_state_and_resume_puts_it_back(
    stack: dict[str, Any],
) -> None:
    stacks = stack["cloudformation"]
    assert schedule.set_state(stacks, STACK, "DISABLED") is True
    [update] = stacks.updates
    assert update["UsePreviousTemplate"] is True
    assert update["Parameters"] == [
        {"ParameterKey": "DispatchScheduleState", "ParameterValue": "DISABLED"},
        {"ParameterKey": "DispatchChunkSize", "UsePreviousValue": True},
    ]
    assert update["Capabilities"] == ["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"]
    assert stacks.parameters == {"DispatchScheduleState": "DISABLED", "DispatchChunkSize": "5000"}
    # Already so: nothing to update.
    assert schedule.set_state(stacks, STACK, "DISABLED") is False
    assert len(stacks.updates) == 1
    assert schedule.set_state(stacks, STACK, "ENABLED") is True
    assert stacks.parameters["DispatchScheduleState"] == "ENABLED"


def test_a_schedule_changed_outside_cloudformation_is_called_drift(
    stack: dict[str, Any],
) -> None:
    current = stack["scheduler"].get_schedule(Name=SCHEDULE)
    stack["scheduler"].update_schedule(
        Name=SCHEDULE,
        ScheduleExpression=current["ScheduleExpression"],
        FlexibleTimeWindow=current["FlexibleTimeWindow"],
        Target=current["Target"],
        State="DISABLED",
    )
    found = schedule.status(stack["cloudformation"], stack["scheduler"], STACK, now=_NOW)
    out = "\n".join(found.lines())
    assert "schedule    duly-dispatcher-prod-dispatch: DISABLED" in out
    assert "next run    none (the schedule is paused)" in out
    assert "drift       the schedule is DISABLED but the stack deployed ENABLED" in out
    assert "`schedule pause` makes the stack agree" in out


def test_an_unknown_stack_is_refused_with_its_name(stack: dict[str, Any]) -> None:
    with pytest.raises(ClientError, match="no-such-stack"):
        schedule.status(stack["cloudformation"], stack["scheduler"], "no-such-stack", now=_NOW)


def test_the_command_names_its_actions_and_refuses_others() -> None:
    completed = cli("schedule", "stop", STACK)
    assert completed.returncode == ExitStatus.REFUSED
    assert "argument action" in completed.stderr
