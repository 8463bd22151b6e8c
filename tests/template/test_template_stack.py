"""The SAM template, translated to the CloudFormation that CloudFormation deploys.

The translation runs offline with the transform CloudFormation itself applies
(aws-sam-translator): no credentials, no network. ``CodeUri`` is swapped for the
S3 location ``sam deploy`` uploads the built artifact to, exactly as ``sam
package`` does, and the pseudo parameters get fixed values. Template parameters
are left unresolved on purpose, so the tests can see which values come from
parameters.

One module on purpose: a second ``conftest.py`` under ``tests/`` would collide
with the root one as mypy's module ``conftest``.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator
from samtranslator.yaml_helper import yaml_parse

from dispatch_fn.settings import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_WINDOW_DAYS,
    DEFAULT_PAGE_ROWS,
    DEFAULT_WORKERS,
    MAX_WORKERS,
)

ROOT = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"

# What IAM's ListPolicies would return for the AWS managed policies SAM knows
# by name. The template should need none of them (a test checks that no role
# carries a managed policy); the map only keeps the translation offline should
# that ever change.
_MANAGED_POLICIES = {
    name: f"arn:aws:iam::aws:policy/{path}"
    for name, path in {
        "AWSLambdaBasicExecutionRole": "service-role/AWSLambdaBasicExecutionRole",
        "AWSLambdaVPCAccessExecutionRole": "service-role/AWSLambdaVPCAccessExecutionRole",
        "AWSXRayDaemonWriteAccess": "AWSXRayDaemonWriteAccess",
    }.items()
}

EXPECTED_ENVIRONMENT = {
    # Empty when deployed; declared so that sam local invoke --env-vars can set it.
    "DATABASE_URL": "",
    "DB_AUTH": {"Ref": "DatabaseAuth"},
    "DB_SECRET_ARN": {"Ref": "DatabaseSecretArn"},
    "DB_HOST": {"Fn::GetAtt": ["SchemaMigration", "Host"]},
    "DB_PORT": {"Fn::GetAtt": ["SchemaMigration", "Port"]},
    "DB_NAME": {"Fn::GetAtt": ["SchemaMigration", "DbName"]},
    "DB_USER": {"Ref": "DatabaseUser"},
    "DB_SSLMODE": {"Ref": "DatabaseSslMode"},
    "DB_SSLROOTCERT": {"Ref": "DatabaseCaBundlePath"},
    "DB_USES_RDS_PROXY": {"Ref": "DatabaseUsesRdsProxy"},
    "DISPATCH_CATCH_UP_DAYS": {"Ref": "DispatchCatchUpDays"},
    "DISPATCH_CHUNK_SIZE": {"Ref": "DispatchChunkSize"},
    "DISPATCH_PAGE_ROWS": {"Ref": "DispatchPageRows"},
    "DISPATCH_SCHEDULE_INTERVAL_HOURS": {"Ref": "ScheduleIntervalHours"},
    "DISPATCH_MAX_WINDOW_DAYS": {"Ref": "DispatchMaxWindowDays"},
    "DISPATCH_WORKERS": {"Ref": "DispatchWorkers"},
    "POWERTOOLS_SERVICE_NAME": "duly-dispatcher",
    "POWERTOOLS_METRICS_NAMESPACE": "Duly",
    "POWERTOOLS_LOG_LEVEL": "INFO",
}
SCHEDULE_NAME_LIMIT = 64
FOURTEEN_DAYS = 14 * 24 * 3600
TOPIC_ACTIONS = {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}

# The only actions that may be granted on Resource "*": AWS offers no narrower
# form for them. ENI management for a VPC function (the actions of
# AWSLambdaVPCAccessExecutionRole) and X-Ray trace upload.
WILDCARD_ONLY_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    # Rotation's new password (DatabaseLoginRotationDays): the action names no resource.
    "secretsmanager:GetRandomPassword",
}

# Key names and literal shapes that would mean a credential sits in the template.
_SECRETISH_KEY = re.compile(r"pass(word)?|pwd|secret(?!_?arn)|token|credential", re.IGNORECASE)
_SECRETISH_VALUE = re.compile(
    r"\{\{resolve:(secretsmanager|ssm-secure)"  # dynamic refs resolve into plain text
    r"|postgres(ql)?://[^\s/:@]+:[^\s/@]+@"  # a URL with a password
    r"|password\s*="  # a libpq keyword/value DSN with a password
    r"|AKIA[0-9A-Z]{16}",  # an access key id
    re.IGNORECASE,
)


# --- fixtures -----------------------------------------------------------------


@pytest.fixture(scope="module")
def template_text() -> str:
    return (ROOT / "template.yaml").read_text("utf-8")


@pytest.fixture(scope="module")
def sam_template(template_text: str) -> dict[str, Any]:
    """The template as written, intrinsics in their long form (``{"Ref": ...}``)."""
    parsed: dict[str, Any] = yaml_parse(template_text)
    return parsed


@pytest.fixture(scope="module")
def translated(sam_template: dict[str, Any]) -> dict[str, Any]:
    """The CloudFormation template SAM's transform produces from ``template.yaml``."""
    packaged = copy.deepcopy(sam_template)
    for resource in packaged["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://artifact-bucket/dispatch.zip"
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            resource["Properties"]["ContentUri"] = "s3://artifact-bucket/layer.zip"
    translator = Translator(
        managed_policy_map=None,
        sam_parser=Parser(),
        boto_session=boto3.session.Session(region_name=REGION),
    )
    result: dict[str, Any] = translator.translate(
        packaged,
        parameter_values={
            "AWS::Region": REGION,
            "AWS::Partition": "aws",
            "AWS::AccountId": "123456789012",
            "AWS::StackName": "duly-dispatcher-test",
        },
        get_managed_policy_map=lambda: _MANAGED_POLICIES,
    )
    return result


@pytest.fixture(scope="module")
def resources(translated: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = translated["Resources"]
    return found


@pytest.fixture(scope="module")
def function(resources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Properties of the dispatcher function."""
    found: dict[str, Any] = resources["DispatchFunction"]["Properties"]
    assert resources["DispatchFunction"]["Type"] == "AWS::Lambda::Function"
    return found


@pytest.fixture(scope="module")
def schedule(resources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Properties of the one EventBridge Scheduler schedule."""
    (props,) = (
        r["Properties"] for r in resources.values() if r["Type"] == "AWS::Scheduler::Schedule"
    )
    found: dict[str, Any] = props
    return found


@pytest.fixture(scope="module")
def function_role(resources: dict[str, dict[str, Any]], function: dict[str, Any]) -> dict[str, Any]:
    role_id = function["Role"]["Fn::GetAtt"][0]
    found: dict[str, Any] = resources[role_id]["Properties"]
    return found


# --- helpers ------------------------------------------------------------------


# The metric alarms the heartbeat composes; they page no one themselves.
HEARTBEAT_PARTS = ("ScheduledRunSilenceAlarm", "DeployGraceAlarm")


def _alarms(
    resources: dict[str, dict[str, Any]], *, composite: bool = False
) -> dict[str, dict[str, Any]]:
    """The metric alarms, and with ``composite`` the composite alarms too."""
    types = {"AWS::CloudWatch::Alarm", *(["AWS::CloudWatch::CompositeAlarm"] if composite else [])}
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in resources.items()
        if resource["Type"] in types
    }


def _roles(resources: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::IAM::Role"
    }


def _branches(node: Any) -> Iterator[Any]:
    """Every value ``node`` can take: both arms of an ``Fn::If``, minus ``AWS::NoValue``."""
    if isinstance(node, dict) and set(node) == {"Fn::If"}:
        _, when_true, when_false = node["Fn::If"]
        yield from _branches(when_true)
        yield from _branches(when_false)
    elif node != {"Ref": "AWS::NoValue"}:
        yield node


def _statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        statement
        for policy in role.get("Policies", [])
        for entry in policy["PolicyDocument"]["Statement"]
        for statement in _branches(entry)
    ]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield f"{path}.{key}", key
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")
    else:
        yield path, node


# --- the function: code, runtime, limits, network, configuration -----------


def test_code_comes_from_the_source_directory_with_the_contracted_handler(
    sam_template: dict[str, Any],
) -> None:
    props = sam_template["Resources"]["DispatchFunction"]["Properties"]
    assert props["CodeUri"] == "src/"
    assert props["Handler"] == "dispatch_fn.aws.app.lambda_handler"


def test_function_runs_python_3_12_on_x86_64_where_the_wheels_are_built(
    function: dict[str, Any],
) -> None:
    assert function["Runtime"] == "python3.12"
    assert function["Handler"] == "dispatch_fn.aws.app.lambda_handler"
    assert function["Architectures"] == ["x86_64"]


def test_timeout_is_the_explicit_lambda_maximum(
    sam_template: dict[str, Any], function: dict[str, Any]
) -> None:
    assert sam_template["Resources"]["DispatchFunction"]["Properties"]["Timeout"] == 900
    assert function["Timeout"] == 900


def test_memory_size_is_set_explicitly(function: dict[str, Any]) -> None:
    assert function["MemorySize"] == 256


def test_reserved_concurrency_caps_at_two_unless_the_stack_opts_out(
    sam_template: dict[str, Any], function: dict[str, Any]
) -> None:
    parameter = sam_template["Parameters"]["DispatchReservedConcurrency"]
    assert parameter["Default"] == 2
    assert function["ReservedConcurrentExecutions"] == {
        "Fn::If": [
            "ReservesConcurrency",
            {"Ref": "DispatchReservedConcurrency"},
            {"Ref": "AWS::NoValue"},
        ]
    }
    assert sam_template["Conditions"]["ReservesConcurrency"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "DispatchReservedConcurrency"}, "0"]}]
    }


def test_active_tracing_is_on_by_default_and_a_parameter_turns_it_down(
    sam_template: dict[str, Any], function: dict[str, Any]
) -> None:
    assert function["TracingConfig"] == {"Mode": {"Ref": "Tracing"}}
    parameter = sam_template["Parameters"]["Tracing"]
    assert (parameter["Default"], parameter["AllowedValues"]) == (
        "Active",
        ["Active", "PassThrough"],
    )


def test_vpc_subnets_and_security_groups_come_from_typed_parameters(
    sam_template: dict[str, Any], function: dict[str, Any]
) -> None:
    assert function["VpcConfig"] == {
        "SubnetIds": {"Ref": "SubnetIds"},
        "SecurityGroupIds": {"Ref": "SecurityGroupIds"},
    }
    parameters = sam_template["Parameters"]
    assert parameters["SubnetIds"]["Type"] == "List<AWS::EC2::Subnet::Id>"
    assert parameters["SecurityGroupIds"]["Type"] == "List<AWS::EC2::SecurityGroup::Id>"


def test_environment_holds_exactly_the_settings_the_handler_reads(
    function: dict[str, Any],
) -> None:
    assert function["Environment"]["Variables"] == EXPECTED_ENVIRONMENT


def test_database_settings_parameters_admit_only_encrypting_ssl_modes_and_boolean_proxy(
    sam_template: dict[str, Any],
) -> None:
    parameters = sam_template["Parameters"]
    # verify-full is the deployed default; require stays an explicit downgrade.
    assert parameters["DatabaseSslMode"]["Default"] == "verify-full"
    assert set(parameters["DatabaseSslMode"]["AllowedValues"]) == {
        "require",
        "verify-ca",
        "verify-full",
    }
    assert parameters["DatabaseUsesRdsProxy"]["AllowedValues"] == ["true", "false"]
    assert parameters["DatabaseUsesRdsProxy"]["Default"] == "false"
    # The deployed defaults are the code's own, not a second opinion.
    assert parameters["DispatchChunkSize"]["Default"] == DEFAULT_CHUNK_SIZE
    assert parameters["DispatchPageRows"]["Default"] == DEFAULT_PAGE_ROWS
    assert parameters["DispatchMaxWindowDays"]["Default"] == DEFAULT_MAX_WINDOW_DAYS
    assert parameters["DispatchWorkers"]["Default"] == DEFAULT_WORKERS
    assert parameters["DispatchWorkers"]["MaxValue"] == MAX_WORKERS


def test_logs_go_to_a_stack_named_log_group_with_retention(
    resources: dict[str, dict[str, Any]], function: dict[str, Any]
) -> None:
    # JSON: the platform's own lines (START, REPORT, errors) read like the code's.
    assert function["LoggingConfig"] == {
        "LogGroup": {"Ref": "DispatchLogGroup"},
        "LogFormat": "JSON",
    }
    group = resources["DispatchLogGroup"]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"]["LogGroupName"] == {
        "Fn::Sub": "/aws/lambda/${AWS::StackName}/dispatcher"
    }
    assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


# --- the daily schedule and its delivery ------------------------------------


def test_schedule_fires_at_0100_utc_every_day(schedule: dict[str, Any]) -> None:
    # The daily cron of docs/contract.md#job unless the operator chose a shorter interval.
    assert schedule["ScheduleExpression"] == {
        "Fn::If": [
            "RunsDaily",
            "cron(0 1 * * ? *)",
            {"Fn::Sub": "cron(0 1/${ScheduleIntervalHours} * * ? *)"},
        ]
    }
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}


def test_the_schedule_interval_is_one_parameter_for_the_schedule_and_the_function(
    sam_template: dict[str, Any], translated: dict[str, Any]
) -> None:
    parameter = sam_template["Parameters"]["ScheduleIntervalHours"]
    assert parameter["Type"] == "Number"
    assert parameter["Default"] == 24
    allowed = [int(value) for value in parameter["AllowedValues"]]
    assert allowed == [1, 2, 3, 4, 6, 8, 12, 24]
    # Each divides a day, so "from 01:00 every N hours" is evenly spaced across
    # midnight as well: the interval the function assumes holds between every two runs.
    assert all(24 % hours == 0 for hours in allowed)
    assert translated["Conditions"]["RunsDaily"] == {
        "Fn::Equals": [{"Ref": "ScheduleIntervalHours"}, "24"]
    }


def test_schedule_targets_the_dispatch_functions_live_alias(schedule: dict[str, Any]) -> None:
    # The alias a rollback moves back, never the unqualified $LATEST.
    assert schedule["Target"]["Arn"] == {"Ref": "DispatchFunctionAliaslive"}


def test_input_carries_the_scheduled_time_so_retries_replay_the_same_clock(
    schedule: dict[str, Any],
) -> None:
    payload = json.loads(schedule["Target"]["Input"])
    assert payload == {"scheduled_time": "<aws.scheduler.scheduled-time>"}


def test_delivery_is_retried_within_scheduler_limits(schedule: dict[str, Any]) -> None:
    policy = schedule["Target"]["RetryPolicy"]
    assert set(policy) == {"MaximumRetryAttempts", "MaximumEventAgeInSeconds"}
    assert 1 <= policy["MaximumRetryAttempts"] <= 185
    assert 60 <= policy["MaximumEventAgeInSeconds"] <= 86400


def test_undeliverable_events_go_to_the_schedule_dead_letter_queue_which_the_schedule_may_use(
    resources: dict[str, dict[str, Any]], schedule: dict[str, Any]
) -> None:
    queue_arn = {"Fn::GetAtt": ["ScheduleDeadLetterQueue", "Arn"]}
    assert schedule["Target"]["DeadLetterConfig"] == {"Arn": queue_arn}
    role_id = schedule["Target"]["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        statement
        for policy in resources[role_id]["Properties"]["Policies"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]
    assert {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": queue_arn} in statements


def test_schedule_name_is_derived_from_the_stack_name(schedule: dict[str, Any]) -> None:
    assert schedule["Name"] == {"Fn::Sub": "${AWS::StackName}-dispatch"}


def test_configured_stack_names_leave_the_schedule_name_within_64_characters() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text("utf-8"))
    stack_names = [
        parameters["stack_name"]
        for environment in config.values()
        if isinstance(environment, dict)
        for command in environment.values()
        if isinstance(command, dict)
        for parameters in command.values()
        if isinstance(parameters, dict) and "stack_name" in parameters
    ]
    assert stack_names, "samconfig.toml names no stack"
    for stack_name in stack_names:
        assert len(f"{stack_name}-dispatch") <= SCHEDULE_NAME_LIMIT, stack_name


# --- failed runs, alarms, outputs -------------------------------------------


def test_failed_asynchronous_runs_are_retried_then_sent_to_the_failed_run_queue(
    resources: dict[str, dict[str, Any]],
) -> None:
    (config,) = (
        r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventInvokeConfig"
    )
    assert config["FunctionName"] == {"Ref": "DispatchFunction"}
    # The schedule and a continuation invoke the alias: its invocations are the
    # ones retried and sent to the failed-run queue.
    assert config["Qualifier"] == "live"
    assert config["MaximumRetryAttempts"] == 2
    assert 60 <= config["MaximumEventAgeInSeconds"] <= 21600
    assert config["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": ["FailedRunQueue", "Arn"]}}
    }


@pytest.mark.parametrize("queue_id", ["FailedRunQueue", "ScheduleDeadLetterQueue"])
def test_failure_queues_are_encrypted_and_keep_messages_fourteen_days(
    resources: dict[str, dict[str, Any]], queue_id: str
) -> None:
    queue = resources[queue_id]
    assert queue["Type"] == "AWS::SQS::Queue"
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    assert queue["Properties"]["MessageRetentionPeriod"] == FOURTEEN_DAYS
    # A fixed name would clash between two stacks in one account.
    assert "QueueName" not in queue["Properties"]


def test_function_errors_raise_an_alarm(resources: dict[str, dict[str, Any]]) -> None:
    (alarm,) = (a for a in _alarms(resources).values() if a["MetricName"] == "Errors")
    assert alarm["Namespace"] == "AWS/Lambda"
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "DispatchFunction"}}]
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == 0


@pytest.mark.parametrize("queue_id", ["FailedRunQueue", "ScheduleDeadLetterQueue"])
def test_a_message_in_either_failure_queue_raises_an_alarm(
    resources: dict[str, dict[str, Any]], queue_id: str
) -> None:
    queue_name = {"Fn::GetAtt": [queue_id, "QueueName"]}
    (alarm,) = (
        a
        for a in _alarms(resources).values()
        if a["Dimensions"] == [{"Name": "QueueName", "Value": queue_name}]
    )
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == 0


@pytest.mark.parametrize("metric", ["NewFaults", "Incomplete", "SetAsideDuties"])
def test_runs_reporting_new_faults_set_aside_duties_or_incomplete_raise_an_alarm_on_the_emf_metric(
    resources: dict[str, dict[str, Any]], metric: str
) -> None:
    (alarm,) = (a for a in _alarms(resources).values() if a["MetricName"] == metric)
    # Powertools Metrics publishes under POWERTOOLS_METRICS_NAMESPACE with one
    # default dimension, service = POWERTOOLS_SERVICE_NAME.
    assert alarm["Namespace"] == "Duly"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "duly-dispatcher"}]
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Threshold"] == 1


def test_every_alarm_notifies_the_optional_topic_and_treats_missing_data_as_it_means(
    sam_template: dict[str, Any], resources: dict[str, dict[str, Any]]
) -> None:
    alarms = _alarms(resources)
    # No data is fine for errors and queues, keeps the last run's state for the
    # per-run outcomes, and is exactly what the heartbeat watches for.
    assert {logical_id: alarm["TreatMissingData"] for logical_id, alarm in alarms.items()} == {
        "FunctionErrorsAlarm": "notBreaching",
        "ThrottlesAlarm": "notBreaching",
        "DurationNearTimeoutAlarm": "notBreaching",
        "ScheduleDeadLetterAlarm": "notBreaching",
        "FailedRunAlarm": "notBreaching",
        "DegradedRunAlarm": "ignore",
        "IncompleteRunAlarm": "ignore",
        "SetAsideDutiesAlarm": "ignore",
        "ScheduledRunSilenceAlarm": "breaching",
        "DeployGraceAlarm": "notBreaching",
    }
    # The heartbeat's parts page through ScheduledRunHeartbeatAlarm, a composite alarm.
    paging = {
        logical_id: alarm
        for logical_id, alarm in _alarms(resources, composite=True).items()
        if logical_id not in HEARTBEAT_PARTS
    }
    for logical_id in HEARTBEAT_PARTS:
        assert "AlarmActions" not in alarms[logical_id], logical_id
        assert "OKActions" not in alarms[logical_id], logical_id
    for logical_id, alarm in paging.items():
        assert alarm["AlarmActions"] == TOPIC_ACTIONS, logical_id
        # Recovery is announced on the same topic.
        assert alarm["OKActions"] == TOPIC_ACTIONS, logical_id
    assert sam_template["Parameters"]["AlarmTopicArn"]["Default"] == ""
    assert sam_template["Conditions"]["HasAlarmTopic"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]
    }


def test_outputs_give_an_operator_the_function_queues_schedule_and_logs(
    translated: dict[str, Any],
) -> None:
    outputs = {name: output["Value"] for name, output in translated["Outputs"].items()}
    assert outputs == {
        "DispatchFunctionName": {"Ref": "DispatchFunction"},
        "DispatchFunctionArn": {"Fn::GetAtt": ["DispatchFunction", "Arn"]},
        "DispatchFunctionAliasArn": {"Ref": "DispatchFunctionAliaslive"},
        "FailedRunQueueUrl": {"Ref": "FailedRunQueue"},
        "ScheduleDeadLetterQueueUrl": {"Ref": "ScheduleDeadLetterQueue"},
        "ScheduleName": {"Ref": "DispatchFunctionDailyDispatch"},
        "LogGroupName": {"Ref": "DispatchLogGroup"},
        "MigrationLogGroupName": {"Ref": "MigrationLogGroup"},
        "SchemaVersion": {"Fn::GetAtt": ["SchemaMigration", "SchemaVersion"]},
        "CodeSchemaVersion": {"Fn::GetAtt": ["SchemaMigration", "CodeSchemaVersion"]},
        "DashboardName": {"Ref": "DispatchDashboard"},
    }
    assert translated["Resources"]["DispatchFunctionDailyDispatch"]["Type"] == (
        "AWS::Scheduler::Schedule"
    )


# --- credentials and permissions --------------------------------------------


def test_secret_arn_reaches_the_function_only_through_its_parameter(
    sam_template: dict[str, Any], function: dict[str, Any]
) -> None:
    for name in ("DatabaseSecretArn", "DatabaseOwnerSecretArn"):
        parameter = sam_template["Parameters"][name]
        assert parameter["Type"] == "String"
        assert "Default" not in parameter, "a baked-in secret ARN would pin one account"
        assert re.fullmatch(
            parameter["AllowedPattern"],
            "arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds!cluster-0a1b2c-AbCdEf",
        )
        assert not re.fullmatch(parameter["AllowedPattern"], "REPLACE_ME")
    # Only the dispatcher's may be empty: with IAM auth it has no password at all.
    assert re.fullmatch(sam_template["Parameters"]["DatabaseSecretArn"]["AllowedPattern"], "")
    assert function["Environment"]["Variables"]["DB_SECRET_ARN"] == {"Ref": "DatabaseSecretArn"}


def test_environment_holds_no_credential(function: dict[str, Any]) -> None:
    variables = function["Environment"]["Variables"]
    for name, value in variables.items():
        assert not _SECRETISH_KEY.search(name), name
        assert not _SECRETISH_VALUE.search(str(value)), name


def test_no_secret_value_appears_anywhere_in_the_template(
    template_text: str, translated: dict[str, Any]
) -> None:
    assert not _SECRETISH_VALUE.search(template_text)
    for path, value in _walk(translated):
        if isinstance(value, str):
            assert not _SECRETISH_VALUE.search(value), path
    for name, parameter in translated["Parameters"].items():
        if _SECRETISH_KEY.search(name):
            assert "Default" not in parameter or parameter["Default"] == "", name


def test_the_function_may_read_exactly_the_one_database_secret(
    function_role: dict[str, Any],
) -> None:
    reads = [s for s in _statements(function_role) if "getsecretvalue" in str(s["Action"]).lower()]
    assert reads == [
        {
            "Sid": "ReadDatabaseSecret",
            "Effect": "Allow",
            "Action": "secretsmanager:GetSecretValue",
            "Resource": {"Ref": "DatabaseSecretArn"},
        }
    ]
    (conditional,) = (
        entry
        for policy in function_role["Policies"]
        for entry in policy["PolicyDocument"]["Statement"]
        if "Fn::If" in entry and entry["Fn::If"][1].get("Sid") == "ReadDatabaseSecret"
    )
    # Never the owner's secret, and with IAM auth no secret at all.
    assert conditional["Fn::If"][0] == "UsesPasswordAuth"
    # Rotation writes that same secret, and only when asked for.
    writes = [
        s for s in _statements(function_role)
        if "secretsmanager" in str(s["Action"]).lower() and s not in reads
    ]  # fmt: skip
    assert {str(s["Resource"]) for s in writes} == {str({"Ref": "DatabaseSecretArn"}), "*"}


def test_kms_decrypt_is_granted_only_with_a_key_and_only_for_that_secret_via_secrets_manager(
    sam_template: dict[str, Any], function_role: dict[str, Any]
) -> None:
    (conditional,) = (
        entry
        for policy in function_role["Policies"]
        for entry in policy["PolicyDocument"]["Statement"]
        if "Fn::If" in entry and entry["Fn::If"][1].get("Action") == "kms:Decrypt"
    )
    condition, grant, otherwise = conditional["Fn::If"]
    assert condition == "DecryptsDispatcherSecret"
    assert sam_template["Conditions"]["DecryptsDispatcherSecret"] == {
        "Fn::And": [{"Condition": "HasDatabaseSecretKmsKey"}, {"Condition": "UsesPasswordAuth"}]
    }
    assert otherwise == {"Ref": "AWS::NoValue"}
    assert grant["Action"] == "kms:Decrypt"
    assert grant["Resource"] == {"Ref": "DatabaseSecretKmsKeyArn"}
    assert grant["Condition"]["StringEquals"] == {
        "kms:ViaService": {"Fn::Sub": "secretsmanager.${AWS::Region}.amazonaws.com"},
        "kms:EncryptionContext:SecretARN": {"Ref": "DatabaseSecretArn"},
    }
    assert sam_template["Parameters"]["DatabaseSecretKmsKeyArn"]["Default"] == ""


def test_the_function_may_send_only_to_the_failed_run_queue(
    function_role: dict[str, Any],
) -> None:
    sends = [s for s in _statements(function_role) if "sqs:" in str(s["Action"])]
    assert [(s["Action"], s["Resource"]) for s in sends] == [
        ("sqs:SendMessage", {"Fn::GetAtt": ["FailedRunQueue", "Arn"]})
    ]


def test_the_function_writes_logs_only_to_its_own_log_group(
    function_role: dict[str, Any],
) -> None:
    writes = [s for s in _statements(function_role) if "logs:" in str(s["Action"])]
    assert len(writes) == 1
    assert set(writes[0]["Action"]) == {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert writes[0]["Resource"] == {"Fn::GetAtt": ["DispatchLogGroup", "Arn"]}


def test_the_schedule_may_invoke_only_the_dispatch_function(
    resources: dict[str, dict[str, Any]], schedule: dict[str, Any]
) -> None:
    role = resources[schedule["Target"]["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
    invokes = [s for s in _statements(role) if "lambda:" in str(s["Action"])]
    assert [(s["Action"], s["Resource"]) for s in invokes] == [
        ("lambda:InvokeFunction", {"Ref": "DispatchFunctionAliaslive"})
    ]


def test_only_eni_and_xray_actions_are_granted_on_every_resource(
    resources: dict[str, dict[str, Any]],
) -> None:
    roles = _roles(resources)
    # The dispatcher's, the migration step's, the schedule's and CodeDeploy's.
    assert len(roles) == 4
    wildcard_actions: set[str] = set()
    for logical_id, role in roles.items():
        for statement in _statements(role):
            assert statement["Effect"] == "Allow", logical_id
            assert "NotAction" not in statement, logical_id
            assert "NotResource" not in statement, logical_id
            actions = _listed(statement["Action"])
            assert all("*" not in action for action in actions), (logical_id, actions)
            targets = _listed(statement["Resource"])
            if any(isinstance(t, str) and "*" in t for t in targets):
                assert targets == ["*"], (logical_id, targets)
                wildcard_actions.update(actions)
    assert wildcard_actions == WILDCARD_ONLY_ACTIONS


def test_no_role_carries_a_managed_policy_or_a_separate_policy_resource(
    resources: dict[str, dict[str, Any]],
) -> None:
    for logical_id, role in _roles(resources).items():
        assert "ManagedPolicyArns" not in role, logical_id
    assert not [
        r
        for r in resources.values()
        if r["Type"] in {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}
    ]


@pytest.mark.parametrize(
    ("role_kind", "service"),
    [
        ("function", "lambda.amazonaws.com"),
        ("schedule", "scheduler.amazonaws.com"),
        ("migration", "lambda.amazonaws.com"),
        ("deployment", "codedeploy.amazonaws.com"),
    ],
)
def test_each_role_can_be_assumed_only_by_its_own_service(
    resources: dict[str, dict[str, Any]],
    function: dict[str, Any],
    schedule: dict[str, Any],
    role_kind: str,
    service: str,
) -> None:
    role_ref = {
        "function": function["Role"],
        "schedule": schedule["Target"]["RoleArn"],
        "migration": resources["MigrationFunction"]["Properties"]["Role"],
        "deployment": resources["DispatchFunctionDeploymentGroup"]["Properties"]["ServiceRoleArn"],
    }[role_kind]
    role = resources[role_ref["Fn::GetAtt"][0]]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert _listed(trust["Principal"]["Service"]) == [service]
    assert _listed(trust["Action"]) == ["sts:AssumeRole"]


# --- operating it: TLS, IAM auth, the migration step, silence, the dashboard --


@pytest.fixture(scope="module")
def migration_function(resources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Properties of the migration step's function."""
    assert resources["MigrationFunction"]["Type"] == "AWS::Lambda::Function"
    found: dict[str, Any] = resources["MigrationFunction"]["Properties"]
    return found


def test_both_functions_verify_the_server_against_the_ca_bundle_parameter(
    sam_template: dict[str, Any], function: dict[str, Any], migration_function: dict[str, Any]
) -> None:
    for props in (function, migration_function):
        variables = props["Environment"]["Variables"]
        assert variables["DB_SSLMODE"] == {"Ref": "DatabaseSslMode"}
        assert variables["DB_SSLROOTCERT"] == {"Ref": "DatabaseCaBundlePath"}
    bundle = sam_template["Parameters"]["DatabaseCaBundlePath"]
    # Relative to the artifact's root: the file docs/deploy.md downloads before sam build.
    assert bundle["Default"] == "certs/rds-global-bundle.pem"


def test_iam_auth_may_connect_as_exactly_the_dispatchers_user_on_that_cluster(
    sam_template: dict[str, Any], function_role: dict[str, Any]
) -> None:
    (conditional,) = (
        entry
        for policy in function_role["Policies"]
        for entry in policy["PolicyDocument"]["Statement"]
        if "Fn::If" in entry and entry["Fn::If"][1].get("Action") == "rds-db:connect"
    )
    condition, grant, otherwise = conditional["Fn::If"]
    assert (condition, otherwise) == ("UsesIamAuth", {"Ref": "AWS::NoValue"})
    assert grant["Effect"] == "Allow"
    assert grant["Resource"] == {
        "Fn::Sub": "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:"
        "${DatabaseClusterResourceId}/${DatabaseUser}"
    }
    parameters = sam_template["Parameters"]
    assert re.fullmatch(parameters["DatabaseClusterResourceId"]["AllowedPattern"],
                        "cluster-ABCDEFGHIJKLMNOPQRSTUVWXY0")  # fmt: skip
    # A wildcard in either part would open every user or every cluster.
    assert not re.fullmatch(parameters["DatabaseClusterResourceId"]["AllowedPattern"], "*")
    assert not re.fullmatch(parameters["DatabaseUser"]["AllowedPattern"], "*")
    assert sam_template["Rules"]["IamAuthNamesItsCluster"]["RuleCondition"] == {
        "Fn::Equals": [{"Ref": "DatabaseAuth"}, "iam"]
    }


def test_the_dispatcher_never_reads_the_owners_secret(
    function: dict[str, Any], function_role: dict[str, Any]
) -> None:
    assert "DatabaseOwnerSecretArn" not in json.dumps(function)
    assert "DatabaseOwnerSecretArn" not in json.dumps(function_role)


def test_deploys_run_the_migration_step_before_the_dispatchers_code_goes_live(
    resources: dict[str, dict[str, Any]], function: dict[str, Any]
) -> None:
    step = resources["SchemaMigration"]
    assert step["Type"] == "Custom::DulySchema"
    props = step["Properties"]
    alias = resources[props["ServiceToken"]["Ref"]]
    assert alias["Type"] == "AWS::Lambda::Alias"
    assert alias["Properties"]["FunctionName"] == {"Ref": "MigrationFunction"}
    # Every code change publishes a version, and naming it makes the deploy an Update.
    version = resources[props["CodeVersion"]["Ref"]]
    assert version["Type"] == "AWS::Lambda::Version"
    assert version["Properties"]["FunctionName"] == {"Ref": "MigrationFunction"}
    assert props["DispatcherAuth"] == {"Ref": "DatabaseAuth"}
    assert props["DispatcherUser"] == {"Ref": "DatabaseUser"}
    # The dispatcher's endpoint comes from the step, so CloudFormation orders it after.
    variables = function["Environment"]["Variables"]
    assert variables["DB_HOST"] == {"Fn::GetAtt": ["SchemaMigration", "Host"]}


def test_the_migration_step_fails_a_deploy_within_its_functions_timeout_and_a_minute(
    resources: dict[str, dict[str, Any]], migration_function: dict[str, Any]
) -> None:
    timeout = resources["SchemaMigration"]["Properties"]["ServiceTimeout"]
    assert migration_function["Timeout"] < timeout <= migration_function["Timeout"] + 120


def test_the_migration_step_is_the_same_artifact_in_the_same_network_as_the_owner(
    sam_template: dict[str, Any], function: dict[str, Any], migration_function: dict[str, Any]
) -> None:
    step = sam_template["Resources"]["MigrationFunction"]["Properties"]
    assert step["CodeUri"] == sam_template["Resources"]["DispatchFunction"]["Properties"]["CodeUri"]
    assert step["Handler"] == "dispatch_fn.aws.migrate_resource.handler"
    assert migration_function["Runtime"] == function["Runtime"]
    assert migration_function["VpcConfig"] == function["VpcConfig"]
    variables = migration_function["Environment"]["Variables"]
    assert variables["DB_SECRET_ARN"] == {"Ref": "DatabaseOwnerSecretArn"}


def test_the_migration_step_reads_the_owners_secret_and_the_dispatchers_only_with_a_password(
    resources: dict[str, dict[str, Any]], migration_function: dict[str, Any]
) -> None:
    role = resources[migration_function["Role"]["Fn::GetAtt"][0]]["Properties"]
    reads = [
        (statement["Resource"], conditional)
        for policy in role["Policies"]
        for entry in policy["PolicyDocument"]["Statement"]
        for conditional, statement in (
            [(entry["Fn::If"][0], entry["Fn::If"][1])] if "Fn::If" in entry else [(None, entry)]
        )
        if statement["Action"] == "secretsmanager:GetSecretValue"
    ]
    assert reads == [
        ({"Ref": "DatabaseOwnerSecretArn"}, None),
        ({"Ref": "DatabaseSecretArn"}, "UsesPasswordAuth"),
    ]
    actions = {str(s["Action"]) for s in _statements(role)}
    assert not [a for a in actions if "sqs:" in a or "rds-db:" in a or "lambda:" in a]


def test_the_schedule_can_be_deployed_disabled(
    sam_template: dict[str, Any], schedule: dict[str, Any]
) -> None:
    assert schedule["State"] == {"Ref": "DispatchScheduleState"}
    parameter = sam_template["Parameters"]["DispatchScheduleState"]
    assert parameter["AllowedValues"] == ["ENABLED", "DISABLED"]
    assert parameter["Default"] == "ENABLED"


def test_a_heartbeat_alarm_fires_when_no_scheduled_run_completed_in_26_hours(
    resources: dict[str, dict[str, Any]],
) -> None:
    alarm = _alarms(resources)["ScheduledRunSilenceAlarm"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("Duly", "ScheduledRunsCompleted")
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "duly-dispatcher"}]
    assert alarm["Statistic"] == "Sum"
    assert alarm["Period"] * alarm["EvaluationPeriods"] == 26 * 3600
    # Every one of the 26 hours empty, not "some of them": a run in any hour is a pulse.
    assert alarm["DatapointsToAlarm"] == alarm["EvaluationPeriods"]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanThreshold", 1)
    # Silence is what it watches for: a schedule stopped for good keeps it in ALARM.
    assert alarm["TreatMissingData"] == "breaching"
    # CloudWatch's limit for periods of an hour or more: seven days in all.
    assert alarm["Period"] >= 3600
    assert alarm["Period"] * alarm["EvaluationPeriods"] <= 7 * 86400
    heartbeat = resources["ScheduledRunHeartbeatAlarm"]
    assert heartbeat["Type"] == "AWS::CloudWatch::CompositeAlarm"
    assert heartbeat["Properties"]["AlarmRule"] == {
        "Fn::Sub": 'ALARM("${ScheduledRunSilenceAlarm.Arn}")'
    }
    # A stack whose schedule is off on purpose does not page anyone for the silence.
    assert heartbeat["Properties"]["ActionsEnabled"] == {"Fn::If": ["SchedulesRuns", True, False]}


def test_the_heartbeat_does_not_page_right_after_a_first_deploy(
    resources: dict[str, dict[str, Any]],
) -> None:
    """A new stack has no ScheduledRunsCompleted at all, so the silence alarm, treating missing
    data as breaching, is in ALARM as soon as CloudFormation creates it; the deploy's grace
    holds the page back until a scheduled run could have been missed."""
    silence = _alarms(resources)["ScheduledRunSilenceAlarm"]
    grace = _alarms(resources)["DeployGraceAlarm"]
    heartbeat = resources["ScheduledRunHeartbeatAlarm"]["Properties"]
    assert heartbeat["ActionsSuppressor"] == {"Fn::GetAtt": ["DeployGraceAlarm", "Arn"]}
    # The grace: the migration step, which every first deploy invokes, ran within as many
    # hours as the silence counts, so a schedule never delivered after a deploy pages
    # once the grace ends (then, CloudWatch acts after the extension period).
    assert (grace["Namespace"], grace["MetricName"]) == ("AWS/Lambda", "Invocations")
    assert grace["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "MigrationFunction"}}]
    assert (grace["ComparisonOperator"], grace["Threshold"]) == (
        "GreaterThanOrEqualToThreshold", 1,
    )  # fmt: skip
    assert grace["DatapointsToAlarm"] == 1
    assert grace["TreatMissingData"] == "notBreaching"
    assert grace["Period"] * grace["EvaluationPeriods"] == (
        silence["Period"] * silence["EvaluationPeriods"]
    )
    # Lambda publishes the invocation within minutes; the page waits longer than that for it.
    assert heartbeat["ActionsSuppressorWaitPeriod"] >= 600
    assert 0 < heartbeat["ActionsSuppressorExtensionPeriod"] <= 900
    # The migration step has run before either alarm exists, so its invocation is on its way.
    for logical_id in ("ScheduledRunSilenceAlarm", "ScheduledRunHeartbeatAlarm"):
        assert resources[logical_id]["DependsOn"] in ("SchemaMigration", ["SchemaMigration"])


def _dashboard(resources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    body = resources["DispatchDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    # Each ${Name} or ${Name.Attr} CloudFormation substitutes becomes "<Name>" here.
    substituted = re.sub(r"\$\{([A-Za-z:.]+)\}", lambda m: f"<{m.group(1)}>", body)
    parsed: dict[str, Any] = json.loads(substituted)
    return parsed


def _dashboard_metrics(dashboard: dict[str, Any]) -> dict[str, set[tuple[str, ...]]]:
    found: dict[str, set[tuple[str, ...]]] = {}
    for widget in dashboard["widgets"]:
        if widget["type"] == "metric":
            found[widget["properties"]["title"]] = {
                tuple(str(part) for part in metric if not isinstance(part, dict))
                for metric in widget["properties"]["metrics"]
            }
    return found


def test_the_dashboard_shows_runs_tasks_faults_duration_errors_and_both_queues(
    resources: dict[str, dict[str, Any]], function: dict[str, Any]
) -> None:
    dashboard = _dashboard(resources)
    metrics = _dashboard_metrics(dashboard)
    service = ("service", "duly-dispatcher")
    lambda_fn = ("FunctionName", "<DispatchFunction>")
    assert metrics["Runs and their outcome"] >= {
        ("AWS/Lambda", "Invocations", *lambda_fn),
        *{("Duly", name, *service) for name in (
            "ScheduledRunsCompleted", "Degraded", "Incomplete", "FailedRuns", "RefusedEvents"
        )},
    }  # fmt: skip
    assert metrics["Tasks created and already existing"] >= {
        ("Duly", "TasksCreated", *service), ("Duly", "TasksExisting", *service),
    }  # fmt: skip
    assert metrics["Faults (duties the engine refused): new and persisting"] == {
        ("Duly", "Faults", *service), ("Duly", "NewFaults", *service), (),
    }  # fmt: skip
    (faults,) = (
        w["properties"] for w in dashboard["widgets"] if "new and" in w["properties"]["title"]
    )
    (persisting,) = (m[0] for m in faults["metrics"] if "expression" in m[0])
    # The faults the alarm no longer reports: faulted at the previous clock too.
    assert persisting["expression"] == "faults - new"
    assert metrics["Errors and throttles"] >= {("AWS/Lambda", "Errors", *lambda_fn)}
    assert metrics["Failure queues: messages waiting"] == {
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", f"<{queue}.QueueName>")
        for queue in ("FailedRunQueue", "ScheduleDeadLetterQueue")
    }
    (duration,) = (
        w["properties"] for w in dashboard["widgets"] if w["properties"]["title"].startswith("Dur")
    )
    assert ("AWS/Lambda", "Duration", *lambda_fn) in metrics[duration["title"]]
    lines = {line["label"]: line["value"] for line in duration["annotations"]["horizontal"]}
    assert lines["Timeout"] == function["Timeout"] * 1000
    assert (
        lines["DurationNearTimeoutAlarm"]
        == _alarms(resources)["DurationNearTimeoutAlarm"]["Threshold"]
    )
    assert str(function["Timeout"]) in duration["title"]
    (alarms,) = (w["properties"] for w in dashboard["widgets"] if w["type"] == "alarm")
    # Every alarm that pages (the heartbeat's parts page through it).
    assert {arn.removesuffix(".Arn>").removeprefix("<") for arn in alarms["alarms"]} == (
        set(_alarms(resources, composite=True)) - set(HEARTBEAT_PARTS)
    )


def test_each_samconfig_environment_names_every_parameter_without_a_default(
    sam_template: dict[str, Any],
) -> None:
    required = {
        name for name, parameter in sam_template["Parameters"].items() if "Default" not in parameter
    }
    assert {"DatabaseOwnerSecretArn", "DatabaseSecretArn", "SubnetIds"} <= required
    config = tomllib.loads((ROOT / "samconfig.toml").read_text("utf-8"))
    known = set(sam_template["Parameters"])
    for environment in ("default", "prod"):
        overrides = config[environment]["deploy"]["parameters"]["parameter_overrides"]
        named = {override.partition("=")[0] for override in overrides}
        assert required <= named, environment
        assert named <= known, environment


# --- what both functions share (Globals) -------------------------------------


def test_both_functions_share_runtime_architecture_network_log_format_and_tls_settings(
    sam_template: dict[str, Any], function: dict[str, Any], migration_function: dict[str, Any]
) -> None:
    shared = sam_template["Globals"]["Function"]
    assert set(shared) == {"Runtime", "Architectures", "VpcConfig", "LoggingConfig", "Environment"}
    for props in (function, migration_function):
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["x86_64"]
        assert props["VpcConfig"] == shared["VpcConfig"]
        assert props["LoggingConfig"]["LogFormat"] == "JSON"
        for name, value in shared["Environment"]["Variables"].items():
            assert props["Environment"]["Variables"][name] == value
    # Each function's own section says only what is its alone.
    for logical_id in ("DispatchFunction", "MigrationFunction"):
        own = sam_template["Resources"][logical_id]["Properties"]
        assert {"Runtime", "Architectures", "VpcConfig"}.isdisjoint(own), logical_id


# --- the network the stack needs ---------------------------------------------

_ENDPOINTS = {
    "S3GatewayEndpoint": ("s3", "Gateway", "CreatesEndpoints"),
    "LambdaEndpoint": ("lambda", "Interface", "CreatesEndpoints"),
    "SecretsManagerEndpoint": ("secretsmanager", "Interface", "CreatesSecretsManagerEndpoint"),
}


def test_network_routes_offer_existing_routes_or_the_endpoints_the_functions_call(
    sam_template: dict[str, Any], resources: dict[str, dict[str, Any]]
) -> None:
    parameter = sam_template["Parameters"]["NetworkRoutes"]
    assert parameter["AllowedValues"] == [
        "existing",
        "endpoints",
        "endpoints-except-secrets-manager",
    ]
    # A stack that names nothing keeps the routes it had: no endpoint appears unasked.
    assert parameter["Default"] == "existing"
    conditions = sam_template["Conditions"]
    assert conditions["CreatesEndpoints"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "NetworkRoutes"}, "existing"]}]
    }
    assert conditions["CreatesSecretsManagerEndpoint"] == {
        "Fn::Equals": [{"Ref": "NetworkRoutes"}, "endpoints"]
    }
    found = {
        logical_id: resource
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::EC2::VPCEndpoint"
    }
    assert set(found) == set(_ENDPOINTS)
    for logical_id, (service, kind, condition) in _ENDPOINTS.items():
        endpoint = found[logical_id]
        assert endpoint["Condition"] == condition
        props = endpoint["Properties"]
        assert props["ServiceName"] == {"Fn::Sub": f"com.amazonaws.${{AWS::Region}}.{service}"}
        assert (props["VpcEndpointType"], props["VpcId"]) == (kind, {"Ref": "VpcId"})
        if kind == "Interface":
            # Private DNS: boto3's default endpoint names resolve to the endpoint.
            assert props["PrivateDnsEnabled"] is True
            assert props["SubnetIds"] == {"Ref": "SubnetIds"}
            assert props["SecurityGroupIds"] == [{"Ref": "EndpointSecurityGroup"}]
        else:
            assert props["RouteTableIds"] == {"Fn::Split": [",", {"Ref": "RouteTableIds"}]}


def test_the_interface_endpoints_admit_https_from_the_functions_security_group_only(
    resources: dict[str, dict[str, Any]],
) -> None:
    group = resources["EndpointSecurityGroup"]
    assert group["Condition"] == "CreatesEndpoints"
    (rule,) = group["Properties"]["SecurityGroupIngress"]
    assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) == ("tcp", 443, 443)
    assert rule["SourceSecurityGroupId"] == {"Fn::Select": [0, {"Ref": "SecurityGroupIds"}]}
    assert "CidrIp" not in rule


def test_endpoints_are_refused_without_the_vpc_and_route_tables_they_go_in(
    sam_template: dict[str, Any],
) -> None:
    rule = sam_template["Rules"]["EndpointsNameTheirNetwork"]
    assert rule["RuleCondition"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "NetworkRoutes"}, "existing"]}]
    }
    asserted = [a["Assert"] for a in rule["Assertions"]]
    assert asserted == [
        {"Fn::Not": [{"Fn::Equals": [{"Ref": name}, ""]}]} for name in ("VpcId", "RouteTableIds")
    ]


def test_the_migration_step_waits_for_the_routes_it_answers_and_reads_secrets_over(
    resources: dict[str, dict[str, Any]],
) -> None:
    props = resources["SchemaMigration"]["Properties"]
    assert props["S3Route"] == {
        "Fn::If": ["CreatesEndpoints", {"Ref": "S3GatewayEndpoint"}, "existing"]
    }
    assert props["SecretsManagerRoute"] == {
        "Fn::If": ["CreatesSecretsManagerEndpoint", {"Ref": "SecretsManagerEndpoint"}, "existing"]
    }


# --- logs and queues an operator keeps ---------------------------------------


@pytest.mark.parametrize(
    "logical_id",
    ["DispatchLogGroup", "MigrationLogGroup", "FailedRunQueue", "ScheduleDeadLetterQueue"],
)
def test_log_groups_and_queues_outlive_the_stack_and_a_replacement(
    resources: dict[str, dict[str, Any]], logical_id: str
) -> None:
    resource = resources[logical_id]
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")


@pytest.mark.parametrize("logical_id", ["DispatchLogGroup", "MigrationLogGroup"])
def test_log_groups_keep_the_retention_and_the_optional_key_the_parameters_name(
    sam_template: dict[str, Any], resources: dict[str, dict[str, Any]], logical_id: str
) -> None:
    props = resources[logical_id]["Properties"]
    assert props["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    assert props["KmsKeyId"] == {
        "Fn::If": ["HasLogKmsKey", {"Ref": "LogKmsKeyArn"}, {"Ref": "AWS::NoValue"}]
    }
    parameters = sam_template["Parameters"]
    assert (
        parameters["LogRetentionDays"]["Default"] in parameters["LogRetentionDays"]["AllowedValues"]
    )
    assert parameters["LogKmsKeyArn"]["Default"] == ""


def test_the_migration_step_logs_json_to_its_own_group(migration_function: dict[str, Any]) -> None:
    assert migration_function["LoggingConfig"] == {
        "LogGroup": {"Ref": "MigrationLogGroup"},
        "LogFormat": "JSON",
    }


# --- capacity alarms ---------------------------------------------------------


def test_an_invocation_past_80_percent_of_the_timeout_raises_an_alarm(
    resources: dict[str, dict[str, Any]], function: dict[str, Any]
) -> None:
    alarm = _alarms(resources)["DurationNearTimeoutAlarm"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/Lambda", "Duration", "Maximum",
    )  # fmt: skip
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "DispatchFunction"}}]
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == function["Timeout"] * 1000 * 8 // 10


def test_a_throttled_invocation_raises_an_alarm(resources: dict[str, dict[str, Any]]) -> None:
    alarm = _alarms(resources)["ThrottlesAlarm"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/Lambda", "Throttles", "Sum",
    )  # fmt: skip
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "DispatchFunction"}}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)


def test_the_degraded_alarm_watches_new_faults_not_the_faults_that_persist(
    resources: dict[str, dict[str, Any]],
) -> None:
    alarm = _alarms(resources)["DegradedRunAlarm"]
    assert alarm["MetricName"] == "NewFaults"
    assert not [a for a in _alarms(resources).values() if a["MetricName"] in ("Faults", "Degraded")]


def test_the_schedule_name_output_names_the_schedule_the_event_names(
    sam_template: dict[str, Any], resources: dict[str, dict[str, Any]]
) -> None:
    event = sam_template["Resources"]["DispatchFunction"]["Properties"]["Events"]["DailyDispatch"]
    generated = resources["DispatchFunctionDailyDispatch"]["Properties"]
    assert generated["Name"] == event["Properties"]["Name"]


def test_secrets_manager_rotates_the_dispatchers_password_through_its_own_function(
    sam_template: dict[str, Any], resources: dict[str, dict[str, Any]]
) -> None:
    parameter = sam_template["Parameters"]["DatabaseLoginRotationDays"]
    # Off unless asked for: a stack that manages its secret otherwise keeps doing so.
    assert (parameter["Default"], parameter["MinValue"]) == (0, 0)
    assert sam_template["Conditions"]["RotatesSecret"] == {
        "Fn::And": [
            {"Condition": "UsesPasswordAuth"},
            {"Fn::Not": [{"Fn::Equals": [{"Ref": "DatabaseLoginRotationDays"}, "0"]}]},
        ]
    }
    schedule = resources["DatabaseSecretRotation"]
    assert schedule["Type"] == "AWS::SecretsManager::RotationSchedule"
    assert schedule["Condition"] == "RotatesSecret"
    assert schedule["Properties"] == {
        "SecretId": {"Ref": "DatabaseSecretArn"},
        # The alias, as the schedule's target: a rollback moves rotation's code too.
        "RotationLambdaARN": {"Ref": "DispatchFunctionAliaslive"},
        "RotationRules": {"AutomaticallyAfterDays": {"Ref": "DatabaseLoginRotationDays"}},
        "RotateImmediatelyOnUpdate": False,
    }
    permission = resources["DatabaseSecretRotationPermission"]
    assert permission["Condition"] == "RotatesSecret"
    assert permission["Properties"]["Principal"] == "secretsmanager.amazonaws.com"
    assert permission["Properties"]["FunctionName"] == {"Ref": "DispatchFunctionAliaslive"}
    statements = resources["DispatchFunctionRole"]["Properties"]["Policies"][0]["PolicyDocument"][
        "Statement"
    ]
    rotating = {s["Fn::If"][1]["Sid"]: s["Fn::If"] for s in statements if "Fn::If" in s}
    write = rotating["RotateDatabaseSecret"]
    assert write[0] == "RotatesSecret"
    assert write[1]["Resource"] == {"Ref": "DatabaseSecretArn"}
    assert sorted(write[1]["Action"]) == [
        "secretsmanager:DescribeSecret", "secretsmanager:PutSecretValue",
        "secretsmanager:UpdateSecretVersionStage",
    ]  # fmt: skip
    assert rotating["GenerateDatabasePassword"][1]["Action"] == "secretsmanager:GetRandomPassword"
    assert rotating["EncryptRotatedSecret"][0] == "EncryptsRotatedSecret"


# --- deploys that can be undone ------------------------------------------------


def test_every_deploy_publishes_a_version_and_codedeploy_moves_the_live_alias(
    resources: dict[str, dict[str, Any]],
) -> None:
    alias = resources["DispatchFunctionAliaslive"]
    assert alias["Type"] == "AWS::Lambda::Alias"
    assert alias["Properties"]["Name"] == "live"
    version = alias["Properties"]["FunctionVersion"]["Fn::GetAtt"][0]
    assert resources[version]["Type"] == "AWS::Lambda::Version"
    update = alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]
    assert update["DeploymentGroupName"] == {"Ref": "DispatchFunctionDeploymentGroup"}
    group = resources["DispatchFunctionDeploymentGroup"]["Properties"]
    assert group["DeploymentConfigName"] == {"Fn::Sub": ["CodeDeployDefault.Lambda${ConfigName}",
                                                         {"ConfigName": "AllAtOnce"}]}  # fmt: skip
    assert group["AutoRollbackConfiguration"]["Enabled"] is True
    assert set(group["AutoRollbackConfiguration"]["Events"]) >= {
        "DEPLOYMENT_FAILURE",
        "DEPLOYMENT_STOP_ON_ALARM",
    }


def test_the_rollback_triggers_are_alarms_a_bad_release_sets_off_and_never_the_data(
    resources: dict[str, dict[str, Any]],
) -> None:
    group = resources["DispatchFunctionDeploymentGroup"]["Properties"]
    alarms = group["AlarmConfiguration"]
    assert alarms["Enabled"] is True
    assert alarms["Alarms"] == [
        {"Name": {"Ref": "FunctionErrorsAlarm"}},
        {"Name": {"Ref": "DurationNearTimeoutAlarm"}},
    ]
    # Alarms that stay in ALARM until someone acts (a queue, the heartbeat) or keep
    # the state the last run's data left would refuse the deploy that mends them.
    for kept_out in ("FailedRunAlarm", "ScheduleDeadLetterAlarm", "ScheduledRunHeartbeatAlarm",
                     "DegradedRunAlarm", "SetAsideDutiesAlarm", "IncompleteRunAlarm"):  # fmt: skip
        assert {"Name": {"Ref": kept_out}} not in alarms["Alarms"], kept_out


def test_codedeploys_role_moves_only_this_alias_and_reads_only_its_rollback_alarms(
    resources: dict[str, dict[str, Any]],
) -> None:
    group = resources["DispatchFunctionDeploymentGroup"]["Properties"]
    role = resources[group["ServiceRoleArn"]["Fn::GetAtt"][0]]["Properties"]
    grants = {tuple(_listed(s["Action"])): _listed(s["Resource"]) for s in _statements(role)}
    assert grants == {
        ("lambda:GetAlias", "lambda:UpdateAlias", "lambda:GetProvisionedConcurrencyConfig"): [
            {"Fn::GetAtt": ["DispatchFunction", "Arn"]},
            {"Fn::Sub": "${DispatchFunction.Arn}:*"},
        ],
        ("cloudwatch:DescribeAlarms",): [
            {"Fn::GetAtt": ["FunctionErrorsAlarm", "Arn"]},
            {"Fn::GetAtt": ["DurationNearTimeoutAlarm", "Arn"]},
        ],
    }


def _versions(sam_template: dict[str, Any], **parameters: str) -> dict[str, str]:
    """Each function's Version logical id, as the transform names it for these values."""
    packaged = copy.deepcopy(sam_template)
    for resource in packaged["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://artifact-bucket/dispatch.zip"
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            resource["Properties"]["ContentUri"] = "s3://artifact-bucket/layer.zip"
    translator = Translator(
        managed_policy_map=None,
        sam_parser=Parser(),
        boto_session=boto3.session.Session(region_name=REGION),
    )
    result = translator.translate(
        packaged,
        parameter_values={
            "AWS::Region": REGION,
            "AWS::Partition": "aws",
            "AWS::AccountId": "123456789012",
            "AWS::StackName": "duly-dispatcher-test",
            **parameters,
        },
        get_managed_policy_map=lambda: _MANAGED_POLICIES,
    )
    return {
        resource["Properties"]["FunctionName"]["Ref"]: logical_id
        for logical_id, resource in result["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Version"
    }


def test_a_change_of_configuration_alone_publishes_new_versions_for_the_alias(
    sam_template: dict[str, Any],
) -> None:
    # SAM names a version by the template's text and the code's location: a
    # parameter's new value alone (DispatchWorkers=4) is invisible to it, and the
    # alias would keep running the version published with the old one.
    before = _versions(sam_template, ConfigurationDigest="0123456789abcdef")
    assert _versions(sam_template, ConfigurationDigest="0123456789abcdef") == before
    after = _versions(sam_template, ConfigurationDigest="fedcba9876543210")
    assert set(after) == set(before) == {"DispatchFunction", "MigrationFunction"}
    for function in before:
        assert after[function] != before[function], function
    parameter = sam_template["Parameters"]["ConfigurationDigest"]
    assert parameter["Default"] == ""
