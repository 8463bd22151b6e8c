"""The local commands' exit statuses (docs/contract.md#exit-statuses), in one place.

Every command (``migrate``, ``invoke``, ``demo``, ``runs``, ``runs show``,
``explain``, ``stop-db``) maps the same failure to the same status and says it in one line
on standard error, never a traceback. ``0`` means the command did what it was
asked, and for a run: complete, not degraded, its scope matching a duty.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Mapping
from enum import IntEnum, unique
from typing import Any, Final, TextIO

import psycopg
from psycopg import pq

from dispatch_fn.errors import (
    ConfigurationError,
    DatabaseUnreachableError,
    EmbeddedServerBusyError,
    EventError,
    MigrationError,
)
from dispatch_fn.run import RunFailedError


@unique
class ExitStatus(IntEnum):
    """Why a local command exited; each value has one meaning across the commands."""

    OK = 0
    UNEXPECTED = 1
    REFUSED = 2
    CONFIGURATION = 3
    DATABASE_UNREACHABLE = 4
    FAILED = 5
    INCOMPLETE = 6
    DEGRADED = 7
    UNKNOWN_DUTY = 8
    NO_DUTY_IN_SCOPE = 9
    SERVER_BUSY = 10
    UNKNOWN_RUN = 11
    DUTY_FAULTED = 12
    INTERRUPTED = 130
    BROKEN_PIPE = 141


MEANINGS: Final[Mapping[ExitStatus, str]] = {
    ExitStatus.OK: "done: a run completed, not degraded, its scope matching a duty",
    ExitStatus.UNEXPECTED: "an unexpected error (a bug), in one line; DULY_TRACEBACK=1 shows more",
    ExitStatus.REFUSED: "the event (or the command line) was refused; nothing was written",
    ExitStatus.CONFIGURATION: "configuration error: a bad setting or DATABASE_URL, a secret",
    ExitStatus.DATABASE_UNREACHABLE: "the database could not be reached (or did not start)",
    ExitStatus.FAILED: "the run (or migration, or query) failed part-way; run it again",
    ExitStatus.INCOMPLETE: "the run ended incomplete: duties are left; run it again",
    ExitStatus.DEGRADED: "the run completed degraded: duties faulted or set aside (see report)",
    ExitStatus.UNKNOWN_DUTY: "explain: no duty has that id",
    ExitStatus.NO_DUTY_IN_SCOPE: "the run's organization_id / duty_ids match no duty",
    ExitStatus.SERVER_BUSY: "stop-db: another process still uses the embedded server",
    ExitStatus.UNKNOWN_RUN: "runs show: no run has that id",
    ExitStatus.DUTY_FAULTED: "explain: the duty is a fault (the engine cannot read it); see why",
    ExitStatus.INTERRUPTED: "interrupted (Ctrl-C); its ledger row ends failed, 'interrupted'",
    ExitStatus.BROKEN_PIPE: "the reader of standard output went away (| head): said nothing",
}

HELP: Final = "exit statuses:\n" + "\n".join(
    f"  {status.value:<4} {MEANINGS[status]}" for status in ExitStatus
)

# Exception type -> status and what the line says failed; the first match wins.
_FAILURES: Final[tuple[tuple[type[BaseException], ExitStatus, str], ...]] = (
    (EventError, ExitStatus.REFUSED, "event refused"),
    (ConfigurationError, ExitStatus.CONFIGURATION, "configuration"),
    (DatabaseUnreachableError, ExitStatus.DATABASE_UNREACHABLE, "database unreachable"),
    # The embedded server failing to start.
    (subprocess.SubprocessError, ExitStatus.DATABASE_UNREACHABLE, "database unreachable"),
    (EmbeddedServerBusyError, ExitStatus.SERVER_BUSY, "embedded server busy"),
    (RunFailedError, ExitStatus.FAILED, "run failed"),
    (MigrationError, ExitStatus.FAILED, "migration failed"),
    # Raised once connected: a statement failed (a connection failing is
    # turned into DatabaseUnreachableError by ``connecting``).
    (psycopg.Error, ExitStatus.FAILED, "database error"),
    (KeyboardInterrupt, ExitStatus.INTERRUPTED, "interrupted; committed pages stay, run it again"),
)


# What a command may raise on purpose: each maps to a status of its own.
EXPECTED: Final = tuple(failure for failure, _, _ in _FAILURES)


def of_failure(exc: BaseException) -> tuple[ExitStatus, str]:
    """The status for ``exc`` and the words naming what failed."""
    for failure, status, what in _FAILURES:
        if isinstance(exc, failure):
            return status, what
    return ExitStatus.UNEXPECTED, f"unexpected {type(exc).__name__}"


def say_failure(stderr: TextIO, exc: BaseException) -> ExitStatus:
    """Say what failed in one line on ``stderr``; return its status."""
    status, what = of_failure(exc)
    say(stderr, what, str(exc))
    return status


def say(stderr: TextIO, what: str, detail: str = "") -> None:
    """One ``error:`` line, whatever ``detail`` spans."""
    flat = " ".join(detail.split())
    print(f"error: {what}: {flat}" if flat else f"error: {what}", file=stderr)


def of_report(report: Mapping[str, Any]) -> tuple[ExitStatus, str | None]:  # noqa: PLR0911 - one per status, in order
    """A finished run's status, and the line that says why it is not ``OK``.

    Incomplete first (duties were not reached), then degraded (reached, some
    refused), then a scope that matched nothing.
    """
    if "mode" not in report and ("runs" in report or "run" in report or "explain" in report):
        # A read-only query's answer (docs/contract.md#queries), not a run's report.
        if "run" in report and report["run"] is None:
            return ExitStatus.UNKNOWN_RUN, f"no run {report.get('run_id')}"
        explained = report.get("explain")
        if isinstance(explained, Mapping):
            return of_explained(explained)
        return ExitStatus.OK, None
    run = f"run {report.get('run_id')}"
    if not report.get("complete", False):
        stop = report.get("incomplete_reason") or report.get("hand_off_error")
        why = f" ({stop})" if stop else ""
        return ExitStatus.INCOMPLETE, (
            f"{run} incomplete{why}: dispatched up to duty id {report.get('last_duty_id')!r}; "
            "run it again to finish"
        )
    if report.get("degraded", False):
        counts = report.get("fault_counts") or {}
        faults = sum(counts.values()) if isinstance(counts, Mapping) else 0
        aside = report.get("set_aside_count", 0)
        return ExitStatus.DEGRADED, (
            f"{run} degraded: it did not dispatch every duty it read ({faults} counted as "
            f"faults, {aside} set aside for the next run); the report says which"
        )
    if report.get("scope_matched") is False:
        return ExitStatus.NO_DUTY_IN_SCOPE, str(report.get("scope_note"))
    return ExitStatus.OK, None


def of_explained(explained: Mapping[str, Any]) -> tuple[ExitStatus, str | None]:
    """An explanation's status: unknown duty, a faulted duty, else ``OK`` (a skip is no fault).

    A script tells the three apart by the status alone (docs/contract.md#exit-statuses).
    """
    duty_id = explained.get("duty_id")
    if explained.get("found") is False:
        return ExitStatus.UNKNOWN_DUTY, f"no duty {duty_id!r}"
    if "organizations" in explained:
        # Several organisations hold the id: the command line must name one.
        return ExitStatus.REFUSED, f"{explained.get('detail')} with --organization"
    skip = explained.get("skip")
    if isinstance(skip, Mapping) and skip.get("fault"):
        return ExitStatus.DUTY_FAULTED, (
            f"duty {duty_id!r} is a fault, {skip.get('reason')}: {skip.get('detail')}; "
            "no run creates its tasks until it is mended"
        )
    return ExitStatus.OK, None


@contextlib.contextmanager
def connecting(dsn: str | None = None) -> Iterator[None]:
    """Around opening a connection to ``dsn``: its failures as the statuses every command shares.

    A server that answers but refuses the connection (a database or role that
    does not exist, a wrong password) is a configuration problem, not an
    unreachable database: libpq's ping, which only asks whether the server
    accepts connections at all, tells the two apart without reading the message.
    """
    try:
        yield
    except psycopg.OperationalError as exc:
        if dsn is not None and _server_answers(dsn):
            raise ConfigurationError(
                f"DATABASE_URL: the server answers but refused the connection: {exc}; "
                "expected a database, user and password it accepts"
            ) from exc
        raise DatabaseUnreachableError(str(exc)) from exc
    except psycopg.Error as exc:
        # Raised before a connection exists: a DATABASE_URL libpq cannot use.
        raise ConfigurationError(f"DATABASE_URL: {exc}") from exc


def _server_answers(dsn: str) -> bool:
    try:
        answer = pq.PGconn.ping(dsn.encode("utf-8"))
    except (psycopg.Error, UnicodeError):
        return False
    return bool(answer == pq.Ping.OK)
