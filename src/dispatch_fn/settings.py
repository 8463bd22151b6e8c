"""The function's configuration, read once per invocation from its environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from dispatch_fn.dispatch import DEFAULT_CHUNK_SIZE, DEFAULT_WORKERS
from dispatch_fn.errors import ConfigurationError
from dispatch_fn.events import DEFAULT_MAX_WINDOW_DAYS

_SSL_MODES: Final = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
# An IAM token is a password good for 15 minutes: it never travels unencrypted.
_ENCRYPTING_SSL_MODES: Final = ("require", "verify-ca", "verify-full")
_AUTH_MODES: Final = ("password", "iam")
# Each worker is one more database connection (and backend) per invocation.
MAX_WORKERS: Final = 16


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the handler takes from its environment."""

    database_url: str | None = None
    secret_arn: str | None = None
    # None: DB_SSLMODE unset; a DATABASE_URL then keeps its own sslmode and
    # every other source gets database.DEFAULT_SSLMODE (verify-full).
    sslmode: str | None = None
    sslrootcert: str | None = None
    auth: str = "password"
    # Where an IAM-authenticated dispatcher connects (no secret to read them from).
    db_host: str | None = None
    db_port: int = 5432
    db_name: str | None = None
    db_user: str | None = None
    aws_region: str | None = None
    uses_rds_proxy: bool = False
    statement_timeout_ms: int = 300_000
    chunk_size: int = DEFAULT_CHUNK_SIZE
    workers: int = DEFAULT_WORKERS
    max_window_days: int = DEFAULT_MAX_WINDOW_DAYS
    # Stop starting pages when less than this remains of the invocation, so a
    # long run reports how far it got instead of being killed mid-page.
    reserve_ms: int = 30_000

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """Read and check the environment; raise ``ConfigurationError`` on a bad value."""
        return cls(
            database_url=environ.get("DATABASE_URL") or None,
            secret_arn=environ.get("DB_SECRET_ARN") or None,
            **_connection_fields(environ),
            uses_rds_proxy=_flag(environ, "DB_USES_RDS_PROXY"),
            statement_timeout_ms=_positive(environ, "DB_STATEMENT_TIMEOUT_MS", 300_000),
            chunk_size=_positive(environ, "DISPATCH_CHUNK_SIZE", DEFAULT_CHUNK_SIZE),
            workers=_positive(environ, "DISPATCH_WORKERS", DEFAULT_WORKERS, most=MAX_WORKERS),
            max_window_days=_positive(environ, "DISPATCH_MAX_WINDOW_DAYS", DEFAULT_MAX_WINDOW_DAYS),
            reserve_ms=_positive(environ, "DISPATCH_RESERVE_MS", 30_000),
        )


def _connection_fields(environ: Mapping[str, str]) -> dict[str, Any]:
    """TLS and authentication settings (DB_SSLMODE, DB_SSLROOTCERT, DB_AUTH, DB_HOST, ...)."""
    sslmode = environ.get("DB_SSLMODE") or None
    if sslmode is not None and sslmode not in _SSL_MODES:
        raise ConfigurationError(f"DB_SSLMODE={sslmode!r}; expected one of {', '.join(_SSL_MODES)}")
    auth = environ.get("DB_AUTH") or "password"
    if auth not in _AUTH_MODES:
        raise ConfigurationError(f"DB_AUTH={auth!r}; expected one of {', '.join(_AUTH_MODES)}")
    if auth == "iam" and sslmode not in _ENCRYPTING_SSL_MODES:
        raise ConfigurationError(
            f"DB_AUTH='iam' with DB_SSLMODE={sslmode!r}; IAM tokens need one of "
            f"{', '.join(_ENCRYPTING_SSL_MODES)}"
        )
    return {
        "sslmode": sslmode,
        "sslrootcert": environ.get("DB_SSLROOTCERT") or None,
        "auth": auth,
        "db_host": environ.get("DB_HOST") or None,
        "db_port": _positive(environ, "DB_PORT", 5432, most=65535),
        "db_name": environ.get("DB_NAME") or None,
        "db_user": environ.get("DB_USER") or None,
        "aws_region": environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None,
    }


def _positive(
    environ: Mapping[str, str], name: str, default: int, *, most: int | None = None
) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    expected = "a positive integer" if most is None else f"an integer from 1 to {most}"
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r}; expected {expected}") from None
    if value <= 0 or (most is not None and value > most):
        raise ConfigurationError(f"{name}={raw!r}; expected {expected}")
    return value


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "false").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigurationError(f"{name}={raw!r}; expected 'true' or 'false'")
    return raw == "true"
