"""The stack's migration step, driven by CloudFormation's own event shapes, on a real database.

The response CloudFormation reads goes to a presigned URL; here the sender is
a recorder, and each test asserts what would have been sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import inspect
import json
import re
import shutil
import ssl
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import make_conninfo

import tls_server
from conftest import database_dsn
from dispatch_fn.aws import handle as run_handler
from dispatch_fn.aws import migrate_resource, parse_event, runtime_for
from dispatch_fn.aws.migrate_resource import PHYSICAL_ID, handle, send_to_presigned_url
from dispatch_fn.db import ConnectionCache
from dispatch_fn.db import _scram as scram
from dispatch_fn.db.migrate import apply_migrations, bundled_migrations
from dispatch_fn.run import dispatch
from dispatch_fn.settings import Settings
from https_route import route_https, tunnel_to_this_machine
from support import CLOCK, Conn, duty, insert_duties, task_keys

STACK_ID = "arn:aws:cloudformation:eu-west-1:123456789012:stack/duly-dispatcher-test/1a2b"
RESPONSE_HOST = "cloudformation-custom-resource-response-euwest1.s3.eu-west-1.amazonaws.com"
# A certificate's common name holds 64 characters at most: the stand-in S3 is shorter.
STAND_IN_HOST = "duly-responses.s3.eu-west-1.amazonaws.com"
RESPONSE_URL = (
    f"https://{RESPONSE_HOST}/arn%3Ax?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=5e1f"
)
ALL_VERSIONS = ",".join(each.version for each in bundled_migrations())


def event(request_type: str, **properties: Any) -> dict[str, Any]:
    """A custom-resource request as CloudFormation sends it."""
    body: dict[str, Any] = {
        "RequestType": request_type,
        "ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:duly-migrate",
        "ResponseURL": RESPONSE_URL,
        "StackId": STACK_ID,
        "RequestId": f"req-{request_type.lower()}",
        "LogicalResourceId": "SchemaMigration",
        "ResourceType": "Custom::DulySchema",
        "ResourceProperties": {"ServiceToken": "arn:...", "CodeVersion": "7", **properties},
    }
    if request_type != "Create":
        body["PhysicalResourceId"] = PHYSICAL_ID
    if request_type == "Update":
        body["OldResourceProperties"] = {"ServiceToken": "arn:...", "CodeVersion": "6"}
    return body


class Recorder:
    """Stands in for the presigned URL: keeps every response sent to it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, url: str, response: dict[str, Any]) -> None:
        self.sent.append((url, response))

    @property
    def only(self) -> dict[str, Any]:
        (sent,) = self.sent
        assert sent[0].startswith("https://cloudformation-custom-resource-response")
        return sent[1]


@pytest.fixture
def login(server_dsn: str) -> Iterator[str]:
    """A dispatcher login name of this test's own, dropped after it (roles are cluster-wide)."""
    name = f"duly_dispatch_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def empty_url(server_dsn: str) -> Iterator[str]:
    """A database with no schema at all, as on a first deploy."""
    name = f"duly_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield database_dsn(server_dsn, name)
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def connector(url: str) -> Any:
    def connect() -> AbstractContextManager[psycopg.Connection[Any]]:
        return psycopg.connect(url, autocommit=True)

    return connect


def refuse_to_connect() -> psycopg.Connection[Any]:
    raise AssertionError("a Delete must not touch the database")


def _memberships(conn: Conn, login: str) -> list[str]:
    rows = conn.execute(
        "SELECT m.roleid::regrole::text FROM pg_auth_members m"
        " WHERE m.member = %s::regrole ORDER BY 1",
        (login,),
    ).fetchall()
    return [str(row[0]) for row in rows]


def _database_role(conn: Conn) -> str:
    row = conn.execute("SELECT duly_dispatcher_role()").fetchone()
    assert row is not None
    return str(row[0])


def test_create_on_an_empty_database_applies_every_migration_and_creates_the_login(
    empty_url: str, login: str
) -> None:
    sent = Recorder()
    handle(event("Create", DispatcherUser=login, DispatcherAuth="iam"),
           connect=connector(empty_url), send=sent)  # fmt: skip
    response = sent.only
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert response["Reason"] == f"applied {ALL_VERSIONS}"
    assert response["PhysicalResourceId"] == PHYSICAL_ID
    assert (response["StackId"], response["RequestId"], response["LogicalResourceId"]) == (
        STACK_ID, "req-create", "SchemaMigration",
    )  # fmt: skip
    assert response["Data"]["Applied"] == ALL_VERSIONS
    assert response["Data"]["SchemaVersion"] == bundled_migrations()[-1].version
    assert response["Data"]["DispatcherLogin"] == login
    with psycopg.connect(empty_url, autocommit=True) as conn:
        assert response["Data"]["DbName"] == conn.info.dbname
        assert _memberships(conn, login) == [_database_role(conn)]
        can_login = conn.execute(
            "SELECT rolcanlogin, rolsuper FROM pg_roles WHERE rolname = %s", (login,)
        ).fetchone()
        assert can_login == (True, False)


def test_update_with_nothing_pending_succeeds_and_changes_nothing(
    conn: Conn, db_url: str, login: str
) -> None:
    insert_duties(conn, [duty("d1")])
    before = conn.execute("SELECT version, applied_at FROM duly_schema_migration").fetchall()
    sent = Recorder()
    handle(event("Update", DispatcherUser=login), connect=connector(db_url), send=sent)
    assert sent.only["Status"] == "SUCCESS"
    assert sent.only["Reason"] == "schema is up to date"
    assert sent.only["Data"]["Applied"] == ""
    assert sent.only["PhysicalResourceId"] == PHYSICAL_ID
    after = conn.execute("SELECT version, applied_at FROM duly_schema_migration").fetchall()
    assert after == before
    # Running it again (a second deploy) is as harmless.
    handle(event("Update", DispatcherUser=login), connect=connector(db_url), send=sent)
    assert [response["Status"] for _, response in sent.sent] == ["SUCCESS", "SUCCESS"]


def test_delete_succeeds_without_touching_the_database(conn: Conn, login: str) -> None:
    insert_duties(conn, [duty("d1")])
    sent = Recorder()
    handle(event("Delete", DispatcherUser=login), connect=refuse_to_connect, send=sent)
    assert sent.only["Status"] == "SUCCESS"
    assert "changes nothing" in sent.only["Reason"]
    assert sent.only["PhysicalResourceId"] == PHYSICAL_ID
    row = conn.execute("SELECT count(*) FROM duly_duty").fetchone()
    assert row == (1,)


def test_an_edited_applied_migration_fails_the_deploy_with_the_reason(
    conn: Conn, db_url: str, login: str
) -> None:
    conn.execute("UPDATE duly_schema_migration SET checksum = 'f00d' WHERE version = '0001_schema'")
    sent = Recorder()
    handle(event("Update", DispatcherUser=login), connect=connector(db_url), send=sent)
    assert sent.only["Status"] == "FAILED"
    assert sent.only["Reason"].startswith(
        "MigrationChecksumError: migration '0001_schema' was applied with checksum f00d"
    )
    assert sent.only["Data"] == {}


def test_a_failing_migration_fails_the_deploy_naming_it(
    conn: Conn, db_url: str, login: str
) -> None:
    # The ledger forgets 0001, so it runs again and meets its own tables.
    conn.execute("DELETE FROM duly_schema_migration WHERE version = '0001_schema'")
    sent = Recorder()
    handle(event("Update", DispatcherUser=login), connect=connector(db_url), send=sent)
    assert sent.only["Status"] == "FAILED"
    assert sent.only["Reason"].startswith("MigrationError: migration '0001_schema' failed:")
    assert "already exists" in sent.only["Reason"]


def test_an_unreachable_database_fails_the_deploy_with_the_reason(login: str) -> None:
    unreachable = "host=127.0.0.1 port=1 dbname=duly user=owner connect_timeout=2"
    sent = Recorder()
    handle(event("Create", DispatcherUser=login), connect=connector(unreachable), send=sent)
    assert sent.only["Status"] == "FAILED"
    assert sent.only["Reason"].startswith("OperationalError: ")
    assert sent.only["PhysicalResourceId"] == PHYSICAL_ID


def test_password_auth_gives_the_login_the_password_from_the_dispatchers_secret(
    db_url: str, login: str
) -> None:
    secret = {"username": login, "password": "from-the-secret", "host": "h", "port": 5432,
              "dbname": "duly"}  # fmt: skip
    read: list[str] = []

    def read_secret(arn: str) -> object:
        read.append(arn)
        return json.dumps(secret)

    sent = Recorder()
    properties = {"DispatcherAuth": "password", "DispatcherSecretArn": "arn:secret:dispatcher"}
    handle(event("Create", **properties), connect=connector(db_url), send=sent,
           read_secret=read_secret)  # fmt: skip
    assert sent.only["Status"] == "SUCCESS", sent.only["Reason"]
    assert read == ["arn:secret:dispatcher"]
    assert "from-the-secret" not in json.dumps(sent.only)
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = %s", (login,)
        ).fetchone()
        assert row == (True,)
        assert _memberships(conn, login) == [_database_role(conn)]


def test_the_owner_is_refused_as_the_dispatchers_login(conn: Conn, db_url: str) -> None:
    owner = conn.execute("SELECT current_user").fetchone()
    assert owner is not None
    sent = Recorder()
    handle(event("Create", DispatcherUser=owner[0]), connect=connector(db_url), send=sent)
    assert sent.only["Status"] == "FAILED"
    assert "is the owner that runs migrations" in sent.only["Reason"]


def test_an_unknown_request_type_is_reported_not_left_hanging() -> None:
    sent = Recorder()
    handle(event("Replace"), connect=refuse_to_connect, send=sent)
    assert sent.only["Status"] == "FAILED"
    assert "RequestType='Replace'" in sent.only["Reason"]


class _Answer:
    def __enter__(self) -> _Answer:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def read(self) -> bytes:
        return b""


def test_the_response_is_put_as_json_with_no_content_type() -> None:
    opened: list[Any] = []

    def opener(request: Any, timeout: float) -> _Answer:
        opened.append((request, timeout))
        return _Answer()

    response = {"Status": "SUCCESS", "Reason": "ok", "Data": {}}
    send_to_presigned_url("https://bucket.s3.amazonaws.com/key?X-Amz-Signature=1", response,
                          opener=opener)  # fmt: skip
    ((request, timeout),) = opened
    assert request.get_method() == "PUT"
    assert request.full_url == "https://bucket.s3.amazonaws.com/key?X-Amz-Signature=1"
    assert request.get_header("Content-type") == ""
    assert json.loads(request.data) == response
    assert timeout > 0


def test_a_response_url_that_is_not_https_is_refused() -> None:
    with pytest.raises(ValueError, match="expected an https:// presigned URL"):
        send_to_presigned_url("http://example.com/x", {}, opener=lambda *_, **__: _Answer())


@dataclass
class _LambdaContext:
    remaining_ms: int = 900_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def presigned_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """A local HTTPS server standing in for S3: records each request.

    It answers for ``STAND_IN_HOST``, which the test's https route (a local
    proxy, ``https_route``) reaches it as, and is trusted through SSL_CERT_FILE.
    """
    ca, ca_key = tls_server.certificate_authority("Stand-in S3 CA")
    issued = tls_server.server_certificate(ca, ca_key, STAND_IN_HOST)
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "cert.pem").write_bytes(issued.cert_pem)
    (tmp_path / "key.pem").write_bytes(issued.key_pem)
    received: list[Any] = []

    class Bucket(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers.get("Content-Type"), json.loads(body)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            return None

    server = http.server.HTTPServer(("127.0.0.1", 0), Bucket)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    port = server.server_address[1]
    received.append(f"https://{STAND_IN_HOST}:{port}/response?X-Amz-Signature=ab")
    # urlopen's fresh opener (route_https makes one) reads this test's CA and route.
    with tunnel_to_this_machine() as proxy, route_https(monkeypatch, proxy):
        yield received
    server.shutdown()
    server.server_close()


def test_the_lambda_entry_point_migrates_from_its_environment_and_puts_the_response(
    db_url: str, login: str, presigned_url: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    for name in ("DB_SSLMODE", "DB_SSLROOTCERT", "DB_AUTH", "DB_SECRET_ARN"):
        monkeypatch.delenv(name, raising=False)
    url = presigned_url.pop()
    request = {**event("Update", DispatcherUser=login), "ResponseURL": url}
    returned = migrate_resource.handler(request, _LambdaContext())
    ((path, content_type, body),) = presigned_url
    assert path == "/response?X-Amz-Signature=ab"
    assert content_type == ""
    assert body == returned
    assert body["Status"] == "SUCCESS", body["Reason"]
    assert body["Data"]["DispatcherLogin"] == login


# --- Who can reach what: one stack's login reaches its own database only ---


@pytest.fixture
def two_stacks(server_dsn: str) -> Iterator[list[tuple[str, str]]]:
    """Two databases on one server, each migrated by the custom resource with a login of its own.

    Yields ``(database url, login)`` for each; everything is dropped after.
    """
    stacks: list[tuple[str, str]] = []
    for _ in range(2):
        name = f"duly_stack_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        stacks.append((database_dsn(server_dsn, name), f"duly_dispatch_{uuid.uuid4().hex[:8]}"))
    for url, login in stacks:
        sent = Recorder()
        handle(event("Create", DispatcherUser=login), connect=connector(url), send=sent)
        assert sent.only["Status"] == "SUCCESS", sent.only["Reason"]
    yield stacks
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        for url, login in stacks:
            name = str(psycopg.conninfo.conninfo_to_dict(url)["dbname"])
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(login)))


def _as(url: str, login: str) -> psycopg.Connection[Any]:
    return psycopg.connect(make_conninfo(url, user=login), autocommit=True)


def test_a_stacks_login_reaches_only_its_own_database(
    two_stacks: list[tuple[str, str]], server_dsn: str
) -> None:
    (a_url, a_login), (b_url, b_login) = two_stacks
    for url in (a_url, b_url):
        with psycopg.connect(url, autocommit=True) as owner:
            insert_duties(owner, [duty("d1")])
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        _as(b_url, a_login)
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        _as(a_url, b_login)
    # Even where CONNECT is open again (a database restored without its
    # database-level grants), A's login holds no right on B's tables.
    b_name = str(psycopg.conninfo.conninfo_to_dict(b_url)["dbname"])
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO PUBLIC").format(sql.Identifier(b_name))
        )
    with _as(b_url, a_login) as intruder:
        for statement in (
            "SELECT count(*) FROM duly_duty",
            "UPDATE duly_duty SET last_dispatched_period = '2026-08'",
            "SELECT count(*) FROM duly_task",
            "INSERT INTO duly_dispatch_run (mode, clock, dry_run)"
            " VALUES ('scheduled', now(), false)",
        ):
            with pytest.raises(pg_errors.InsufficientPrivilege):
                intruder.execute(statement)
    # And A's login still runs a whole dispatch, ledger included, on A.
    settings = Settings(database_url=make_conninfo(a_url, user=a_login))
    cache = ConnectionCache()
    report = run_handler(
        {"now": CLOCK}, None, runtime_for(None, settings, cache, clock=lambda: datetime.now(UTC))
    )
    cache.discard()
    assert report["tasks_created"] == 1
    with psycopg.connect(a_url, autocommit=True) as owner:
        assert task_keys(owner) == ["2026-08"]
        ledger = owner.execute("SELECT status FROM duly_dispatch_run").fetchall()
        assert [row[0] for row in ledger] == ["completed"]
    with psycopg.connect(b_url, autocommit=True) as owner:
        assert task_keys(owner) == []


def test_an_upgrade_moves_a_login_out_of_the_cluster_wide_role(empty_url: str, login: str) -> None:
    # The database as the previous release left it: 0005's shared role, and the
    # login the previous migration step put in it.
    with psycopg.connect(empty_url, autocommit=True) as owner:
        apply_migrations(owner, until="0006_task_late_after")
        owner.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE duly_dispatcher").format(
            sql.Identifier(login)))  # fmt: skip
        insert_duties(owner, [duty("d1")])
    sent = Recorder()
    handle(event("Update", DispatcherUser=login), connect=connector(empty_url), send=sent)
    assert sent.only["Status"] == "SUCCESS", sent.only["Reason"]
    assert "0009_dispatcher_per_database" in sent.only["Data"]["Applied"]
    with psycopg.connect(empty_url, autocommit=True) as owner:
        assert _memberships(owner, login) == [_database_role(owner)]
    with _as(empty_url, login) as dispatcher:
        dispatch([dispatcher], parse_event({"now": CLOCK}, current_time=datetime.now(UTC)))
    with psycopg.connect(empty_url, autocommit=True) as owner:
        assert task_keys(owner) == ["2026-08"]


def test_a_migration_that_cannot_close_the_database_to_public_fails(
    server_dsn: str, empty_url: str
) -> None:
    # A migrating role that owns the tables but not the database: its REVOKE
    # only warns, so the migration checks and refuses.
    name = str(psycopg.conninfo.conninfo_to_dict(empty_url)["dbname"])
    migrator = f"duly_migrator_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE").format(sql.Identifier(migrator)))
    try:
        with psycopg.connect(database_dsn(server_dsn, name), autocommit=True) as admin:
            admin.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(
                sql.Identifier(migrator)))  # fmt: skip
        sent = Recorder()
        handle(event("Create", DispatcherUser="duly_never_made"),
               connect=connector(make_conninfo(empty_url, user=migrator)), send=sent)  # fmt: skip
        assert sent.only["Status"] == "FAILED"
        assert "0009_dispatcher_per_database" in sent.only["Reason"]
        assert "PUBLIC can still connect to database" in sent.only["Reason"]
    finally:
        with psycopg.connect(database_dsn(server_dsn, name), autocommit=True) as admin:
            admin.execute(sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(
                sql.Identifier(migrator)))  # fmt: skip
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(migrator)))
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(migrator)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(migrator)))


# --- The custom resource refuses an existing privileged role ---


@pytest.mark.parametrize("attribute", ["SUPERUSER", "CREATEROLE", "CREATEDB", "REPLICATION",
                                       "BYPASSRLS"])  # fmt: skip
def test_an_existing_privileged_role_is_refused_naming_the_attribute(
    server_dsn: str, empty_url: str, login: str, attribute: str
) -> None:
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN {}").format(sql.Identifier(login),
                                                                sql.SQL(attribute)))  # fmt: skip
    sent = Recorder()
    handle(event("Create", DispatcherUser=login), connect=connector(empty_url), send=sent)
    assert sent.only["Status"] == "FAILED"
    assert sent.only["Reason"] == (
        f"ConfigurationError: DispatcherUser {login!r} names an existing role with {attribute}; "
        "expected a login with none of SUPERUSER, CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS "
        "(least privilege: docs/deploy.md)"
    )
    with psycopg.connect(empty_url, autocommit=True) as conn:
        # Refused before anything ran: the database is as empty as it was.
        row = conn.execute("SELECT to_regclass('duly_schema_migration')").fetchone()
        assert row == (None,)


@pytest.mark.parametrize("other", ["pg_read_all_data", "pg_write_all_data", "pg_signal_backend"])
def test_an_existing_role_in_other_roles_is_refused_naming_them(
    server_dsn: str, empty_url: str, login: str, other: str
) -> None:
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
            sql.Identifier(login), sql.Identifier(other)))  # fmt: skip
    sent = Recorder()
    handle(event("Create", DispatcherUser=login), connect=connector(empty_url), send=sent)
    assert sent.only["Status"] == "FAILED"
    assert f"names an existing role that is a member of {other};" in sent.only["Reason"]
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (login,)
        ).fetchone()
    assert row == (True,)


def test_the_login_of_another_stacks_database_is_refused(
    two_stacks: list[tuple[str, str]],
) -> None:
    (a_url, _), (b_url, b_login) = two_stacks
    sent = Recorder()
    handle(event("Update", DispatcherUser=b_login), connect=connector(a_url), send=sent)
    assert sent.only["Status"] == "FAILED"
    with psycopg.connect(b_url, autocommit=True) as b_owner:
        assert f"is a member of {_database_role(b_owner)};" in sent.only["Reason"]
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        _as(a_url, b_login)


def test_an_existing_plain_login_is_adopted(server_dsn: str, empty_url: str, login: str) -> None:
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(login)))
    sent = Recorder()
    handle(event("Create", DispatcherUser=login), connect=connector(empty_url), send=sent)
    assert sent.only["Status"] == "SUCCESS", sent.only["Reason"]
    with psycopg.connect(empty_url, autocommit=True) as conn:
        assert _memberships(conn, login) == [_database_role(conn)]


# --- The custom resource checks its event before it trusts it ---


class _Connections:
    """A connector that counts its calls: a refused event must never reach the database."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url
        self.calls = 0

    def __call__(self) -> psycopg.Connection[Any]:
        self.calls += 1
        if self.url is None:
            raise AssertionError("a refused event must not touch the database")
        return psycopg.connect(self.url, autocommit=True)


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        pytest.param(f"http://{RESPONSE_HOST}/x?X-Amz-Signature=1", "expected an https://",
                     id="plain-http"),
        pytest.param("https://collector.example.com/x?X-Amz-Signature=1",
                     "expected an S3 endpoint", id="not-s3"),
        pytest.param("https://s3.amazonaws.com.example.net/x?X-Amz-Signature=1",
                     "expected an S3 endpoint", id="s3-lookalike"),
        pytest.param("https://bucket.s3.amazonaws.com@example.net/x?X-Amz-Signature=1",
                     "expected an S3 endpoint", id="user-info"),
        pytest.param(f"https://{RESPONSE_HOST}/x", "has no X-Amz-Signature", id="not-presigned"),
        pytest.param("", "expected CloudFormation's presigned URL", id="empty"),
        pytest.param(None, "expected CloudFormation's presigned URL", id="missing"),
    ],
)  # fmt: skip
def test_a_response_url_other_than_an_https_presigned_s3_url_is_refused_before_anything_runs(
    url: str | None, complaint: str
) -> None:
    sent = Recorder()
    connections = _Connections()
    returned = handle({**event("Create", DispatcherUser="x"), "ResponseURL": url},
                      connect=connections, send=sent)  # fmt: skip
    assert (sent.sent, connections.calls) == ([], 0)
    assert returned["Status"] == "FAILED"
    assert returned["Sent"] is False
    assert complaint in returned["Reason"]


@pytest.mark.parametrize(
    "url",
    [
        "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/a?Signature=x&Expires=1",
        "https://cloudformation-custom-resource-response-euwest1.s3.eu-west-1.amazonaws.com/a"
        "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab",
        "https://cloudformation-custom-resource-response-cnnorth1.s3.cn-north-1.amazonaws.com.cn/a"
        "?X-Amz-Signature=ab",
        "https://s3.us-gov-west-1.amazonaws.com/bucket/a?X-Amz-Signature=ab",
        "https://s3-external-1.amazonaws.com/bucket/a?X-Amz-Signature=ab",
    ],
)
def test_every_form_of_presigned_s3_url_is_accepted(url: str) -> None:
    assert migrate_resource.check_response_url(url) == url


def test_a_physical_resource_id_over_1_kb_is_refused_unanswered() -> None:
    sent = Recorder()
    request = {**event("Update", DispatcherUser="x"), "PhysicalResourceId": "p" * 1025}
    returned = handle(request, connect=_Connections(), send=sent)
    assert sent.sent == []
    assert (
        returned["Reason"] == "ValueError: PhysicalResourceId is 1025 bytes; expected at most 1024"
    )


def test_ids_that_leave_no_room_for_a_response_are_refused_unanswered() -> None:
    sent = Recorder()
    request = {**event("Delete"), "StackId": "s" * 4096}
    returned = handle(request, connect=_Connections(), send=sent)
    assert sent.sent == []
    assert "no room for a response of 4096 bytes" in returned["Reason"]


@pytest.mark.parametrize("filler", ["x", "é", "\u2028", "\ud800"], ids=["ascii", "latin",
                         "line-separator", "lone-surrogate"])  # fmt: skip
def test_the_response_body_never_exceeds_4096_bytes(filler: str) -> None:
    def fail_at_length() -> psycopg.Connection[Any]:
        raise RuntimeError(filler * 20_000)

    sent = Recorder()
    request = {**event("Create", DispatcherUser="x"), "StackId": STACK_ID + "-" + "s" * 2500,
               "PhysicalResourceId": "p" * 1024}  # fmt: skip
    handle(request, connect=fail_at_length, send=sent)
    response = sent.only
    assert response["Status"] == "FAILED"
    assert migrate_resource.response_size(response) <= 4096
    # As much of the reason as fits: one more character would not.
    reason = response["Reason"]
    assert reason == ("RuntimeError: " + filler * 20_000)[: len(reason)]
    one_more = ("RuntimeError: " + filler * 20_000)[: len(reason) + 1]
    assert migrate_resource.response_size({**response, "Reason": one_more}) > 4096


def test_a_step_that_outlasts_its_time_is_answered_failed_before_the_timeout() -> None:
    release = threading.Event()

    def hang() -> psycopg.Connection[Any]:
        release.wait(30)
        raise AssertionError("released")

    sent = Recorder()
    started = time.monotonic()
    try:
        handle(event("Create", DispatcherUser="x"), connect=hang, send=sent, time_limit_s=0.5)
    finally:
        release.set()
    assert time.monotonic() - started < 5
    assert sent.only["Status"] == "FAILED"
    assert sent.only["Reason"].startswith(
        "MigrationStepTimeoutError: the migration step did not finish within 0.5 s"
    )


def test_a_bad_setting_is_answered_failed_not_raised(
    presigned_url: list[Any], monkeypatch: pytest.MonkeyPatch, login: str
) -> None:
    monkeypatch.setenv("DATABASE_URL", "host=127.0.0.1 port=1 dbname=duly")
    monkeypatch.setenv("DB_SSLMODE", "sometimes")
    url = presigned_url.pop()
    returned = migrate_resource.handler(
        {**event("Update", DispatcherUser=login), "ResponseURL": url}, _LambdaContext()
    )
    ((_, _, body),) = presigned_url
    assert body == returned
    assert body["Status"] == "FAILED"
    assert body["Reason"].startswith("ConfigurationError: DB_SSLMODE='sometimes'; expected one of")


def test_the_migration_step_holds_no_sql_text_of_its_own() -> None:
    source = inspect.getsource(migrate_resource)
    for keyword in ("SELECT ", "INSERT ", "ALTER ROLE", "CREATE ROLE", "GRANT ", "REVOKE "):
        assert keyword not in source, keyword


# --- The login's password reaches the server only as a SCRAM-SHA-256 verifier ---

_VERIFIER = re.compile(
    r"SCRAM-SHA-256\$(?P<iterations>\d+):(?P<salt>[A-Za-z0-9+/=]+)"
    r"\$(?P<stored>[A-Za-z0-9+/=]+):(?P<server>[A-Za-z0-9+/=]+)"
)


def _matches_password(verifier: str, password: bytes) -> bool:
    """RFC 5802's keys, recomputed from the salt and iterations the verifier itself names."""
    parts = _VERIFIER.fullmatch(verifier)
    assert parts is not None, verifier
    salt = base64.b64decode(parts["salt"])
    salted = hashlib.pbkdf2_hmac("sha256", password, salt, int(parts["iterations"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return (base64.b64decode(parts["stored"]), base64.b64decode(parts["server"])) == (
        hashlib.sha256(client_key).digest(),
        server_key,
    )


def test_the_verifier_answers_rfc_7677s_own_exchange() -> None:
    # RFC 7677, section 3: user "user", password "pencil". The client's proof
    # XOR its signature is ClientKey, whose hash is StoredKey; the server's
    # signature is keyed with ServerKey.
    verifier = scram.verifier("pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    parts = _VERIFIER.fullmatch(verifier)
    assert parts is not None
    assert (parts["iterations"], parts["salt"]) == ("4096", "W22ZaJ0SNY7soEsUEjb6gQ==")
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth_message = (
        f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        f"c=biws,r={nonce}"
    ).encode()
    stored_key = base64.b64decode(parts["stored"])
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    client_key = bytes(p ^ s for p, s in zip(proof, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == stored_key
    server_signature = hmac.new(
        base64.b64decode(parts["server"]), auth_message, hashlib.sha256
    ).digest()
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize(
    ("given", "prepared"),
    [
        pytest.param("plain ascii\x07", "plain ascii\x07", id="ascii-kept-as-is"),
        pytest.param("ﬁsh\u00adⅨ", "fishIX", id="nfkc-and-mapped-to-nothing"),
        pytest.param("a\u00a0b", "a b", id="non-ascii-space"),
        pytest.param("bad\u200ebidi-é", "bad\u200ebidi-é", id="prohibited-falls-back-to-raw"),
    ],
)
def test_saslprep_prepares_the_password_as_postgresql_does(given: str, prepared: str) -> None:
    assert scram.prepared_password(given) == prepared.encode()


class _Traced(psycopg.Connection[Any]):
    """A connection whose client messages libpq writes to a file until it closes."""

    def close(self) -> None:
        if not self.closed:
            # Flushes libpq's buffered trace: PQfinish alone does not.
            self.pgconn.untrace()
        super().close()


def _traced_connector(url: str, trace: Path) -> Any:
    """Connects as ``connector`` does, recording every message the client sends."""

    def connect() -> psycopg.Connection[Any]:
        conn = _Traced.connect(url, autocommit=True)
        out = trace.open("w")
        conn.pgconn.trace(out.fileno())
        _TRACES.append(out)
        return conn

    return connect


_TRACES: list[Any] = []


def test_the_password_reaches_the_server_only_as_its_scram_verifier(
    db_url: str, login: str, tmp_path: Path
) -> None:
    password = "plain-text-never-sent"  # noqa: S105 - the secret under test
    secret = {"username": login, "password": password, "host": "h", "port": 5432, "dbname": "d"}
    sent = Recorder()
    trace = tmp_path / "client.trace"
    handle(event("Create", DispatcherAuth="password", DispatcherSecretArn="arn:secret"),
           connect=_traced_connector(db_url, trace), send=sent,
           read_secret=lambda _: json.dumps(secret))  # fmt: skip
    for out in _TRACES:
        out.close()
    _TRACES.clear()
    assert sent.only["Status"] == "SUCCESS", sent.only["Reason"]
    # One message per timestamped line, with any lines of its text that follow.
    messages = re.split(r"\n(?=\d{4}-\d\d-\d\d \d)", trace.read_text())
    sent_by_client = [message for message in messages if "\tF\t" in message]
    assert sent_by_client, "the trace recorded nothing"
    assert not [line for line in sent_by_client if password in line]
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = %s", (login,)
        ).fetchone()
    assert row is not None
    stored = str(row[0])
    assert stored.startswith("SCRAM-SHA-256$4096:")
    # What the server stores is exactly what the client computed and sent.
    assert [line for line in sent_by_client if "ALTER ROLE" in line and stored in line]
    assert _matches_password(stored, password.encode())
    assert not _matches_password(stored, b"another password")


@pytest.fixture(scope="module")
def scram_server() -> Iterator[tls_server.TlsServer]:
    """A server that authenticates every TCP login by SCRAM-SHA-256 (over TLS)."""
    base = Path(tempfile.mkdtemp(prefix="duly-scram-"))
    server = tls_server.start(base)
    yield server
    tls_server.stop(server)
    shutil.rmtree(base, ignore_errors=True)


def _scram_url(server: tls_server.TlsServer, **fields: str) -> str:
    given = {"user": "postgres", "password": tls_server.PASSWORD, "dbname": "postgres", **fields}
    return make_conninfo(
        host=tls_server.SERVER_NAME, hostaddr=tls_server.LOOPBACK, port=str(server.port),
        sslmode="verify-full", sslrootcert=str(server.trusted_ca), **given,
    )  # fmt: skip


@pytest.mark.parametrize(
    "password",
    ["Secrets-Manager-made/P4ss", "ﬁsh\u00adⅨ-wört", "a\u00a0b", "bad\u200ebidi-é"],
    ids=["ascii", "nfkc", "non-ascii-space", "prohibited"],
)
def test_the_server_accepts_the_password_by_scram_authentication(
    scram_server: tls_server.TlsServer, password: str
) -> None:
    name = f"duly_scram_{uuid.uuid4().hex[:8]}"
    user = f"duly_dispatch_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_scram_url(scram_server), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    secret = {"username": user, "password": password, "host": "h", "port": 5432, "dbname": name}
    sent = Recorder()
    handle(event("Create", DispatcherAuth="password", DispatcherSecretArn="arn:secret"),
           connect=connector(_scram_url(scram_server, dbname=name)), send=sent,
           read_secret=lambda _: json.dumps(secret))  # fmt: skip
    assert sent.only["Status"] == "SUCCESS", sent.only["Reason"]
    # libpq answers the server's SCRAM challenge from the password: only the
    # right one, prepared as the client prepared it, gets in.
    with psycopg.connect(_scram_url(scram_server, user=user, password=password, dbname=name)) as c:
        assert c.execute("SELECT current_user").fetchone() == (user,)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(_scram_url(scram_server, user=user, password=password + "x", dbname=name))


# A release newer than this code applied it; this code (a rollback's) does not bundle it.
NEWER = "9990_from_a_newer_release"


def _record_newer_migration(conn: Conn, version: str = NEWER) -> None:
    conn.execute(
        "INSERT INTO duly_schema_migration (version, checksum) VALUES (%s, %s)",
        (version, hashlib.sha256(version.encode()).hexdigest()),
    )


def test_schema_version_is_what_the_database_holds_when_it_is_ahead_of_the_code(
    conn: Conn, db_url: str, login: str, caplog: pytest.LogCaptureFixture
) -> None:
    _record_newer_migration(conn)
    sent = Recorder()
    with caplog.at_level("WARNING", logger="duly.migrations"):
        handle(event("Update", DispatcherUser=login), connect=connector(db_url), send=sent)
    response = sent.only
    # A rollback's deploy succeeds: the older code runs on the newer schema.
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert response["Data"]["SchemaVersion"] == NEWER
    assert response["Data"]["CodeSchemaVersion"] == bundled_migrations()[-1].version
    assert response["Data"]["UnknownMigrations"] == NEWER
    assert "database is ahead of the code" in response["Reason"]
    assert NEWER in response["Reason"]
    assert "forward-only" in response["Reason"]
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert any(NEWER in message and "ahead of the code" in message for message in warnings)


def test_schema_version_matches_the_code_when_the_database_holds_nothing_newer(
    conn: Conn, db_url: str, login: str
) -> None:
    sent = Recorder()
    handle(event("Update", DispatcherUser=login), connect=connector(db_url), send=sent)
    newest = bundled_migrations()[-1].version
    assert sent.only["Data"]["SchemaVersion"] == sent.only["Data"]["CodeSchemaVersion"] == newest
    assert sent.only["Data"]["UnknownMigrations"] == ""
    assert sent.only["Reason"] == "schema is up to date"


def test_many_unknown_migrations_are_named_within_cloudformations_response_limit(
    conn: Conn, db_url: str, login: str
) -> None:
    newer = [f"99{n:02d}_a_newer_release_with_a_rather_long_descriptive_name" for n in range(60)]
    for version in newer:
        _record_newer_migration(conn, version)
    sent = Recorder()
    handle(event("Update", DispatcherUser=login), connect=connector(db_url), send=sent)
    response = sent.only
    assert response["Status"] == "SUCCESS", response["Reason"]
    assert response["Data"]["SchemaVersion"] == newer[-1]
    unknown = response["Data"]["UnknownMigrations"]
    assert unknown.startswith(newer[0])
    assert unknown.endswith("and 50 more")
    assert migrate_resource.response_size(response) <= migrate_resource.RESPONSE_LIMIT_BYTES
