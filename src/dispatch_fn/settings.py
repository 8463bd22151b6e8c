"""The function's configuration, read once per invocation from its environment.

Imports nothing that talks to a database, and not the run loop: the run loop
takes its page and connection defaults from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from dispatch_fn.errors import ConfigurationError
from dispatch_fn.events import DEFAULT_MAX_DUTY_IDS, DEFAULT_MAX_WINDOW_DAYS

_SSL_MODES: Final = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
# Duties per page. Each page statement carries a fixed cost (planning,
# unpacking the schedule arrays, one round trip) of a few milliseconds; at
# 10,000 duties it is spread over ~19,000 owed rows, whose insert sort still
# fits the default 4 MB work_mem (3.4 MB measured with 20-35 character names).
DEFAULT_CHUNK_SIZE: Final = 10_000
# Connections a run dispatches pages on. A page keeps one server backend busy
# while the client waits, so one connection leaves every other core of the
# database idle; two at once made a first run 1.6-1.7x and a no-op run
# 1.4-1.9x faster at 1,000,000 duties on a 2-core server (README, Performance).
DEFAULT_WORKERS: Final = 2
# Each worker is one more database connection (and backend) per invocation.
MAX_WORKERS: Final = 16


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the handler takes from its environment."""

    database_url: str | None = None
    secret_arn: str | None = None
    sslmode: str = "require"
    uses_rds_proxy: bool = False
    statement_timeout_ms: int = 300_000
    chunk_size: int = DEFAULT_CHUNK_SIZE
    workers: int = DEFAULT_WORKERS
    max_window_days: int = DEFAULT_MAX_WINDOW_DAYS
    max_duty_ids: int = DEFAULT_MAX_DUTY_IDS
    # Stop starting pages when less than this remains of the invocation, so a
    # long run reports how far it got instead of being killed mid-page.
    reserve_ms: int = 30_000

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """Read and check the environment; raise ``ConfigurationError`` on a bad value."""
        sslmode = environ.get("DB_SSLMODE", "require")
        if sslmode not in _SSL_MODES:
            raise ConfigurationError(
                f"DB_SSLMODE={sslmode!r}; expected one of {', '.join(_SSL_MODES)}"
            )
        return cls(
            database_url=environ.get("DATABASE_URL") or None,
            secret_arn=environ.get("DB_SECRET_ARN") or None,
            sslmode=sslmode,
            uses_rds_proxy=_flag(environ, "DB_USES_RDS_PROXY"),
            statement_timeout_ms=_positive(environ, "DB_STATEMENT_TIMEOUT_MS", 300_000),
            chunk_size=_positive(environ, "DISPATCH_CHUNK_SIZE", DEFAULT_CHUNK_SIZE),
            workers=_positive(environ, "DISPATCH_WORKERS", DEFAULT_WORKERS, most=MAX_WORKERS),
            max_window_days=_positive(environ, "DISPATCH_MAX_WINDOW_DAYS", DEFAULT_MAX_WINDOW_DAYS),
            max_duty_ids=_positive(environ, "DISPATCH_MAX_DUTY_IDS", DEFAULT_MAX_DUTY_IDS),
            reserve_ms=_positive(environ, "DISPATCH_RESERVE_MS", 30_000),
        )


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
        raise ConfigurationError(f"{name}={raw[:40]!r}; expected {expected}") from None
    if value <= 0 or (most is not None and value > most):
        raise ConfigurationError(f"{name}={raw[:40]!r}; expected {expected}")
    return value


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "false").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigurationError(f"{name}={raw[:40]!r}; expected 'true' or 'false'")
    return raw == "true"
