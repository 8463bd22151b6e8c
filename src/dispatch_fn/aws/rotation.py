"""Secrets Manager rotation of the dispatcher's password: the four steps, single user.

See docs/operations.md#rotating-the-dispatchers-password.

Secrets Manager invokes the dispatcher's function with ``{"SecretId",
"ClientRequestToken", "Step"}`` for each step, in order:

- ``createSecret``: a new password, kept as the ``AWSPENDING`` version (the
  secret's other fields copied from ``AWSCURRENT``);
- ``setSecret``: the login changes its own password to it, signed in with
  ``AWSCURRENT`` (or ``AWSPREVIOUS``, for a rotation retried after this
  step); PostgreSQL lets a login change its own password, so the owner's
  secret is never needed, and the server stores only a SCRAM verifier;
- ``testSecret``: a session opens with ``AWSPENDING``, as that login;
- ``finishSecret``: ``AWSCURRENT`` moves to the new version.

Each step is safe to repeat, as Secrets Manager retries them. Between
``setSecret`` and ``finishSecret`` the database holds the pending password:
the dispatcher, refused with its cached one, reads ``AWSCURRENT`` afresh and
then ``AWSPENDING`` (``database.ConnectionCache``), so runs follow the
rotation without a deploy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import psycopg

from dispatch_fn.db import Connection, logins, secret_fields
from dispatch_fn.errors import RotationError

STEPS: Final = ("createSecret", "setSecret", "testSecret", "finishSecret")
CURRENT: Final = "AWSCURRENT"
PENDING: Final = "AWSPENDING"
PREVIOUS: Final = "AWSPREVIOUS"
# Long, and free of the characters a libpq conninfo or a shell would need quoted.
PASSWORD_LENGTH: Final = 40
_EXCLUDED: Final = "\"'\\/@:;=?&%# `$"

# Opens a session with the secret's fields (username, password, host, port, dbname).
type SecretConnector = Callable[[Mapping[str, str]], Connection]


def is_rotation(event: object) -> bool:
    """Whether ``event`` is Secrets Manager asking for a rotation step."""
    return isinstance(event, Mapping) and {"SecretId", "ClientRequestToken", "Step"} <= set(event)


def rotate(event: Mapping[str, Any], *, secrets: Any, connect: SecretConnector) -> str:
    """Run the step ``event`` asks for; return what it did, in a few words.

    ``secrets`` is a Secrets Manager client; ``connect`` opens a session with a
    version's fields. Raises ``RotationError`` for a step that cannot proceed.
    """
    arn, token, step = event["SecretId"], event["ClientRequestToken"], event["Step"]
    if step not in STEPS:
        raise RotationError(f"rotation step {step!r}; expected one of {', '.join(STEPS)}")
    described = secrets.describe_secret(SecretId=arn)
    if not described.get("RotationEnabled"):
        raise RotationError(f"secret {arn!r} does not have rotation enabled")
    stages = described.get("VersionIdsToStages", {})
    if token not in stages:
        raise RotationError(f"secret {arn!r} has no version {token!r} to rotate to")
    if CURRENT in stages[token]:
        return f"{step}: version {token} is already {CURRENT}"
    if PENDING not in stages[token]:
        raise RotationError(f"secret {arn!r} version {token!r} is not {PENDING}")
    if step == "createSecret":
        return _create(secrets, arn, token)
    if step == "setSecret":
        return _set(secrets, arn, token, connect)
    if step == "testSecret":
        return _test(secrets, arn, token, connect)
    return _finish(secrets, arn, token, stages)


def _fields(secrets: Any, arn: str, **version: str) -> dict[str, Any]:
    value = secrets.get_secret_value(SecretId=arn, **version)["SecretString"]
    parsed: dict[str, Any] = json.loads(value)
    secret_fields(parsed)  # the RDS shape, or a ConfigurationError naming what is missing
    return parsed


def _create(secrets: Any, arn: str, token: str) -> str:
    try:
        secrets.get_secret_value(SecretId=arn, VersionId=token, VersionStage=PENDING)
    except secrets.exceptions.ResourceNotFoundException:
        pass
    else:
        return f"createSecret: {PENDING} version {token} exists already"
    current = _fields(secrets, arn, VersionStage=CURRENT)
    password = secrets.get_random_password(
        PasswordLength=PASSWORD_LENGTH, ExcludeCharacters=_EXCLUDED
    )["RandomPassword"]
    secrets.put_secret_value(
        SecretId=arn,
        ClientRequestToken=token,
        SecretString=json.dumps({**current, "password": password}),
        VersionStages=[PENDING],
    )
    return f"createSecret: a new password as {PENDING} version {token}"


def _set(secrets: Any, arn: str, token: str, connect: SecretConnector) -> str:
    pending = _fields(secrets, arn, VersionId=token, VersionStage=PENDING)
    # AWSPENDING first: a retried step finds the password set already, and setting it
    # again is harmless; then the password the login has had until now.
    for stage in (PENDING, CURRENT, PREVIOUS):
        try:
            known = pending if stage == PENDING else _fields(secrets, arn, VersionStage=stage)
        except secrets.exceptions.ResourceNotFoundException:
            continue
        if known["username"] != pending["username"]:
            raise RotationError(
                f"{PENDING} names login {pending['username']!r} but {stage} names "
                f"{known['username']!r}; a single-user rotation keeps one login"
            )
        try:
            conn = connect(known)
        except psycopg.OperationalError:
            continue
        with conn:
            # The login's own password: only its SCRAM verifier reaches the server.
            logins.set_password(conn, pending["username"], pending["password"])
        return f"setSecret: {pending['username']} signs in with {PENDING} now (set as {stage})"
    raise RotationError(
        f"setSecret: none of {PENDING}, {CURRENT} and {PREVIOUS} of {arn!r} signs in; "
        "expected the login's present password in one of them"
    )


def _test(secrets: Any, arn: str, token: str, connect: SecretConnector) -> str:
    pending = _fields(secrets, arn, VersionId=token, VersionStage=PENDING)
    try:
        with connect(pending) as conn:
            signed_in = logins.session(conn).login
    except psycopg.OperationalError as exc:
        raise RotationError(f"testSecret: {PENDING} does not sign in: {exc}") from exc
    if signed_in != pending["username"]:
        raise RotationError(
            f"testSecret: {PENDING} signed in as {signed_in!r}; expected {pending['username']!r}"
        )
    return f"testSecret: {PENDING} signs in as {pending['username']}"


def _finish(secrets: Any, arn: str, token: str, stages: Mapping[str, Any]) -> str:
    current = next((version for version, names in stages.items() if CURRENT in names), None)
    secrets.update_secret_version_stage(
        SecretId=arn,
        VersionStage=CURRENT,
        MoveToVersionId=token,
        **({} if current is None else {"RemoveFromVersionId": current}),
    )
    return f"finishSecret: {CURRENT} is version {token}"
