"""The stack's migration step: a CloudFormation custom resource that applies the schema.

CloudFormation sends Create and Update on a deploy whose code changed, and
Delete when the stack (or the resource) goes. Create and Update apply pending
migrations as the database owner and make sure the dispatcher's login exists
as a member of this database's own dispatcher role (migration 0009) and of no
other role; nothing pending is a success that changes nothing. Delete changes
nothing at all: dropping the schema of a database full of tasks is never a
side effect of deleting a stack. Every outcome, failures included, is sent to
CloudFormation's presigned response URL with the reason, so a failed migration
fails (and rolls back) the deploy instead of leaving it waiting. That URL is
S3's, reached from the VPC over a gateway endpoint or a NAT; without either
route the send gives up within seconds and logs the answer it could not
deliver and the route that is missing. ADR 0004 explains the design.

The event is checked before anything runs: its response URL must be an https
presigned S3 URL (the response names the database's endpoint and login), and
the identifiers it asks to be echoed must fit CloudFormation's response limit.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Final

import psycopg

from dispatch_fn.db import (
    apply_migrations,
    connect,
    logins,
    schema_state,
    secret_fields,
)
from dispatch_fn.errors import (
    ConfigurationError,
    MigrationStepTimeoutError,
    ResponseNotDeliveredError,
)
from dispatch_fn.settings import Settings

# One schema per stack: the id never changes, so CloudFormation never reads an
# Update as a replacement (which would send a Delete for the "old" resource).
PHYSICAL_ID: Final = "duly-schema"
# CloudFormation's limits: the whole response body, and the physical id in it.
RESPONSE_LIMIT_BYTES: Final = 4096
PHYSICAL_ID_LIMIT_BYTES: Final = 1024
# The reason is what the console shows; longer ones are cut to this many characters.
_REASON_LIMIT: Final = 1000
# Unknown migrations named in the response's Data; the rest are counted, so that
# the body stays within RESPONSE_LIMIT_BYTES however many there are.
_UNKNOWN_SHOWN: Final = 10
# Statements end before Lambda's own timeout would kill the function silently;
# the margin also leaves the answer its time (under 20 s, RESPONSE_* below).
_TIMEOUT_MARGIN_MS: Final = 60_000
# The answer is one PUT of at most 4 KB to S3. Without a route to S3 (no gateway
# endpoint, no NAT) each attempt hangs until its timeout: these bound the whole
# send to under 20 s, so the log names the missing route at once, rather than
# after the minutes a default socket would wait.
RESPONSE_TIMEOUT_S: Final = 5.0
RESPONSE_ATTEMPTS: Final = 3
_RESPONSE_PAUSE_S: Final = 1.0
# The secrets the step reads, over the same kind of route (an interface
# endpoint or a NAT): seconds per attempt, not botocore's minute.
_SECRET_CONNECT_TIMEOUT_S: Final = 3
_SECRET_READ_TIMEOUT_S: Final = 10
_SECRET_CLIENT_ATTEMPTS: Final = 3
# S3's endpoints, virtual-hosted (bucket.s3.region.amazonaws.com) or path-style
# (s3.region.amazonaws.com/bucket), with the China partition's suffix.
_S3_HOST: Final = re.compile(
    r"(?:[a-z0-9][a-z0-9.-]{1,62}\.)?s3(?:[.-][a-z0-9-]+)*\.amazonaws\.com(?:\.cn)?"
)
# SigV4's and SigV2's query parameter: a URL without one was not presigned.
_SIGNATURE_PARAMETERS: Final = ("X-Amz-Signature", "Signature")

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
    time_limit_s: float | None = None,
) -> dict[str, Any]:
    """Answer one custom-resource request; return the response sent to CloudFormation.

    An event whose response URL or echoed ids fail the checks is answered to
    nobody: the FAILED response is returned and logged, and nothing runs.
    """
    physical_id = event.get("PhysicalResourceId") or PHYSICAL_ID
    data: dict[str, str] = {}
    try:
        url = check_response_url(event.get("ResponseURL"))
        _check_physical_id(physical_id)
    except (ValueError, TypeError) as refused:
        return _unsent(event, f"{type(refused).__name__}: {refused}")
    try:
        reason, data = _within(time_limit_s, lambda: _answer(event, connect, read_secret))
        status = "SUCCESS"
    # CloudFormation waits for an answer whatever went wrong, and the reason is
    # all the operator sees, so every failure is reported, by type and message.
    except Exception as failed:  # noqa: BLE001
        _log.exception("migration step failed")
        status = "FAILED"
        reason = f"{type(failed).__name__}: {failed}"
        data = {}
    response = _response(event, str(physical_id), status, reason, data)
    if response is None:
        return _unsent(
            event, f"the request's ids leave no room for a response of {RESPONSE_LIMIT_BYTES} bytes"
        )
    try:
        send(url, response)
    except ResponseNotDeliveredError:
        # CloudFormation can only wait out ServiceTimeout now: the log is
        # where the operator learns why, and what the answer would have been.
        _log.exception(
            "the answer to CloudFormation was not delivered (Status %s, Reason %s)",
            status,
            response["Reason"],
        )
        raise
    return response


def check_response_url(url: object) -> str:
    """``url`` if it is an https presigned S3 URL; raise ``ValueError`` naming what is not."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"ResponseURL={str(url)[:60]!r}; expected CloudFormation's presigned URL")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https":
        raise ValueError(f"ResponseURL {url[:60]!r}; expected an https:// presigned URL")
    host = parts.hostname or ""
    if parts.username is not None or parts.password is not None or not _S3_HOST.fullmatch(host):
        raise ValueError(
            f"ResponseURL host {host[:80]!r}; expected an S3 endpoint (*.s3.*.amazonaws.com)"
        )
    query = urllib.parse.parse_qs(parts.query)
    if not any(query.get(name) for name in _SIGNATURE_PARAMETERS):
        raise ValueError(
            f"ResponseURL {url[:60]!r} has no X-Amz-Signature; expected a presigned S3 URL"
        )
    return url


def _check_physical_id(physical_id: object) -> None:
    if not isinstance(physical_id, str):
        raise TypeError(f"PhysicalResourceId is a {type(physical_id).__name__}; expected a string")
    size = len(physical_id.encode("utf-8", "surrogatepass"))
    if size > PHYSICAL_ID_LIMIT_BYTES:
        raise ValueError(
            f"PhysicalResourceId is {size} bytes; expected at most {PHYSICAL_ID_LIMIT_BYTES}"
        )


def _response(
    event: Mapping[str, Any], physical_id: str, status: str, reason: str, data: dict[str, str]
) -> dict[str, Any] | None:
    """The response, its reason cut so the body fits 4096 bytes; None when no reason fits."""
    response: dict[str, Any] = {
        "Status": status,
        "Reason": "",
        "PhysicalResourceId": physical_id,
        "StackId": event.get("StackId"),
        "RequestId": event.get("RequestId"),
        "LogicalResourceId": event.get("LogicalResourceId"),
        "Data": data,
    }
    if response_size(response) > RESPONSE_LIMIT_BYTES:
        return None
    # The longest prefix that fits: a character takes 1 to 12 bytes once escaped.
    reason = reason[:_REASON_LIMIT]
    fits, too_long = 0, len(reason) + 1
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if response_size({**response, "Reason": reason[:middle]}) <= RESPONSE_LIMIT_BYTES:
            fits = middle
        else:
            too_long = middle
    response["Reason"] = reason[:fits]
    return response


def _unsent(event: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """What ``handle`` returns (and logs) for a request it answers to nobody."""
    _log.error("custom-resource request refused, no response sent: %s", reason)
    return {
        "Status": "FAILED",
        "Reason": reason[:_REASON_LIMIT],
        "PhysicalResourceId": PHYSICAL_ID,
        "RequestId": str(event.get("RequestId"))[:100],
        "Data": {},
        "Sent": False,
    }


def response_size(response: Mapping[str, Any]) -> int:
    """Bytes of ``response`` as ``send_to_presigned_url`` puts it."""
    return len(json.dumps(response).encode("utf-8"))


def _within[T](limit_s: float | None, work: Callable[[], T]) -> T:
    """``work()``, or ``MigrationStepTimeoutError`` once ``limit_s`` has passed without it."""
    if limit_s is None:
        return work()
    outcome: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as failed:  # noqa: BLE001 - handed to the waiting thread
            failure.append(failed)
        finally:
            done.set()

    # A daemon: if the work outlives the answer, Lambda freezes or ends it.
    threading.Thread(target=run, name="duly-migration-step", daemon=True).start()
    if not done.wait(limit_s):
        raise MigrationStepTimeoutError(
            f"the migration step did not finish within {round(limit_s, 1):g} s, the time left "
            "to answer before the function's timeout; its statement may still be running in "
            "the database (pg_stat_activity); migrate by hand (docs/deploy.md), then deploy again"
        )
    if failure:
        raise failure[0]
    return outcome[0]


def _answer(
    event: Mapping[str, Any], connect: Connector, read_secret: SecretReader | None
) -> tuple[str, dict[str, str]]:
    request_type = event.get("RequestType")
    if request_type == "Delete":
        return "Delete changes nothing: the schema and its data stay in the database", {}
    if request_type not in ("Create", "Update"):
        raise ValueError(
            f"RequestType={str(request_type)[:40]!r}; expected one of 'Create', 'Update', 'Delete'"
        )
    data = _migrate(connect, event.get("ResourceProperties") or {}, read_secret)
    reason = f"applied {data['Applied']}" if data["Applied"] else "schema is up to date"
    if data["UnknownMigrations"]:
        reason = f"{reason}; {_ahead_of_the_code(data)}"
    return reason, data


def _ahead_of_the_code(data: Mapping[str, str]) -> str:
    """What a deploy of code older than the schema says: which, and that they stay."""
    return (
        f"the database is ahead of the code: it holds {data['UnknownMigrations']}, newer "
        f"than this code's {data['CodeSchemaVersion']} (a rollback, or an older release "
        "deployed); migrations are forward-only, so they stay applied and this code runs "
        'on that schema (docs/operations.md, "Rolling back a deploy")'
    )


def _named(versions: tuple[str, ...]) -> str:
    """``versions`` for the response's Data, the first few only: it must fit 4096 bytes."""
    shown = ",".join(versions[:_UNKNOWN_SHOWN])
    rest = len(versions) - _UNKNOWN_SHOWN
    return f"{shown} and {rest} more" if rest > 0 else shown


@dataclasses.dataclass(frozen=True, slots=True)
class _Login:
    """The dispatcher's login as the stack names it: who, how it signs in, its password."""

    user: str
    auth: str
    password: str | None


def _migrate(
    connect: Connector, properties: Mapping[str, Any], read_secret: SecretReader | None
) -> dict[str, str]:
    login = _requested_login(properties, read_secret)
    with connect() as conn:
        # Refused before any migration runs: a deploy naming the wrong role
        # changes nothing.
        logins.check_login(conn, login.user)
        applied = apply_migrations(conn)
        logins.ensure_login(conn, login.user, iam=login.auth == "iam", password=login.password)
        state = schema_state(conn)
        if state.unknown:
            # Not a failure: a rollback's deploy must succeed. But it is never silent.
            _log.warning(
                "the database is ahead of the code: it holds %s, which this code (newest "
                "%s) does not bundle; they stay applied (migrations are forward-only)",
                ", ".join(state.unknown),
                state.code_newest,
            )
        info = conn.info
        return {
            "Applied": ",".join(applied),
            # What the database holds, not what this code bundles: after a rollback
            # the two differ, and the database's is the one that is true.
            "SchemaVersion": state.newest,
            "CodeSchemaVersion": state.code_newest,
            "UnknownMigrations": _named(state.unknown),
            "DispatcherLogin": login.user,
            # Where the dispatcher connects when it signs IAM tokens: the same
            # endpoint the owner's secret names.
            "Host": info.host,
            "Port": str(info.port),
            "DbName": info.dbname,
        }


def _requested_login(properties: Mapping[str, Any], read_secret: SecretReader | None) -> _Login:
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
        secret = secret_fields(read_secret(secret_arn))
        user, password = secret["username"], secret["password"]
    else:
        raise ConfigurationError(f"DispatcherAuth={str(auth)[:40]!r}; expected 'iam' or 'password'")
    if not user:
        raise ConfigurationError("DispatcherUser is empty; expected the dispatcher's login name")
    return _Login(user, str(auth), password)


type Opener = Callable[..., Any]


def send_to_presigned_url(
    url: str,
    response: dict[str, Any],
    *,
    opener: Opener = urllib.request.urlopen,
    timeout_s: float = RESPONSE_TIMEOUT_S,
    attempts: int = RESPONSE_ATTEMPTS,
) -> None:
    """PUT the response where CloudFormation asked (an S3 presigned URL).

    Raises ``ResponseNotDeliveredError`` when S3 refused it, or could not be
    reached in ``attempts`` tries of ``timeout_s`` each, naming the route the
    function's subnets lack.
    """
    check_response_url(url)
    host = urllib.parse.urlsplit(url).hostname
    body = json.dumps(response).encode("utf-8")
    unreachable: OSError | None = None
    for attempt in range(attempts):
        if attempt:
            time.sleep(_RESPONSE_PAUSE_S)
        # The presigned URL was signed with no content type, so none is sent.
        request = urllib.request.Request(  # noqa: S310 - an https S3 URL, checked above
            url,
            data=body,
            method="PUT",
            headers={"Content-Type": "", "Content-Length": str(len(body))},
        )
        try:
            with opener(request, timeout=timeout_s) as answer:
                answer.read()
        except urllib.error.HTTPError as refused:
            # S3 answered, so the route exists; trying again would be refused again.
            raise ResponseNotDeliveredError(
                f"S3 ({host}) refused the answer to CloudFormation: HTTP {refused.code} "
                f"{refused.reason}"
            ) from refused
        except OSError as failed:  # URLError, TimeoutError, refused or reset connections
            unreachable = failed
            continue
        return
    raise ResponseNotDeliveredError(
        f"could not reach S3 ({host}) to answer CloudFormation: {attempts} attempts of "
        f"{timeout_s:g} s each failed, the last with {type(unreachable).__name__}: "
        f"{unreachable}; the migration function's subnets need a route to S3: an S3 gateway "
        'endpoint (NetworkRoutes=endpoints) or a NAT gateway (docs/deploy.md, "The network '
        'the stack needs"). CloudFormation fails the deploy once ServiceTimeout passes'
    ) from unreachable


def _read_secret(arn: str) -> object:
    import boto3  # noqa: PLC0415 - AWS path only
    from botocore.config import Config  # noqa: PLC0415

    config = Config(
        connect_timeout=_SECRET_CONNECT_TIMEOUT_S,
        read_timeout=_SECRET_READ_TIMEOUT_S,
        retries={"total_max_attempts": _SECRET_CLIENT_ATTEMPTS, "mode": "standard"},
    )
    client = boto3.client("secretsmanager", config=config)
    return client.get_secret_value(SecretId=arn)["SecretString"]


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point: the owner's connection from the environment, the real sender.

    The environment is read inside ``handle``'s answer, so a bad setting is a
    FAILED response like any other failure, not an exception nobody answers.
    """
    logging.basicConfig(level=logging.INFO)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    budget_ms = None if remaining is None else max(remaining() - _TIMEOUT_MARGIN_MS, 1_000)

    def owner_connection() -> psycopg.Connection[Any]:
        settings = Settings.from_environ(os.environ)
        if budget_ms is not None:
            settings = dataclasses.replace(settings, statement_timeout_ms=budget_ms)
        return connect(settings)

    return handle(
        event,
        connect=owner_connection,
        send=send_to_presigned_url,
        read_secret=_read_secret,
        time_limit_s=None if budget_ms is None else budget_ms / 1000,
    )
