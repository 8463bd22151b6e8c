"""The template's part in the run ledger, catch-up and self-continuation (docs/contract.md#ledger).

Read as written (``sam validate`` and cfn-lint, in the gate, would refuse a
dependency cycle between the role and the function).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from samtranslator.yaml_helper import yaml_parse

from dispatch_fn.db import ledger
from dispatch_fn.settings import DEFAULT_CATCH_UP_DAYS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    parsed: dict[str, Any] = yaml_parse((ROOT / "template.yaml").read_text("utf-8"))
    return parsed


def _function(template: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = template["Resources"]["DispatchFunction"]["Properties"]
    return found


def _self_invoke(template: dict[str, Any]) -> dict[str, Any]:
    role = template["Resources"]["DispatchFunctionRole"]["Properties"]
    (statement,) = (
        s
        for policy in role["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
        if isinstance(s, dict) and s.get("Action") == "lambda:InvokeFunction"
    )
    found: dict[str, Any] = statement
    return found


def test_the_function_may_invoke_itself_and_nothing_else(template: dict[str, Any]) -> None:
    name = _function(template)["FunctionName"]
    assert name == {"Fn::Sub": "${AWS::StackName}-dispatch"}
    arn = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:"
    statement = _self_invoke(template)
    assert statement["Effect"] == "Allow"
    # Its own name (unqualified) and its own versions and aliases: no other function.
    assert statement["Resource"] == [
        {"Fn::Sub": arn + name["Fn::Sub"]},
        {"Fn::Sub": arn + name["Fn::Sub"] + ":*"},
    ]


def test_the_self_invoke_grant_names_the_function_without_referring_to_it(
    template: dict[str, Any],
) -> None:
    # A Ref or GetAtt of the function inside its own role would be a cycle.
    assert "DispatchFunction" not in str(_self_invoke(template)["Resource"]).replace(
        "DispatchFunctionRole", ""
    )


def test_the_ledger_reads_a_run_as_abandoned_after_the_functions_own_timeout(
    template: dict[str, Any],
) -> None:
    assert ledger.FUNCTION_TIMEOUT.total_seconds() == _function(template)["Timeout"]


def test_catch_up_days_is_a_parameter_defaulting_to_the_settings_default(
    template: dict[str, Any],
) -> None:
    parameter = template["Parameters"]["DispatchCatchUpDays"]
    assert (parameter["Type"], parameter["Default"], parameter["MinValue"]) == (
        "Number",
        DEFAULT_CATCH_UP_DAYS,
        0,
    )
    variables = _function(template)["Environment"]["Variables"]
    assert variables["DISPATCH_CATCH_UP_DAYS"] == {"Ref": "DispatchCatchUpDays"}


def test_the_incomplete_alarm_is_about_a_chain_that_ends_incomplete(
    template: dict[str, Any],
) -> None:
    alarm = template["Resources"]["IncompleteRunAlarm"]["Properties"]
    assert alarm["MetricName"] == "Incomplete"
    assert "chain" in alarm["AlarmDescription"]
    assert "handed off does not count" in " ".join(alarm["AlarmDescription"].split())


def test_the_function_name_fits_lambdas_64_characters_wherever_the_schedule_name_does(
    template: dict[str, Any],
) -> None:
    # Same suffix as the schedule's name, whose 64-character bound on the
    # configured stack names test_template_stack checks; Lambda's is also 64.
    schedule = template["Resources"]["DispatchFunction"]["Properties"]["Events"]["DailyDispatch"]
    assert _function(template)["FunctionName"] == schedule["Properties"]["Name"]
