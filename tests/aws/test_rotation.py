"""Rotating the dispatcher's password: the four Secrets Manager steps, against moto's Secrets
Manager and the real PostgreSQL, and the dispatcher following the secret as it moves.

See docs/operations.md#rotating-the-dispatchers-password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import boto3
import psycopg
import pytest
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.secretsmanager.models import secretsmanager_backends
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from dispatch_fn.aws import app, rotation
from dispatch_fn.db import database
from dispatch_fn.errors import RotationError
from dispatch_fn.settings import Settings
from support import Conn

OLD_PASSWORD = "the-password-before-rotation"  # noqa: S105 - a test login's password


def _matches(verifier: str, password: str) -> bool:
    """Whether a stored SCRAM-SHA-256 verifier is ``password``'s (RFC 5802's StoredKey)."""
    method, rest = verifier.split("$", 1)
    assert method == "SCRAM-SHA-256"
    iterations_salt, keys = rest.split("$")
    iterations, salt = iterations_salt.split(":")
    stored = keys.split(":")[0]
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(salt), int(iterations)
    )
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    return base64.b64encode(hashlib.sha256(client_key).digest()).decode() == stored


@pytest.fixture
def login(conn: Conn, dispatcher_role: str) -> Iterator[str]:
    """A login of this test's own in the dispatcher's role, with OLD_PASSWORD."""
    name = f"duly_rotation_{uuid.uuid4().hex[:10]}"
    conn.execute(
        sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}").format(
            sql.Identifier(name), sql.Literal(OLD_PASSWORD), sql.Identifier(dispatcher_role)
        )
    )
    yield name
    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture
def rotating(login: str, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The login's RDS-shaped secret in moto, a rotation started on it (its AWSPENDING
    version, with no value yet, as Secrets Manager leaves it for createSecret)."""
    for name, value in {
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    parts = conninfo_to_dict(db_url)
    with mock_aws():
        secrets = boto3.client("secretsmanager")
        arn = secrets.create_secret(
            Name="duly/dispatcher",
            SecretString=json.dumps({
                "engine": "postgres", "username": login, "password": OLD_PASSWORD,
                "host": parts.get("host") or "127.0.0.1", "port": int(parts.get("port") or 5432),
                "dbname": parts["dbname"],
            }),
        )["ARN"]  # fmt: skip
        token = _start_rotation(secrets, arn)
        signed_in: list[str] = []

        def connect(fields: Mapping[str, str]) -> psycopg.Connection[Any]:
            signed_in.append(fields["password"])
            return psycopg.connect(
                make_conninfo(db_url, user=fields["username"], password=fields["password"]),
                autocommit=True,
            )

        yield {"secrets": secrets, "arn": arn, "token": token, "connect": connect,
               "signed_in": signed_in}  # fmt: skip


def _start_rotation(secrets: Any, arn: str) -> str:
    """The state Secrets Manager leaves before it invokes createSecret: rotation enabled, and a
    new version staged AWSPENDING that holds no value yet.

    moto's RotateSecret without a function completes the rotation itself, so rotation is
    enabled through it (RotateImmediately=False: the value is kept) and the pending version
    is added to moto's own record of the secret, as AWS adds it.
    """
    secrets.rotate_secret(
        SecretId=arn, RotationRules={"AutomaticallyAfterDays": 30}, RotateImmediately=False
    )
    token = str(uuid.uuid4())
    backend = secretsmanager_backends[DEFAULT_ACCOUNT_ID]["eu-west-1"]
    backend.secrets[arn].versions[token] = {
        "createdate": 0, "version_id": token, "version_stages": ["AWSPENDING"],
    }  # fmt: skip
    return token


def _step(rotating: dict[str, Any], step: str) -> str:
    event = {"SecretId": rotating["arn"], "ClientRequestToken": rotating["token"], "Step": step}
    assert rotation.is_rotation(event)
    return rotation.rotate(event, secrets=rotating["secrets"], connect=rotating["connect"])


def _verifier(conn: Conn, login: str) -> str:
    row = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (login,)).fetchone()
    assert row is not None
    return str(row[0])


def _value(rotating: dict[str, Any], stage: str) -> dict[str, Any]:
    found = rotating["secrets"].get_secret_value(SecretId=rotating["arn"], VersionStage=stage)
    parsed: dict[str, Any] = json.loads(found["SecretString"])
    return parsed


def test_the_four_steps_give_the_login_a_new_password_and_make_it_current(
    conn: Conn, login: str, rotating: dict[str, Any]
) -> None:
    assert _matches(_verifier(conn, login), OLD_PASSWORD)

    for step in rotation.STEPS:
        _step(rotating, step)

    current = _value(rotating, "AWSCURRENT")
    assert current["password"] != OLD_PASSWORD
    assert len(current["password"]) == rotation.PASSWORD_LENGTH
    assert {key: value for key, value in current.items() if key != "password"} == {
        key: value for key, value in _value(rotating, "AWSPREVIOUS").items() if key != "password"
    }
    assert _value(rotating, "AWSPREVIOUS")["password"] == OLD_PASSWORD
    # The server holds the new password's verifier, and no longer the old one's.
    assert _matches(_verifier(conn, login), current["password"])
    assert not _matches(_verifier(conn, login), OLD_PASSWORD)


def test_every_step_may_be_repeated_as_secrets_manager_retries_them(
    conn: Conn, login: str, rotating: dict[str, Any]
) -> None:
    for step in rotation.STEPS:
        _step(rotating, step)
        _step(rotating, step)
    current = _value(rotating, "AWSCURRENT")["password"]
    assert _matches(_verifier(conn, login), current)
    # Once current, a step says so and does nothing.
    assert _step(rotating, "setSecret").endswith("is already AWSCURRENT")


def test_set_secret_signs_in_as_the_login_itself_never_the_owner(
    login: str, rotating: dict[str, Any]
) -> None:
    _step(rotating, "createSecret")
    pending = _value(rotating, "AWSPENDING")["password"]
    _step(rotating, "setSecret")
    # It tried the pending password first (a retried step), and set it signed in as the login.
    assert rotating["signed_in"][0] == pending


def test_a_secret_without_rotation_or_a_version_not_pending_is_refused(
    rotating: dict[str, Any],
) -> None:
    secrets = rotating["secrets"]
    with pytest.raises(RotationError, match="no version"):
        rotation.rotate(
            {"SecretId": rotating["arn"], "ClientRequestToken": "nope", "Step": "createSecret"},
            secrets=secrets, connect=rotating["connect"],
        )  # fmt: skip
    with pytest.raises(RotationError, match="rotation step 'dance'"):
        _step(rotating, "dance")
    other = secrets.create_secret(Name="other", SecretString="{}")["ARN"]
    with pytest.raises(RotationError, match="does not have rotation enabled"):
        rotation.rotate(
            {"SecretId": other, "ClientRequestToken": "x", "Step": "createSecret"},
            secrets=secrets, connect=rotating["connect"],
        )  # fmt: skip


@pytest.fixture
def deployed_secret(
    rotating: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """The function configured as the template configures it for password auth."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("DB_SECRET_ARN", rotating["arn"])
    # The test server may listen on a socket or plain TCP; AWS keeps verify-full.
    monkeypatch.setenv("DB_SSLMODE", "prefer")
    database._secrets.cache_clear()  # a provider of this test's moto
    yield rotating
    app._connections.discard()
    database._secrets.cache_clear()


def _settings() -> Settings:
    return Settings.from_environ(os.environ)


def _point_at(rotating: dict[str, Any], stage: str, username: str) -> None:
    """Make ``stage``'s value name ``username`` (trust authentication checks no password, so
    a login that does not exist is how the test server refuses a stale secret)."""
    secrets, arn = rotating["secrets"], rotating["arn"]
    value = json.loads(
        secrets.get_secret_value(SecretId=arn, VersionStage="AWSCURRENT")["SecretString"]
    )
    if stage == "AWSCURRENT":
        secrets.put_secret_value(
            SecretId=arn, SecretString=json.dumps({**value, "username": username})
        )
    else:  # what createSecret would have put in the pending version
        backend = secretsmanager_backends[DEFAULT_ACCOUNT_ID]["eu-west-1"]
        version = backend.secrets[arn].versions[rotating["token"]]
        version["secret_string"] = json.dumps({**value, "username": username})


def test_a_run_follows_awscurrent_when_the_cached_password_is_refused(
    conn: Conn, login: str, deployed_secret: dict[str, Any]
) -> None:
    _point_at(deployed_secret, "AWSCURRENT", "duly_no_such_login")
    cache = database.ConnectionCache()
    with pytest.raises(psycopg.OperationalError):
        cache.get(_settings())  # cached now: the stale secret
    _point_at(deployed_secret, "AWSCURRENT", login)  # the rotation finished
    first = cache.get(_settings())[0]
    assert first.execute("SELECT current_user").fetchone() == (login,)
    cache.discard()


def test_a_run_between_set_and_finish_signs_in_with_awspending(
    conn: Conn, login: str, deployed_secret: dict[str, Any]
) -> None:
    _point_at(deployed_secret, "AWSCURRENT", "duly_no_such_login")
    _point_at(deployed_secret, "AWSPENDING", login)
    cache = database.ConnectionCache()
    first = cache.get(_settings())[0]
    assert first.execute("SELECT current_user").fetchone() == (login,)
    cache.discard()


def test_the_function_answers_secrets_managers_rotation_steps(
    conn: Conn, login: str, deployed_secret: dict[str, Any]
) -> None:
    context = SimpleNamespace(
        aws_request_id="rot-1", function_name="f", memory_limit_in_mb=256,
        invoked_function_arn="arn:aws:lambda:eu-west-1:1:function:f",
    )  # fmt: skip
    for step in rotation.STEPS:
        event = {"SecretId": deployed_secret["arn"], "ClientRequestToken": deployed_secret["token"],
                 "Step": step}  # fmt: skip
        answer = app.lambda_handler(event, context)
        assert answer["rotation"].startswith(step)
    assert _matches(_verifier(conn, login), _value(deployed_secret, "AWSCURRENT")["password"])
