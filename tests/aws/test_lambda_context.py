"""What CloudWatch sees: Lambda-context keys on each log line, the mode dimension, cold starts,
and failures while connecting counted and logged like any failed run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import psycopg
import pytest
from moto import mock_aws
from psycopg import sql
from psycopg.conninfo import make_conninfo

from dispatch_fn.aws import app
from dispatch_fn.errors import ConfigurationError
from support import CLOCK, Conn, duty, insert_duties

# Three invocations of one warm process, each with its own request id.
_PROBE = """
import sys
from dispatch_fn.aws import app
from dispatch_fn.errors import EventError

class Context:
    function_name = "duly-dispatcher-prod"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:duly-dispatcher-prod"
    def __init__(self, request_id):
        self.aws_request_id = request_id
    def get_remaining_time_in_millis(self):
        return 600_000

app.lambda_handler({"now": sys.argv[1]}, Context("req-1"))
try:
    app.lambda_handler({"to": "2026-01-01"}, Context("req-2"))
except EventError:
    pass
app.lambda_handler({"from": "2026-01-01", "to": "2026-01-31", "now": sys.argv[1]}, Context("req-3"))
"""


def _run_probe(database: str, probe: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", probe, CLOCK],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={
            **os.environ,
            "DATABASE_URL": database,
            "POWERTOOLS_METRICS_DISABLED": "false",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            **env,
        },
    )


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def probe_database(server_dsn: str, template_database: str) -> Iterator[str]:
    """A database of its own, with one duty, for the probes' fresh interpreters."""
    name = f"duly_lc_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_database)
            )
        )
    database = make_conninfo(server_dsn, dbname=name)
    try:
        with psycopg.connect(database, autocommit=True) as conn:
            insert_duties(conn, [duty("d1")])
        yield database
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture(scope="module")
def warm_process(probe_database: str) -> tuple[list[dict[str, Any]], ...]:
    """The logs and the metrics of the three invocations, from a fresh interpreter."""
    completed = _run_probe(probe_database, _PROBE)
    assert completed.returncode == 0, completed.stderr
    return _json_lines(completed.stderr), _json_lines(completed.stdout)


def test_every_log_line_carries_the_lambda_context_and_the_cold_start_flag(
    warm_process: tuple[list[dict[str, Any]], ...],
) -> None:
    logs, _ = warm_process
    by_request: dict[str, list[dict[str, Any]]] = {}
    for line in logs:
        by_request.setdefault(line["function_request_id"], []).append(line)
    assert list(by_request) == ["req-1", "req-2", "req-3"]
    assert {line["cold_start"] for line in by_request["req-1"]} == {True}
    assert {line["cold_start"] for line in by_request["req-2"] + by_request["req-3"]} == {False}
    for line in logs:
        assert line["function_name"] == "duly-dispatcher-prod"
        assert line["function_memory_size"] == 256


def test_keys_of_one_invocation_are_cleared_before_the_next(
    warm_process: tuple[list[dict[str, Any]], ...],
) -> None:
    logs, _ = warm_process
    (refused,) = [line for line in logs if line["message"] == "event refused"]
    # The refusal comes before any run: no clock or mode of the previous run on it.
    assert "clock" not in refused
    assert "mode" not in refused
    (backfill,) = [line for line in logs if line["message"] == "run finished" and
                   line["function_request_id"] == "req-3"]  # fmt: skip
    assert backfill["mode"] == "backfill"


def test_metrics_are_published_per_mode_and_per_service(
    warm_process: tuple[list[dict[str, Any]], ...],
) -> None:
    _, blobs = warm_process
    runs = [blob for blob in blobs if "TasksCreated" in blob]
    assert [blob["mode"] for blob in runs] == ["scheduled", "backfill"]
    for blob in runs:
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        # The service-only set keeps the alarms' metrics; the second adds the mode.
        assert directive["Dimensions"] == [["service"], ["service", "mode"]]


def test_the_cold_start_is_counted_once_per_process(
    warm_process: tuple[list[dict[str, Any]], ...],
) -> None:
    _, blobs = warm_process
    cold = [blob for blob in blobs if "ColdStart" in blob]
    assert [(blob["ColdStart"], blob["function_name"]) for blob in cold] == [
        ([1.0], "duly-dispatcher-prod")
    ]


def test_under_provisioned_concurrency_no_invocation_is_a_cold_start(
    probe_database: str,
) -> None:
    """The log lines' cold_start agrees with the ColdStart metric, which counts none there."""
    completed = _run_probe(
        probe_database, _PROBE, AWS_LAMBDA_INITIALIZATION_TYPE="provisioned-concurrency"
    )
    assert completed.returncode == 0, completed.stderr
    logs = _json_lines(completed.stderr)
    assert {line["function_request_id"] for line in logs} == {"req-1", "req-2", "req-3"}
    assert {line["cold_start"] for line in logs} == {False}
    assert not [blob for blob in _json_lines(completed.stdout) if "ColdStart" in blob]


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Metrics printed as EMF (an earlier local command may have turned them off)."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    yield
    app._connections.discard()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _failed_run(capfd: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one "run failed" log line and the one EMF blob counting it."""
    captured = capfd.readouterr()
    (failed,) = [line for line in _json_lines(captured.err) if line["message"] == "run failed"]
    (emf,) = [blob for blob in _json_lines(captured.out) if "FailedRuns" in blob]
    return failed, emf


def test_a_database_that_cannot_be_reached_is_a_failed_run(
    published: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"postgresql://duly@127.0.0.1:{_closed_port()}/duly")
    capfd.readouterr()
    with pytest.raises(psycopg.OperationalError):
        app.lambda_handler({"now": CLOCK}, None)
    failed, emf = _failed_run(capfd)
    assert failed["mode"] == "scheduled"
    assert "Connection refused" in failed["exception"]
    assert (emf["FailedRuns"], emf["mode"]) == ([1.0], "scheduled")


def test_a_secret_that_cannot_be_read_is_a_failed_run(
    published: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    for name, value in {
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with mock_aws():
        arn = boto3.client("secretsmanager").create_secret(Name="duly/other", SecretString="{}")[
            "ARN"
        ]
        monkeypatch.setenv("DB_SECRET_ARN", arn.replace("duly/other", "duly/missing"))
        capfd.readouterr()
        with pytest.raises(ConfigurationError, match="cannot read the database secret"):
            app.lambda_handler({"now": CLOCK}, None)
    failed, emf = _failed_run(capfd)
    assert "duly/missing" in failed["exception"]
    assert emf["FailedRuns"] == [1.0]


def test_a_bad_setting_is_a_failed_run(
    published: None,
    conn: Conn,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("DISPATCH_WORKERS", "0")
    capfd.readouterr()
    with pytest.raises(ConfigurationError, match="DISPATCH_WORKERS"):
        app.lambda_handler({"now": CLOCK}, None)
    _failed_run(capfd)
