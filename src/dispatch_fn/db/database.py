"""Connections to the duties database: from ``DATABASE_URL``, a Secrets Manager secret or IAM.

Every connection string, whatever its source, gets the configured TLS mode and
CA bundle. With ``DB_AUTH=iam`` each new connection signs a fresh IAM token
(valid 15 minutes) as its password. A warm Lambda keeps its connections between
invocations; one found closed or broken is replaced before the next run uses it.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from dispatch_fn.db.sql import Connection, statement
from dispatch_fn.errors import ConfigurationError
from dispatch_fn.settings import Settings

APPLICATION_NAME = "duly-dispatcher"
_SECRET_FIELDS = ("username", "password", "host", "port", "dbname")
_SECRET_MAX_AGE_S = 300
_IDLE_IN_TRANSACTION_MS = 60_000
_CLIENT_CHECK_MS = 10_000
# A dead peer is given up on after idle + interval x count = 60 s of silence.
_KEEPALIVE_IDLE_S = 30
_KEEPALIVE_INTERVAL_S = 10
_KEEPALIVE_COUNT = 3
# The deployed default: encrypt, and check the certificate's chain and host name.
DEFAULT_SSLMODE: Final = "verify-full"
# Modes that retry (or start) without TLS: never paired with a root certificate.
_FALLBACK_SSL_MODES: Final = ("disable", "allow", "prefer")
# DB_SSLROOTCERT is relative to the package root, where certs/ ships.
_PACKAGE_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class IamLogin:
    """Who an IAM auth token is signed for: the endpoint and database user it opens."""

    host: str
    port: int
    user: str
    region: str


type TokenSource = Callable[[IamLogin], str]


def rds_auth_token(login: IamLogin) -> str:
    """A 15-minute RDS IAM auth token, signed locally with the function's credentials."""
    import boto3  # noqa: PLC0415 - AWS path only; keeps local runs from importing botocore

    client = boto3.client("rds", region_name=login.region)
    token: str = client.generate_db_auth_token(
        DBHostname=login.host, Port=login.port, DBUsername=login.user, Region=login.region
    )
    return token


def secret_fields(secret: object) -> dict[str, str]:
    """The RDS-managed secret's fields (username, password, host, port, dbname), checked."""
    if isinstance(secret, str | bytes):
        try:
            secret = json.loads(secret)
        except ValueError:
            raise ConfigurationError("database secret is not JSON") from None
    if not isinstance(secret, dict):
        raise ConfigurationError("database secret must be a JSON object")
    missing = [name for name in _SECRET_FIELDS if not secret.get(name)]
    if missing:
        # Name the fields, never their values: this message reaches the logs.
        raise ConfigurationError(
            f"database secret lacks {', '.join(missing)}; expected the RDS shape "
            f"({', '.join(_SECRET_FIELDS)})"
        )
    return {name: str(secret[name]) for name in _SECRET_FIELDS}


def conninfo_from_secret(secret: object, sslmode: str) -> str:
    """A libpq conninfo from an RDS-managed secret (username, password, host, port, dbname)."""
    fields = secret_fields(secret)
    return make_conninfo(
        user=fields["username"],
        password=fields["password"],
        host=fields["host"],
        port=fields["port"],
        dbname=fields["dbname"],
        sslmode=sslmode,
    )


# Without a route to Secrets Manager, botocore's defaults wait a minute per
# attempt; a few seconds name the missing route instead (docs/deploy.md).
SECRET_CONNECT_TIMEOUT_S: Final = 3
SECRET_READ_TIMEOUT_S: Final = 10
SECRET_ATTEMPTS: Final = 3


@functools.cache
def _secrets() -> Any:
    # One provider per process: its cache is what spares a warm function a call.
    from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415 - AWS path only
    from botocore.config import Config  # noqa: PLC0415

    return parameters.SecretsProvider(
        boto_config=Config(
            connect_timeout=SECRET_CONNECT_TIMEOUT_S,
            read_timeout=SECRET_READ_TIMEOUT_S,
            retries={"total_max_attempts": SECRET_ATTEMPTS, "mode": "standard"},
        )
    )


def _fetch_secret(arn: str, *, stage: str | None = None) -> object:
    """The secret's value: ``AWSCURRENT`` as cached, or ``stage`` read afresh.

    A stage read afresh replaces the cached value and expires at once (the
    provider's cache is keyed by name alone), so the next plain read asks again.
    """
    from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415 - AWS path only

    try:
        if stage is not None:
            return _secrets().get(arn, max_age=0, force_fetch=True, VersionStage=stage)
        return _secrets().get(arn, max_age=_SECRET_MAX_AGE_S)
    except parameters.GetParameterError as exc:
        # Missing, not permitted, or Secrets Manager unreachable: the function's
        # configuration, reported (and counted as a failed run) like any other.
        raise ConfigurationError(
            f"cannot read the database secret {arn!r}: {exc}{_route_hint(exc)}"
        ) from exc


def _route_hint(exc: BaseException) -> str:
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError  # noqa: PLC0415

    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectTimeoutError | EndpointConnectionError):
            return (
                "; the function's subnets need a route to Secrets Manager: its interface "
                "endpoint (NetworkRoutes=endpoints) or a NAT gateway (docs/deploy.md)"
            )
        cause = cause.__cause__ or cause.__context__
    return ""


def conninfo_for(settings: Settings, *, environ: Mapping[str, str] = os.environ) -> str:
    """Where to connect, TLS settings applied: ``DATABASE_URL``, else IAM, else the secret.

    ``environ`` is the environment libpq fills unset keywords from (``PGHOST``,
    ``PGHOSTADDR``, ``PGSERVICE``): the process's own unless a test passes one.
    Holds no IAM token: tokens are signed per connection by ``connect``.
    """
    if settings.database_url:
        base = settings.database_url
    elif settings.auth == "iam":
        base = _iam_conninfo(settings)
    elif settings.secret_arn:
        base = conninfo_from_secret(
            _fetch_secret(settings.secret_arn), settings.sslmode or DEFAULT_SSLMODE
        )
    else:
        raise ConfigurationError(
            "no database configured: set DATABASE_URL, DB_SECRET_ARN, or DB_AUTH=iam with DB_HOST"
        )
    return _with_tls(base, settings, environ)


def url_conninfo(url: str, *, environ: Mapping[str, str] = os.environ) -> str:
    """A local command's ``DATABASE_URL`` with the TLS rules every connection follows.

    The commands that read the database (``migrate``, ``runs``, ``explain``,
    ``demo``) connect with the URL alone; ``DB_SSLMODE`` and ``DB_SSLROOTCERT``
    apply to them as to the function.
    """
    tls = {name: environ[name] for name in ("DB_SSLMODE", "DB_SSLROOTCERT") if name in environ}
    settings = Settings.from_environ({**tls, "DATABASE_URL": url})
    return conninfo_for(settings, environ=environ)


def open_url(url: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A plain connection for a local command (``url_conninfo``'s rules), without the run's limits.

    Migrations and the commands' reads keep no statement or lock timeout of
    the dispatcher's (``connect``): a migration on a large table takes as long
    as it takes.
    """
    return psycopg.connect(url_conninfo(url), autocommit=autocommit)


def conninfo_with_secret(
    settings: Settings, secret: object, *, environ: Mapping[str, str] = os.environ
) -> str:
    """A conninfo from a secret's fields, with the configured TLS applied (as ``conninfo_for``)."""
    base = conninfo_from_secret(secret, settings.sslmode or DEFAULT_SSLMODE)
    return _with_tls(base, settings, environ)


def rotated_conninfos(settings: Settings) -> list[str]:
    """Where to connect when the cached secret's password was refused: the secret rotated.

    ``AWSCURRENT`` read afresh (the rotation finished since the cache read it),
    then ``AWSPENDING`` (the database has the new password, and the rotation
    has not yet made it current: docs/operations.md#rotating-the-dispatchers-password).
    None for a configuration without a secret.
    """
    if settings.database_url or settings.auth == "iam" or not settings.secret_arn:
        return []
    found = []
    for stage in ("AWSCURRENT", "AWSPENDING"):
        try:
            found.append(
                conninfo_with_secret(settings, _fetch_secret(settings.secret_arn, stage=stage))
            )
        except ConfigurationError:  # no such version (no rotation under way), or unreadable
            continue
    return found


def _iam_conninfo(settings: Settings) -> str:
    missing = [
        name
        for name, value in (
            ("DB_HOST", settings.db_host),
            ("DB_NAME", settings.db_name),
            ("DB_USER", settings.db_user),
        )
        if not value
    ]
    if missing:
        raise ConfigurationError(f"DB_AUTH='iam' needs {', '.join(missing)}; they are unset")
    return make_conninfo(
        host=settings.db_host, port=str(settings.db_port), dbname=settings.db_name,
        user=settings.db_user,
    )  # fmt: skip


def _with_tls(conninfo: str, settings: Settings, environ: Mapping[str, str]) -> str:
    """``conninfo`` with the configured sslmode and CA bundle, whatever it said before.

    A root certificate, from ``DB_SSLROOTCERT`` or in a ``DATABASE_URL``, means
    ``verify-full`` unless a mode that still encrypts is named: libpq's own
    default (``prefer``) checks the certificate and, when that fails, connects
    again in plain text without a word. Every connection to another machine
    names its mode, so ``PGSSLMODE`` or libpq's default never choose one; the
    machine is the one libpq dials, wherever it took the host from
    (``_is_local``). Only ``DB_SSLMODE`` or an ``sslmode`` in ``DATABASE_URL``
    chooses another mode.
    """
    params = conninfo_to_dict(conninfo)
    if settings.sslrootcert is not None:
        params["sslrootcert"] = str(_ca_bundle(settings.sslrootcert))
    mode = settings.sslmode or params.get("sslmode")
    if mode is None:
        if params.get("sslrootcert") or not settings.database_url or not _is_local(params, environ):
            params["sslmode"] = DEFAULT_SSLMODE
    else:
        if params.get("sslrootcert") and mode in _FALLBACK_SSL_MODES:
            source = "DB_SSLMODE" if settings.sslmode else "DATABASE_URL's sslmode"
            raise ConfigurationError(
                f"{source}={mode!r} with a root certificate: {mode} connects in plain text when "
                "the certificate fails verification; expected verify-full (or leave it unset)"
            )
        params["sslmode"] = mode
    return make_conninfo("", **params)


def _is_local(params: dict[str, Any], environ: Mapping[str, str]) -> bool:
    """Whether every address libpq may try is this machine: a socket, localhost, loopback.

    libpq fills each keyword the connection string leaves unset from its own
    variable (``hostaddr`` from ``PGHOSTADDR``, ``host`` from ``PGHOST``), and
    dials ``hostaddr`` when there is one. A service (``service``,
    ``PGSERVICE``) may name any host in a file read only at connect time, so
    a connection that takes its host from one is not known to be local.
    """
    hostaddr = params.get("hostaddr") or environ.get("PGHOSTADDR")
    host = params.get("host") or environ.get("PGHOST")
    if not hostaddr and not host and (params.get("service") or environ.get("PGSERVICE")):
        return False
    targets = str(hostaddr or host or "").split(",")
    return all(_local_address(target.strip()) for target in targets)


def _local_address(target: str) -> bool:
    # Empty means libpq's default: the Unix-domain socket.
    if not target or target.startswith(("/", "@")) or target == "localhost":
        return True
    try:
        return ipaddress.ip_address(target).is_loopback
    except ValueError:
        return False


def _ca_bundle(configured: str) -> Path:
    # Relative to the package, which is the artifact's root in Lambda, so the
    # template can name a file bundled beside the code whatever the cwd.
    path = _PACKAGE_DIR / configured
    if not path.is_file():
        raise ConfigurationError(
            f"DB_SSLROOTCERT={configured!r}: no such file ({path}); expected a PEM CA bundle, "
            "e.g. Amazon's global RDS bundle packaged into the artifact (docs/deploy.md)"
        )
    return path


def iam_login(settings: Settings, conninfo: str) -> IamLogin | None:
    """The login an IAM token must be signed for, or None when not using IAM auth."""
    if settings.auth != "iam":
        return None
    params = conninfo_to_dict(conninfo)
    if not settings.aws_region:
        raise ConfigurationError("DB_AUTH='iam' needs AWS_REGION to sign its token; it is unset")
    if not params.get("host") or not params.get("user"):
        raise ConfigurationError("DB_AUTH='iam' needs a host and a user in the connection string")
    return IamLogin(
        host=str(params["host"]),
        port=int(params.get("port") or 5432),
        user=str(params["user"]),
        region=settings.aws_region,
    )


def connect(
    settings: Settings, conninfo: str | None = None, *, tokens: TokenSource = rds_auth_token
) -> Connection:
    """A new autocommit connection configured for the dispatcher."""
    session = {
        "statement_timeout": settings.statement_timeout_ms,
        "lock_timeout": settings.lock_timeout_ms,
        # The dispatcher never leaves a transaction open (autocommit); a session
        # that does is a bug, and must not hold its locks for long.
        "idle_in_transaction_session_timeout": _IDLE_IN_TRANSACTION_MS,
        # A client that vanished (a Lambda killed mid-page) is noticed while its
        # statement runs, not after it: the server probes the socket this often,
        # and its own keepalives find a peer that went silent (ADR 0003).
        "client_connection_check_interval": _CLIENT_CHECK_MS,
        "tcp_keepalives_idle": _KEEPALIVE_IDLE_S,
        "tcp_keepalives_interval": _KEEPALIVE_INTERVAL_S,
        "tcp_keepalives_count": _KEEPALIVE_COUNT,
    }
    target = conninfo or conninfo_for(settings)
    options: dict[str, Any] = {
        "autocommit": True,
        "application_name": APPLICATION_NAME,
        "options": " ".join(f"-c {name}={value}" for name, value in session.items()),
        "connect_timeout": 10,
        # The client's side of the same: a server that went silent mid-page
        # (failover, network partition) fails the page instead of hanging.
        "keepalives": 1,
        "keepalives_idle": _KEEPALIVE_IDLE_S,
        "keepalives_interval": _KEEPALIVE_INTERVAL_S,
        "keepalives_count": _KEEPALIVE_COUNT,
    }
    if (login := iam_login(settings, target)) is not None:
        options["password"] = tokens(login)
    conn = psycopg.connect(target, **options)
    if settings.uses_rds_proxy:
        # Prepared statements pin an RDS Proxy session to one client; never prepare.
        conn.prepare_threshold = None
    return conn


class ConnectionCache:
    """Keeps a run's connections across warm invocations, replacing any that broke."""

    def __init__(self, tokens: TokenSource = rds_auth_token) -> None:
        self._conns: list[Connection] = []
        self._conninfo: str | None = None
        self._tokens = tokens

    def get(self, settings: Settings) -> list[Connection]:
        """Up to ``settings.workers`` usable connections: cached ones that still work, then new.

        Fewer only when the server refuses more; never none (the error is raised).
        """
        conninfo = conninfo_for(settings)
        if conninfo != self._conninfo:
            self.discard()
            self._conninfo = conninfo
        kept: list[Connection] = []
        for conn in self._conns:
            if len(kept) < settings.workers and _alive(conn):
                kept.append(conn)
            else:
                conn.close()
        # Kept before connecting more, so a failed connect leaves none unowned.
        self._conns = kept
        if not kept:
            kept.append(self._first(settings, conninfo))
        while len(kept) < settings.workers:
            try:
                kept.append(connect(settings, self._conninfo, tokens=self._tokens))
            except psycopg.OperationalError:
                # A helper is an optimisation: a server at its connection limit
                # gets a run on the connections it did give, not a failed run.
                if not kept:
                    raise
                break
        return list(kept)

    def _first(self, settings: Settings, conninfo: str) -> Connection:
        """The first connection; if refused, once more with the secret as it now stands.

        A password rotated since the cache read the secret is refused by the
        server: the secret read afresh (``rotated_conninfos``) signs in, and
        becomes the cache's, so runs follow a rotation without a deploy.
        """
        try:
            return connect(settings, conninfo, tokens=self._tokens)
        except psycopg.OperationalError:
            tried = {conninfo}
            for candidate in rotated_conninfos(settings):
                if candidate in tried:
                    continue
                tried.add(candidate)
                try:
                    conn = connect(settings, candidate, tokens=self._tokens)
                except psycopg.OperationalError:
                    continue
                self._conninfo = candidate
                return conn
            raise

    def reconnect(self, settings: Settings) -> Connection:
        """A fresh connection like the cached ones, for one that died mid-run; not kept.

        Its opener closes it: a run closes those it opened when it ends.
        """
        return connect(settings, tokens=self._tokens)

    def discard(self) -> None:
        """Close and forget the cached connections (after a failure mid-run)."""
        for conn in self._conns:
            conn.close()
        self._conns = []


def _alive(conn: Connection) -> bool:
    # A server restart, failover or idle timeout between two invocations kills
    # the session without telling the client; one round trip per invocation
    # finds out before a run starts on it.
    if conn.closed or conn.broken:
        return False
    try:
        conn.execute(statement("session_ping"))
    except psycopg.OperationalError:
        return False
    return True
