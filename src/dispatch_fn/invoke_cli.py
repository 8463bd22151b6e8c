"""``python -m dispatch_fn invoke EVENT_FILE|-``: the Lambda handler on one event, from a shell.

What ``sam local invoke -e`` would do, without Docker: the same handler, on the
database ``DATABASE_URL`` names (else the embedded one). A progress bar on a
terminal, the report at the end, and one exit status per kind of failure, each
with a one-line message.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

import psycopg

from dispatch_fn import embedded, exit_status
from dispatch_fn.database import ConnectionCache
from dispatch_fn.exit_status import ExitStatus
from dispatch_fn.invocation import handle, logger, runtime_for
from dispatch_fn.migrate import apply_migrations
from dispatch_fn.progress import Progress
from dispatch_fn.settings import Settings
from dispatch_fn.summary import report_lines, table_lines

ENVIRONMENT: Final = """\
environment:
  DATABASE_URL              the database (libpq URL or conninfo); unset: the embedded
                            PostgreSQL in .duly/pgdata, started on first use
  DULY_PGDATA               another data directory for the embedded PostgreSQL
  DB_SECRET_ARN             a Secrets Manager secret to read the credentials from instead
  DB_SSLMODE                libpq sslmode for the secret's host (default require)
  DB_USES_RDS_PROXY         true: never prepare statements (default false)
  DB_STATEMENT_TIMEOUT_MS   per-statement timeout (default 300000)
  DB_LOCK_TIMEOUT_MS        how long a page waits for another run's row locks (default 5000)
  DISPATCH_CHUNK_SIZE       duties per page (default 10000)
  DISPATCH_PAGE_ROWS        candidate rows a page stops at, past its first duty (default 250000)
  DISPATCH_WORKERS          connections the pages are shared among (default 2, at most 16)
  DISPATCH_MAX_WINDOW_DAYS  longest backfill window (default 1827)
  DISPATCH_MAX_DUTY_IDS     most duty ids one event may name
  DISPATCH_CATCH_UP_DAYS    missed scheduled days a scheduled run catches up
  DISPATCH_RESERVE_MS       stop between pages when less than this remains (Lambda only)
  POWERTOOLS_LOG_LEVEL      the handler's log level; its JSON lines go to stderr with --logs"""

# The run's own logs are quiet unless asked for: the bar and the report say it.
_QUIET: Final = "CRITICAL"


def register(commands: Any) -> None:
    """Add the ``invoke`` command to ``commands`` (an argparse sub-parsers object)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "invoke",
        help="run lambda_handler on an event file (or - for standard input)",
        description=__doc__,
        epilog=f"{ENVIRONMENT}\n\n{exit_status.HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "event_file",
        metavar="EVENT_FILE",
        help="a JSON event, e.g. events/backfill-13-months.json; - reads standard input",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON (the default when standard output is not a terminal)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar, even on a terminal"
    )
    parser.add_argument(
        "--logs", action="store_true", help="the handler's JSON log lines on standard error"
    )
    parser.set_defaults(run=run)


def run(
    args: argparse.Namespace,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the command; return its ``ExitStatus``. Never raises for an expected failure.

    The report goes to ``stdout`` whatever the run's outcome; a status other
    than ``OK`` is also said in one line on ``stderr``.
    """
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    try:
        event = _read_event(args.event_file, stdin)
    except (OSError, ValueError) as exc:
        exit_status.say(stderr, f"cannot read event {args.event_file!r}", str(exc))
        return ExitStatus.REFUSED
    try:
        report = _invoke(event, args, stderr)
    except exit_status.EXPECTED as exc:
        return exit_status.say_failure(stderr, exc)
    if args.json or not stdout.isatty() or "mode" not in report:  # a query: JSON alone
        print(json.dumps(report, indent=2), file=stdout)
    else:
        print("\n".join(_summary(report)), file=stdout)
    status, why = exit_status.of_report(report)
    if why is not None:
        exit_status.say(stderr, why)
    return status


def _invoke(event: Any, args: argparse.Namespace, stderr: TextIO) -> dict[str, Any]:
    settings = Settings.from_environ(os.environ)
    dsn = _prepare_database()
    connections = ConnectionCache()
    show_bar = not args.no_progress and stderr.isatty()
    # No metrics: stdout is the report, and EMF only means something in Lambda.
    try:
        # handle raises psycopg's errors only while connecting (a run's own are RunFailedError).
        with (
            exit_status.connecting(),
            _log_level(logger, args.logs),
            _progress_bar(stderr, enabled=show_bar) as bar,
        ):
            runtime = runtime_for(
                None,
                replace(settings, database_url=dsn),
                connections,
                clock=lambda: datetime.now(UTC),
                on_progress=bar,
            )
            return handle(event, None, runtime)
    finally:
        connections.discard()


def _read_event(name: str, stdin: TextIO) -> Any:
    text = stdin.read() if name == "-" else Path(name).read_text("utf-8")
    return json.loads(text)


def _prepare_database() -> str:
    dsn, is_embedded = embedded.local_dsn()
    if is_embedded:
        # A fresh checkout's embedded database has no schema yet.
        with exit_status.connecting():
            conn = psycopg.connect(dsn)
        with conn:
            apply_migrations(conn)
    return dsn


@contextlib.contextmanager
def _log_level(logger: Any, logs: bool) -> Iterator[None]:  # noqa: FBT001 - a flag from argparse
    """The handler's logs at their configured level with ``--logs``, else silent."""
    if logs or "POWERTOOLS_LOG_LEVEL" in os.environ:
        yield
        return
    before = logger.log_level
    logger.setLevel(_QUIET)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def _progress_bar(stream: TextIO, *, enabled: bool) -> Iterator[Callable[[Progress], None] | None]:
    """A callback drawing a bar of duties done on ``stream``, or None when not enabled."""
    try:
        from tqdm import tqdm  # noqa: PLC0415 - only on a terminal, from the dev dependencies
    except ImportError:  # pragma: no cover - an install without them gets no bar
        enabled = False
    if not enabled:
        yield None
        return

    with tqdm(file=stream, unit=" duties", dynamic_ncols=True, leave=False) as bar:

        def draw(progress: Progress) -> None:
            bar.total = progress.duties_total
            bar.n = progress.duties_done
            bar.set_postfix(created=progress.tasks_created, refresh=False)
            bar.refresh()

        yield draw


def _summary(report: dict[str, Any]) -> list[str]:
    lines = report_lines("invoke", report)
    rows = [
        ("tasks created", report["tasks_created"]),
        ("tasks already there", report["tasks_existing"]),
        ("duties read", report["duties_read"]),
        ("duties advanced", report["duties_advanced"]),
        *((f"skipped: {reason}", n) for reason, n in report["skipped"].items() if n),
        *((f"fault: {reason}", n) for reason, n in report["fault_counts"].items() if n),
    ]
    note = [f"note: {report['scope_note']}"] if report.get("scope_note") else []
    return [*lines, *note, "", *table_lines(("", "count"), rows)]
