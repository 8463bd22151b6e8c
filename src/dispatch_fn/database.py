"""Connections to the duties database: from ``DATABASE_URL`` or a Secrets Manager secret.

A warm Lambda keeps its connections between invocations; one found closed or
broken is replaced before the next run uses it.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from dispatch_fn.errors import ConfigurationError
from dispatch_fn.settings import Settings
from dispatch_fn.store import Connection

APPLICATION_NAME = "duly-dispatcher"
_SECRET_FIELDS = ("username", "password", "host", "port", "dbname")
_SECRET_MAX_AGE_S = 300


def conninfo_from_secret(secret: object, sslmode: str) -> str:
    """A libpq conninfo from an RDS-managed secret (username, password, host, port, dbname)."""
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
    return make_conninfo(
        user=str(secret["username"]),
        password=str(secret["password"]),
        host=str(secret["host"]),
        port=str(secret["port"]),
        dbname=str(secret["dbname"]),
        sslmode=sslmode,
    )


def _fetch_secret(arn: str) -> object:
    # Powertools caches the value for max_age, so a warm function does not
    # call Secrets Manager on every invocation.
    from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415 - AWS path only

    try:
        return parameters.get_secret(arn, max_age=_SECRET_MAX_AGE_S)
    except parameters.GetParameterError as exc:
        # Missing, not permitted, or Secrets Manager unreachable: the function's
        # configuration, reported (and counted as a failed run) like any other.
        raise ConfigurationError(f"cannot read the database secret {arn!r}: {exc}") from exc


def conninfo_for(settings: Settings) -> str:
    """Where to connect: ``DATABASE_URL`` wins, else the secret."""
    if settings.database_url:
        return settings.database_url
    if settings.secret_arn:
        return conninfo_from_secret(_fetch_secret(settings.secret_arn), settings.sslmode)
    raise ConfigurationError("no database configured: set DATABASE_URL or DB_SECRET_ARN")


def connect(settings: Settings, conninfo: str | None = None) -> Connection:
    """A new autocommit connection configured for the dispatcher."""
    options: dict[str, Any] = {
        "autocommit": True,
        "application_name": APPLICATION_NAME,
        "options": f"-c statement_timeout={settings.statement_timeout_ms}",
        "connect_timeout": 10,
    }
    conn = psycopg.connect(conninfo or conninfo_for(settings), **options)
    if settings.uses_rds_proxy:
        # Prepared statements pin an RDS Proxy session to one client; never prepare.
        conn.prepare_threshold = None
    return conn


class ConnectionCache:
    """Keeps a run's connections across warm invocations, replacing any that broke."""

    def __init__(self) -> None:
        self._conns: list[Connection] = []
        self._conninfo: str | None = None

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
        while len(kept) < settings.workers:
            try:
                kept.append(connect(settings, conninfo))
            except psycopg.OperationalError:
                # A helper is an optimisation: a server at its connection limit
                # gets a run on the connections it did give, not a failed run.
                if not kept:
                    raise
                break
        return list(kept)

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
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return False
    return True
