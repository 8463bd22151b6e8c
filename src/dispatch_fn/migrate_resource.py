"""The stack's migration step: a CloudFormation custom resource that applies the schema.

CloudFormation sends Create and Update on a deploy whose code changed, and
Delete when the stack (or the resource) goes. Create and Update apply pending
migrations as the database owner and make sure the dispatcher's login exists
in the ``duly_dispatcher`` role; nothing pending is a success that changes
nothing. Delete changes nothing at all: dropping the schema of a database
full of tasks is never a side effect of deleting a stack. Every outcome,
failures included, is sent to CloudFormation's presigned response URL with the
reason, so a failed migration fails (and rolls back) the deploy instead of
leaving it waiting. ADR 0004 explains the design.
"""

from __future__ import annotations

if not __package__:  # pragma: no cover - only when Lambda loads the built artifact
    # As in app.py: Lambda imports this file as a top-level module, so register
    # its directory as the ``dispatch_fn`` package before importing from it.
    import importlib.util
    import sys
    from pathlib import Path

    _here = Path(__file__).resolve().parent
    if "dispatch_fn" not in sys.modules:
        _spec = importlib.util.spec_from_file_location(
            "dispatch_fn", _here / "__init__.py", submodule_search_locations=[str(_here)]
        )
        assert _spec is not None  # noqa: S101 - the file is beside us
        assert _spec.loader is not None  # noqa: S101
        sys.modules["dispatch_fn"] = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(sys.modules["dispatch_fn"])

import dataclasses
import json
import logging
import os
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Final

import psycopg
from psycopg import sql

from dispatch_fn import database
from dispatch_fn.errors import ConfigurationError
from dispatch_fn.migrate import apply_migrations, bundled_migrations
from dispatch_fn.settings import Settings

# One schema per stack: the id never changes, so CloudFormation never reads an
# Update as a replacement (which would send a Delete for the "old" resource).
PHYSICAL_ID: Final = "duly-schema"
DISPATCHER_ROLE: Final = "duly_dispatcher"
# CloudFormation accepts a 4 KB response; the reason is what the console shows.
_REASON_LIMIT: Final = 1000
# Statements end before Lambda's own timeout would kill the function silently.
_TIMEOUT_MARGIN_MS: Final = 60_000

type Sender = Callable[[str, dict[str, Any]], None]
type Connector = Callable[[], psycopg.Connection[Any]]
type SecretReader = Callable[[str], object]

_log = logging.getLogger("duly.migrations")


def handle(
    event: Mapping[str, Any],
    *,
    connect: Connector,
    send: Sender,
    read_secret: SecretReader | None = None,
) -> dict[str, Any]:
    """Answer one custom-resource request; return the response sent to CloudFormation."""
    physical_id = str(event.get("PhysicalResourceId") or PHYSICAL_ID)
    data: dict[str, str] = {}
    try:
        reason, data = _answer(event, connect, read_secret)
        status = "SUCCESS"
    # CloudFormation waits for an answer whatever went wrong, and the reason is
    # all the operator sees, so every failure is reported, by type and message.
    except Exception as failed:  # noqa: BLE001
        _log.exception("migration step failed")
        status = "FAILED"
        reason = f"{type(failed).__name__}: {failed}"
    response = {
        "Status": status,
        "Reason": reason[:_REASON_LIMIT],
        "PhysicalResourceId": physical_id,
        "StackId": event.get("StackId"),
        "RequestId": event.get("RequestId"),
        "LogicalResourceId": event.get("LogicalResourceId"),
        "Data": data,
    }
    send(str(event.get("ResponseURL")), response)
    return response


def _answer(
    event: Mapping[str, Any], connect: Connector, read_secret: SecretReader | None
) -> tuple[str, dict[str, str]]:
    request_type = event.get("RequestType")
    if request_type == "Delete":
        return "Delete changes nothing: the schema and its data stay in the database", {}
    if request_type not in ("Create", "Update"):
        raise ValueError(
            f"RequestType={request_type!r}; expected one of 'Create', 'Update', 'Delete'"
        )
    data = _migrate(connect, event.get("ResourceProperties") or {}, read_secret)
    return (f"applied {data['Applied']}" if data["Applied"] else "schema is up to date"), data


def _migrate(
    connect: Connector, properties: Mapping[str, Any], read_secret: SecretReader | None
) -> dict[str, str]:
    with connect() as conn:
        applied = apply_migrations(conn)
        login = _ensure_dispatcher_login(conn, properties, read_secret)
        info = conn.info
        return {
            "Applied": ",".join(applied),
            "SchemaVersion": bundled_migrations()[-1].version,
            "DispatcherLogin": login,
            # Where the dispatcher connects when it signs IAM tokens: the same
            # endpoint the owner's secret names.
            "Host": info.host,
            "Port": str(info.port),
            "DbName": info.dbname,
        }


def _ensure_dispatcher_login(
    conn: psycopg.Connection[Any], properties: Mapping[str, Any], read_secret: SecretReader | None
) -> str:
    """Create (or update) the dispatcher's login as a member of ``duly_dispatcher`` only."""
    auth = properties.get("DispatcherAuth", "iam")
    password: str | None = None
    if auth == "iam":
        user = str(properties.get("DispatcherUser") or "")
    elif auth == "password":
        secret_arn = str(properties.get("DispatcherSecretArn") or "")
        if not secret_arn or read_secret is None:
            raise ConfigurationError(
                "DispatcherAuth='password' needs DispatcherSecretArn, the dispatcher's secret"
            )
        secret = database.secret_fields(read_secret(secret_arn))
        user, password = secret["username"], secret["password"]
    else:
        raise ConfigurationError(f"DispatcherAuth={auth!r}; expected 'iam' or 'password'")
    if not user:
        raise ConfigurationError("DispatcherUser is empty; expected the dispatcher's login name")
    owner = conn.execute("SELECT current_user").fetchone()
    if owner is not None and owner[0] == user:
        raise ConfigurationError(
            f"the dispatcher's login {user!r} is the owner that runs migrations; "
            "expected a login of its own (least privilege: docs/deploy.md)"
        )
    name = sql.Identifier(user)
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone()
    verb = sql.SQL("ALTER" if exists else "CREATE")
    # Utility statements take no bound parameters: psycopg quotes the literal.
    clause = sql.SQL(" PASSWORD {}").format(sql.Literal(password)) if password else sql.SQL("")
    conn.execute(sql.SQL("{} ROLE {} LOGIN{}").format(verb, name, clause))
    conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(DISPATCHER_ROLE), name))
    iam_role = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'rds_iam'").fetchone()
    if auth == "iam" and iam_role is not None:
        # rds_iam exists only on RDS and Aurora; membership makes the login
        # accept IAM tokens (and only them) as its password.
        conn.execute(sql.SQL("GRANT rds_iam TO {}").format(name))
    return user


type Opener = Callable[..., Any]


def send_to_presigned_url(
    url: str, response: dict[str, Any], *, opener: Opener = urllib.request.urlopen
) -> None:
    """PUT the response where CloudFormation asked (an S3 presigned URL)."""
    if not url.startswith("https://"):
        raise ValueError(f"ResponseURL {url[:60]!r}; expected an https:// presigned URL")
    body = json.dumps(response).encode("utf-8")
    # The presigned URL was signed with no content type, so none is sent.
    request = urllib.request.Request(  # noqa: S310 - https only, checked above
        url, data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with opener(request, timeout=30) as answer:
        answer.read()


def _read_secret(arn: str) -> object:
    import boto3  # noqa: PLC0415 - AWS path only

    return boto3.client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"]


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point: the owner's connection from the environment, the real sender."""
    logging.basicConfig(level=logging.INFO)
    settings = Settings.from_environ(os.environ)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is not None:
        budget = max(remaining() - _TIMEOUT_MARGIN_MS, 1_000)
        settings = dataclasses.replace(settings, statement_timeout_ms=budget)

    def connect() -> psycopg.Connection[Any]:
        return database.connect(settings)

    return handle(event, connect=connect, send=send_to_presigned_url, read_secret=_read_secret)
