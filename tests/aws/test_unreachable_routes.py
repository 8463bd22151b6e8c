"""A call whose route is missing fails in seconds and names the route (docs/deploy.md).

Both functions run in the VPC. Without an S3 gateway endpoint or a NAT, the
migration step's answer to CloudFormation cannot leave; without a Lambda
interface endpoint or a NAT, neither can a continuation's ``lambda:Invoke``.
A subnet with no route drops the connection attempt, so the caller hears
nothing at all: a local listening socket whose backlog is full does the same
(the kernel drops further SYNs), and stands in for the missing route here.
"""

from __future__ import annotations

import logging
import socket
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from dispatch_fn.aws import migrate_resource
from dispatch_fn.aws.migrate_resource import send_to_presigned_url
from dispatch_fn.db import database
from dispatch_fn.errors import ConfigurationError, HandOffError, ResponseNotDeliveredError
from dispatch_fn.run import continuation
from dispatch_fn.settings import Settings
from https_route import route_https
from support import CLOCK, Conn, Invoke, duty, insert_duties

_REGION = "eu-west-1"
_S3_HOST = "cloudformation-custom-resource-response-euwest1.s3.eu-west-1.amazonaws.com"
_FUNCTION_ARN = f"arn:aws:lambda:{_REGION}:123456789012:function:duly-dispatch"


@pytest.fixture
def unroutable_port() -> Iterator[int]:
    """A local port that drops every connection attempt, as a subnet with no route does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = int(server.getsockname()[1])
    # The one connection the backlog holds; the kernel drops the SYNs of the rest.
    held = socket.create_connection(("127.0.0.1", port), timeout=2)
    probe = socket.socket()
    probe.settimeout(0.5)
    # The stand-in must hang, not refuse: a refused connection fails fast by itself.
    with pytest.raises(TimeoutError):
        probe.connect(("127.0.0.1", port))
    probe.close()
    yield port
    held.close()
    server.close()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_DEFAULT_REGION": _REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")


@pytest.fixture
def s3_without_a_route(unroutable_port: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """CloudFormation's presigned response URL, https routed to the unroutable port."""
    with route_https(monkeypatch, f"http://127.0.0.1:{unroutable_port}"):
        yield f"https://{_S3_HOST}/stack%7Crequest?X-Amz-Signature=ab"


# --- the migration step's answer to CloudFormation -------------------------


def test_the_answer_to_cloudformation_fails_within_seconds_naming_the_s3_route(
    s3_without_a_route: str,
) -> None:
    started = time.monotonic()
    with pytest.raises(ResponseNotDeliveredError) as failed:
        send_to_presigned_url(s3_without_a_route, {"Status": "FAILED", "Reason": "x"})
    elapsed = time.monotonic() - started
    # Every attempt waits its full timeout: the route is missing, not refusing.
    attempts = migrate_resource.RESPONSE_ATTEMPTS
    assert attempts * migrate_resource.RESPONSE_TIMEOUT_S <= elapsed < 20
    message = str(failed.value)
    assert f"could not reach S3 ({_S3_HOST})" in message
    assert f"{attempts} attempts of 5 s each" in message
    assert "S3 gateway endpoint (NetworkRoutes=endpoints) or a NAT gateway" in message


def test_a_refused_answer_is_not_retried_and_says_what_s3_answered() -> None:
    tried: list[object] = []

    def refusing(request: Any, timeout: float) -> Any:
        tried.append(request)
        raise urllib.error.HTTPError(request.full_url, 403, "Forbidden", {}, None)  # type: ignore[arg-type]

    with pytest.raises(ResponseNotDeliveredError, match=r"refused the answer.*HTTP 403 Forbidden"):
        send_to_presigned_url(
            f"https://{_S3_HOST}/r?X-Amz-Signature=ab", {"Status": "SUCCESS"}, opener=refusing
        )
    assert len(tried) == 1


@dataclass
class _Context:
    remaining_ms: int = 900_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_the_migration_step_logs_the_answer_it_could_not_deliver(
    s3_without_a_route: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A setting the step refuses: its FAILED answer is ready at once, and only
    # the route to S3 is missing.
    monkeypatch.setenv("DATABASE_URL", "host=127.0.0.1 port=1 dbname=duly")
    monkeypatch.setenv("DB_SSLMODE", "sometimes")
    request = {
        "RequestType": "Create",
        "ResponseURL": s3_without_a_route,
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/duly/1",
        "RequestId": "req-1",
        "LogicalResourceId": "SchemaMigration",
        "ResourceProperties": {"DispatcherAuth": "iam", "DispatcherUser": "duly_dispatch"},
    }
    started = time.monotonic()
    with (
        caplog.at_level(logging.ERROR, logger="duly.migrations"),
        pytest.raises(ResponseNotDeliveredError),
    ):
        migrate_resource.handler(request, _Context())
    assert time.monotonic() - started < 20
    (record,) = [r for r in caplog.records if "not delivered" in r.getMessage()]
    assert "Status FAILED" in record.getMessage()
    assert "DB_SSLMODE='sometimes'" in record.getMessage()
    assert record.exc_info is not None
    assert "NAT gateway" in str(record.exc_info[1])


# --- a continuation's lambda:Invoke -----------------------------------------


@pytest.fixture
def lambda_without_a_route(
    unroutable_port: int, aws_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The Lambda API, as boto3 finds it, at the unroutable port."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", f"http://127.0.0.1:{unroutable_port}")
    return _FUNCTION_ARN


def test_a_hand_off_without_a_route_fails_within_seconds_naming_the_lambda_route(
    lambda_without_a_route: str,
) -> None:
    client = continuation.lambda_client_for(lambda_without_a_route)
    started = time.monotonic()
    with pytest.raises(HandOffError) as failed:
        continuation.hand_off(client, lambda_without_a_route, {"now": CLOCK, "continuation": 1})
    elapsed = time.monotonic() - started
    attempts = continuation.HAND_OFF_ATTEMPTS
    assert attempts * continuation.HAND_OFF_CONNECT_TIMEOUT_S <= elapsed < 15
    message = str(failed.value)
    assert "the Lambda API did not answer (Connect timeout" in message
    assert "Lambda interface endpoint (NetworkRoutes=endpoints) or a NAT gateway" in message


@dataclass
class _RunContext:
    """A run whose first deadline check finds it out of time: it must hand off."""

    invoked_function_arn: str
    aws_request_id: str = "req-1"
    checked: int = 0

    def get_remaining_time_in_millis(self) -> int:
        self.checked += 1
        return 600_000 if self.checked <= 1 else 0


def test_a_run_whose_hand_off_has_no_route_ends_incomplete_within_seconds_and_says_why(
    conn: Conn, invoke: Invoke, lambda_without_a_route: str
) -> None:
    insert_duties(conn, [duty(f"d{n:03}") for n in range(6)])
    invoke = partial(invoke, chunk_size=2, workers=1)
    started = time.monotonic()
    report = invoke({"now": CLOCK}, _RunContext(lambda_without_a_route))
    assert time.monotonic() - started < 20
    assert (report["complete"], report["handed_off"]) == (False, False)
    assert "the Lambda API did not answer" in report["hand_off_error"]
    assert report["incomplete_reason"] == report["hand_off_error"]
    statuses = conn.execute("SELECT status FROM duly_dispatch_run").fetchall()
    assert statuses == [("incomplete",)]


# --- the dispatcher's secret, read at run time -----------------------------


@pytest.fixture
def secrets_manager_without_a_route(
    unroutable_port: int, aws_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Secrets Manager, as boto3 finds it, at the unroutable port; a fresh client for it."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", f"http://127.0.0.1:{unroutable_port}")
    database._secrets.cache_clear()
    yield f"arn:aws:secretsmanager:{_REGION}:123456789012:secret:duly/dispatcher-AbCdEf"
    database._secrets.cache_clear()


def test_a_run_time_secret_read_without_a_route_fails_within_seconds_naming_the_route(
    secrets_manager_without_a_route: str,
) -> None:
    settings = Settings(secret_arn=secrets_manager_without_a_route)
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as failed:
        database.conninfo_for(settings)
    elapsed = time.monotonic() - started
    attempts = database.SECRET_ATTEMPTS
    assert attempts * database.SECRET_CONNECT_TIMEOUT_S <= elapsed < 20
    message = str(failed.value)
    assert secrets_manager_without_a_route in message
    assert "interface endpoint (NetworkRoutes=endpoints) or a NAT gateway" in message
