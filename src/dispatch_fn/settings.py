"""The function's configuration, read once per invocation from its environment.

Imports nothing that talks to a database, nor the run loop, nor the event
parser: the run loop takes its page and connection defaults from here, and
the parser its limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from dispatch_fn.errors import ConfigurationError

_SSL_MODES: Final = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
# Duties per page. Each page statement carries a fixed cost (planning,
# unpacking the schedule arrays, one round trip); a large page spreads it over
# many owed rows while the page's insert sort still fits the default work_mem.
# `make bench` measures the trade (docs/performance.md, ADR 0002).
DEFAULT_CHUNK_SIZE: Final = 10_000
# Candidate rows per page (duties times the candidate periods each can owe): a
# page stops short of DEFAULT_CHUNK_SIZE duties once its duties could owe this
# many rows, so a backfill of years is many bounded pages instead of one
# statement past statement_timeout (docs/adr/0009-bounded-pages.md;
# `python -m bench.large_backfill` measures the pages).
DEFAULT_PAGE_ROWS: Final = 250_000
# Connections a run dispatches pages on. A page keeps one server backend busy
# while the client waits, so one connection leaves every other core of the
# database idle; two use a second core of the server (`make bench --workers`
# measures one against two: docs/performance.md).
DEFAULT_WORKERS: Final = 2
# An IAM token is a password good for 15 minutes: it never travels unencrypted.
_ENCRYPTING_SSL_MODES: Final = ("require", "verify-ca", "verify-full")
_AUTH_MODES: Final = ("password", "iam")
# Each worker is one more database connection (and backend) per invocation.
MAX_WORKERS: Final = 16

# The largest backfill window, in days: five years, leap days included.
DEFAULT_MAX_WINDOW_DAYS: Final = 1827
# A scoped run names its duties in the event; 10,000 ids of 36 characters are
# ~400 KB, inside Lambda's payload limits and far more than anyone types.
DEFAULT_MAX_DUTY_IDS: Final = 10_000
# How many days back a run still owes what became owed, the horizon
# (docs/contract.md#account). A run always reaches back at least one day: the
# day before its clock is never "today" for every zone at the run's hour.
DEFAULT_CATCH_UP_DAYS: Final = 7
# Hours between two scheduled runs: the template's cron runs daily. A duty no
# run has kept an account for owes from the previous clock
# (docs/contract.md#account), so this must match the schedule
# (template.yaml's ScheduleIntervalHours sets both).
DEFAULT_SCHEDULE_INTERVAL_HOURS: Final = 24
MAX_SCHEDULE_INTERVAL_HOURS: Final = 24
# Each timeout costs a whole statement_timeout (300 s by default): past this
# many in one run, the run stops splitting and ends incomplete instead.
MAX_TIMEOUTS_PER_RUN: Final = 4


@dataclass(frozen=True, slots=True)
class Tuning:
    """How a run is sized and bounded: the knobs the handler and the run loop read.

    ``Settings`` is a ``Tuning`` read from the environment; a test or a bench
    run builds one directly. A new knob is one field here (and, if the
    environment sets it, one line of ``Settings.from_environ``).
    """

    chunk_size: int = DEFAULT_CHUNK_SIZE
    # None: a page is bounded by ``chunk_size`` alone.
    page_rows: int | None = DEFAULT_PAGE_ROWS
    workers: int = DEFAULT_WORKERS
    max_window_days: int = DEFAULT_MAX_WINDOW_DAYS
    max_duty_ids: int = DEFAULT_MAX_DUTY_IDS
    # How many days back a run still owes what became owed: the horizon
    # (docs/contract.md#account); 0 reads as 1.
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS
    # Hours between two scheduled clocks (DISPATCH_SCHEDULE_INTERVAL_HOURS).
    schedule_interval_hours: int = DEFAULT_SCHEDULE_INTERVAL_HOURS
    max_timeouts: int = MAX_TIMEOUTS_PER_RUN

    @property
    def interval(self) -> timedelta:
        """The time between two scheduled clocks."""
        return timedelta(hours=self.schedule_interval_hours)


@dataclass(frozen=True, slots=True)
class Settings(Tuning):
    """Everything the handler takes from its environment: its tuning, and where to connect."""

    database_url: str | None = None
    secret_arn: str | None = None
    # None: DB_SSLMODE unset; a DATABASE_URL then keeps its own sslmode, and
    # gets database.DEFAULT_SSLMODE (verify-full) when it names none and is
    # not this machine (its host given in it or by PGHOST, PGHOSTADDR or a
    # service), or a root certificate is given; so does every other source.
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
    # A page waiting this long for a row lock gives up and is tried again
    # later in the run, then its locked duties are set aside (ADR 0003).
    lock_timeout_ms: int = 5_000
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
            lock_timeout_ms=_positive(environ, "DB_LOCK_TIMEOUT_MS", 5_000),
            chunk_size=_positive(environ, "DISPATCH_CHUNK_SIZE", DEFAULT_CHUNK_SIZE),
            page_rows=_positive(environ, "DISPATCH_PAGE_ROWS", DEFAULT_PAGE_ROWS),
            workers=_positive(environ, "DISPATCH_WORKERS", DEFAULT_WORKERS, most=MAX_WORKERS),
            max_window_days=_positive(environ, "DISPATCH_MAX_WINDOW_DAYS", DEFAULT_MAX_WINDOW_DAYS),
            max_duty_ids=_positive(environ, "DISPATCH_MAX_DUTY_IDS", DEFAULT_MAX_DUTY_IDS),
            reserve_ms=_positive(environ, "DISPATCH_RESERVE_MS", 30_000),
            catch_up_days=_not_negative(environ, "DISPATCH_CATCH_UP_DAYS", DEFAULT_CATCH_UP_DAYS),
            schedule_interval_hours=_positive(
                environ,
                "DISPATCH_SCHEDULE_INTERVAL_HOURS",
                DEFAULT_SCHEDULE_INTERVAL_HOURS,
                most=MAX_SCHEDULE_INTERVAL_HOURS,
            ),
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
        raise ConfigurationError(f"{name}={raw[:40]!r}; expected {expected}") from None
    if value <= 0 or (most is not None and value > most):
        raise ConfigurationError(f"{name}={raw[:40]!r}; expected {expected}")
    return value


def _not_negative(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r}; expected an integer, 0 or more") from None
    if value < 0:
        raise ConfigurationError(f"{name}={raw!r}; expected an integer, 0 or more")
    return value


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "false").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigurationError(f"{name}={raw[:40]!r}; expected 'true' or 'false'")
    return raw == "true"
