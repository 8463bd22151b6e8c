"""The function's AWS edges: credentials, the warm connection, the deadline, failures, logs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import boto3
import pytest
from moto import mock_aws
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from dispatch_fn.aws import app
from dispatch_fn.db.database import (
    APPLICATION_NAME,
    DEFAULT_SSLMODE,
    ConnectionCache,
    conninfo_from_secret,
)
from dispatch_fn.errors import ConfigurationError
from dispatch_fn.run import RunFailedError
from dispatch_fn.settings import DEFAULT_WORKERS, Settings
from support import CLOCK, Conn, Invoke, duty, insert_duties, task_count

SECRET_PASSWORD = "s3cr3t-never-logged"  # noqa: S105 - a test value; trust auth ignores it


@dataclass
class FakeContext:
    """The parts of Lambda's context object the handler reads."""

    remaining_ms: list[int] = field(default_factory=lambda: [600_000])
    aws_request_id: str = "req-123"
    on_check: Callable[[int], None] | None = None
    checks: int = 0

    def get_remaining_time_in_millis(self) -> int:
        self.checks += 1
        if self.on_check is not None:
            self.on_check(self.checks)
        return self.remaining_ms[min(self.checks, len(self.remaining_ms)) - 1]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield


@pytest.fixture
def secret_arn(aws: None, db_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """An RDS-shaped secret pointing at this test's database; DATABASE_URL unset."""
    parts = conninfo_to_dict(db_url)
    secret = {
        "engine": "postgres",
        "username": parts.get("user") or "postgres",
        "password": SECRET_PASSWORD,
        "host": parts.get("host") or "127.0.0.1",
        "port": int(parts.get("port") or 5432),
        "dbname": parts["dbname"],
    }
    arn = boto3.client("secretsmanager").create_secret(
        Name="duly/db", SecretString=json.dumps(secret)
    )["ARN"]
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("DB_SECRET_ARN", arn)
    # The test server may listen on a socket or plain TCP; AWS keeps 'require'.
    monkeypatch.setenv("DB_SSLMODE", "prefer")
    return arn


def test_credentials_come_from_the_secrets_manager_secret(conn: Conn, secret_arn: str) -> None:
    insert_duties(conn, [duty("d1")])
    report = app.lambda_handler({"now": CLOCK}, FakeContext())
    assert report["tasks_created"] == 1
    assert task_count(conn) == 1


def test_the_password_never_reaches_the_logs(
    conn: Conn, secret_arn: str, capfd: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("d1")])
    app.lambda_handler({"now": CLOCK}, FakeContext())
    captured = capfd.readouterr()
    assert SECRET_PASSWORD not in captured.out + captured.err
    lines = [json.loads(line) for line in captured.err.splitlines() if line.startswith("{")]
    finished = next(line for line in lines if line["message"] == "run finished")
    assert finished["mode"] == "scheduled"
    assert finished["clock"] == "2026-08-21T01:00:00+00:00"
    assert finished["request_id"] == "req-123"


def test_a_secret_without_the_rds_fields_is_refused_by_name_not_value() -> None:
    with pytest.raises(ConfigurationError, match="host, dbname") as refused:
        conninfo_from_secret(
            {"username": "u", "password": SECRET_PASSWORD, "port": 5432}, "require"
        )
    assert SECRET_PASSWORD not in str(refused.value)


def test_the_secret_becomes_a_tls_conninfo_by_default() -> None:
    secret = {
        "username": "u",
        "password": "p",
        "host": "db.example",
        "port": 5432,
        "dbname": "duly",
    }
    parts = conninfo_to_dict(conninfo_from_secret(json.dumps(secret), DEFAULT_SSLMODE))
    assert parts == {
        "user": "u", "password": "p", "host": "db.example", "port": "5432", "dbname": "duly",
        "sslmode": "verify-full",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DB_SSLMODE", "sometimes"),
        ("DISPATCH_CHUNK_SIZE", "0"),
        ("DISPATCH_CHUNK_SIZE", "many"),
        ("DISPATCH_PAGE_ROWS", "0"),
        ("DISPATCH_MAX_WINDOW_DAYS", "-1"),
        ("DISPATCH_WORKERS", "0"),
        ("DISPATCH_WORKERS", "17"),
        ("DB_USES_RDS_PROXY", "yes"),
    ],
)
def test_a_bad_setting_is_refused_with_its_name(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        Settings.from_environ({name: value})


def test_the_connection_is_configured_for_the_dispatcher(
    conn: Conn, invoke: Invoke, connections: ConnectionCache, settings: Settings
) -> None:
    configured = replace(settings, uses_rds_proxy=True, statement_timeout_ms=123000)
    invoke({"now": CLOCK}, uses_rds_proxy=True, statement_timeout_ms=123000)
    cached = connections.get(configured)
    assert len(cached) == DEFAULT_WORKERS
    for each in cached:
        assert each.prepare_threshold is None  # RDS Proxy: never pin a session
        assert each.execute("SHOW statement_timeout").fetchone() == ("123s",)
        assert each.execute("SHOW application_name").fetchone() == ("duly-dispatcher",)


def test_a_broken_warm_connection_is_replaced_on_the_next_invocation(
    conn: Conn, invoke: Invoke, connections: ConnectionCache, settings: Settings
) -> None:
    insert_duties(conn, [duty("d1")])
    invoke({"now": CLOCK})
    dead, alive = connections.get(settings)
    conn.execute("SELECT pg_terminate_backend(%s)", (dead.info.backend_pid,))
    insert_duties(conn, [duty("d2")])
    report = invoke({"now": CLOCK})
    assert report["tasks_created"] == 1
    now_cached = connections.get(settings)
    assert alive in now_cached  # a connection that still works is kept
    assert dead not in now_cached
    assert dead.closed


def test_a_server_that_refuses_the_extra_connections_gets_a_run_on_the_ones_it_gave(
    conn: Conn,
    invoke: Invoke,
    connections: ConnectionCache,
    settings: Settings,
    capfd: pytest.CaptureFixture[str],
) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(5)])
    # The server's own refusal: a role allowed one connection at a time
    # (superusers are exempt from connection limits, so not the test's role).
    role = f"duly_one_conn_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT 1").format(sql.Identifier(role)))
    try:
        conn.execute(
            sql.SQL(
                "GRANT SELECT, INSERT, UPDATE ON duly_duty, duly_task, duly_dispatch_run,"
                " duly_dispatch_set_aside TO {0}; GRANT SELECT, INSERT, DELETE ON"
                " duly_dispatch_fault TO {0}"
            ).format(sql.Identifier(role))
        )
        limited = replace(
            settings,
            database_url=make_conninfo(str(settings.database_url), user=role),
            workers=2,
            chunk_size=2,
        )
        report = invoke({"now": CLOCK}, **asdict(limited))
        assert (report["tasks_created"], report["complete"]) == (5, True)
        assert len(connections.get(limited)) == 1
        assert "fewer connections than DISPATCH_WORKERS" in capfd.readouterr().err
    finally:
        connections.discard()
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_fewer_workers_close_the_connections_no_longer_needed(
    conn: Conn, invoke: Invoke, connections: ConnectionCache, settings: Settings
) -> None:
    invoke({"now": CLOCK}, workers=3)
    three = connections.get(replace(settings, workers=3))
    invoke({"now": CLOCK}, workers=1)
    (one,) = connections.get(replace(settings, workers=1))
    assert one is three[0]
    assert [each.closed for each in three[1:]] == [True, True]


def test_a_run_near_its_timeout_stops_between_pages_and_the_next_one_completes_it(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(5)])
    # One worker: pages in id order, so the stop is known.
    small: dict[str, Any] = {"chunk_size": 2, "workers": 1}
    # Plenty of time for two pages, then less than the 30 s reserve.
    first = invoke({"now": CLOCK}, FakeContext(remaining_ms=[600_000, 600_000, 20_000]), **small)
    assert first["complete"] is False
    assert first["last_duty_id"] == "d3"
    assert first["tasks_created"] == task_count(conn) == 4
    second = invoke({"now": CLOCK}, FakeContext(), **small)
    assert second["complete"] is True
    # The four done have their accounts kept: the second run owes the fifth alone.
    assert (second["tasks_created"], second["tasks_existing"], second["duties_owing"]) == (1, 0, 1)


def test_a_dropped_connection_fails_the_run_with_how_far_it_got_for_the_failure_queue(
    conn: Conn, invoke: Invoke, connections: ConnectionCache, settings: Settings, aws: None
) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(5)])
    # One worker: pages in id order, so the failure point is known.
    small: dict[str, Any] = {"chunk_size": 2, "workers": 1}

    def drop_connection(check: int) -> None:
        if check >= 3:  # after two pages committed; every fresh connection the run opens too
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND datname = current_database()",
                (APPLICATION_NAME,),
            )

    event = {"now": CLOCK}
    with pytest.raises(RunFailedError) as failed:
        invoke(event, FakeContext(on_check=drop_connection), **small)
    assert task_count(conn) == 4
    assert failed.value.report["tasks_created"] == 4

    # What Lambda's on-failure destination sends: the event and the error.
    sqs = boto3.client("sqs")
    queue_url = sqs.create_queue(QueueName="duly-failed-runs")["QueueUrl"]
    record = {
        "requestContext": {"condition": "RetriesExhausted", "approximateInvokeCount": 3},
        "requestPayload": event,
        "responsePayload": {
            "errorType": type(failed.value).__name__,
            "errorMessage": str(failed.value),
        },
    }
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(record))
    received = json.loads(sqs.receive_message(QueueUrl=queue_url)["Messages"][0]["Body"])
    message = received["responsePayload"]["errorMessage"]
    assert received["requestPayload"] == event
    assert "last duty id 'd3'" in message
    so_far = json.loads(message.split("report so far: ", 1)[1])
    assert (so_far["tasks_created"], so_far["complete"]) == (4, False)

    rerun = invoke(event, FakeContext(), **small)
    assert (rerun["tasks_created"], rerun["tasks_existing"], rerun["duties_owing"]) == (1, 0, 1)


def test_each_run_publishes_its_figures_as_embedded_metrics(
    conn: Conn, deployed: Invoke, capfd: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("good"), duty("mars", timezone="Mars/Olympus")])
    capfd.readouterr()
    deployed({"now": CLOCK}, FakeContext())
    out = capfd.readouterr().out
    # The run's own blob; a first invocation in the process also prints ColdStart's.
    blobs = [json.loads(line) for line in out.splitlines() if '"TasksCreated"' in line]
    (emf,) = blobs
    (directive,) = emf["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Duly"
    assert {metric["Name"] for metric in directive["Metrics"]} >= {
        "DutiesRead", "TasksCreated", "TasksExisting", "Faults", "Degraded", "Incomplete",
        "DurationMs",
    }  # fmt: skip
    assert (emf["TasksCreated"], emf["Faults"], emf["Degraded"]) == ([1.0], [1.0], [1.0])
    assert emf["service"] == "duly-dispatcher"
