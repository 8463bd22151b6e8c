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
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

from dispatch_fn.aws import handle, logger, parse_event, runtime_for
from dispatch_fn.cli import arguments, embedded, exit_status
from dispatch_fn.cli.exit_status import ExitStatus
from dispatch_fn.cli.summary import summary_lines
from dispatch_fn.db import ConnectionCache, apply_migrations, open_url
from dispatch_fn.run import Progress, Runtime
from dispatch_fn.settings import MAX_WORKERS, Settings

# What each variable ``Settings.from_environ`` reads sets: the field it fills
# (whose default the help shows) and what it means. The help lists exactly the
# variables that function reads, in its order, so a new setting cannot be
# left out (a test holds every one described here).
SETTING_VARIABLES: Final[Mapping[str, tuple[str, str]]] = {
    "DATABASE_URL": ("database_url", "the database (libpq URL or conninfo); unset: the embedded"
                     " PostgreSQL in .duly/pgdata, started on first use"),
    "DB_SECRET_ARN": ("secret_arn", "a Secrets Manager secret to read the credentials from"
                      " instead"),
    "DB_SSLMODE": ("sslmode", "libpq sslmode (unset: a URL's own, else verify-full off this"
                   " machine)"),
    "DB_SSLROOTCERT": ("sslrootcert", "the CA bundle that verifies the server's certificate"),
    "DB_AUTH": ("auth", "password, or iam for an IAM token"),
    "DB_HOST": ("db_host", "where an IAM-authenticated run connects"),
    "DB_PORT": ("db_port", "its port"),
    "DB_NAME": ("db_name", "its database"),
    "DB_USER": ("db_user", "its user"),
    "AWS_REGION": ("aws_region", "the region of the secret and of IAM tokens"),
    "AWS_DEFAULT_REGION": ("aws_region", "the same, when AWS_REGION is unset"),
    "DB_USES_RDS_PROXY": ("uses_rds_proxy", "true: never prepare statements"),
    "DB_STATEMENT_TIMEOUT_MS": ("statement_timeout_ms", "per-statement timeout"),
    "DB_LOCK_TIMEOUT_MS": ("lock_timeout_ms", "how long a page waits for another run's row"
                           " locks"),
    "DISPATCH_CHUNK_SIZE": ("chunk_size", "duties per page"),
    "DISPATCH_PAGE_ROWS": ("page_rows", "candidate rows a page stops at, past its first duty"),
    "DISPATCH_WORKERS": ("workers", f"connections the pages are shared among (at most"
                         f" {MAX_WORKERS})"),
    "DISPATCH_MAX_WINDOW_DAYS": ("max_window_days", "longest backfill window"),
    "DISPATCH_MAX_DUTY_IDS": ("max_duty_ids", "most duty ids one event may name"),
    "DISPATCH_RESERVE_MS": ("reserve_ms", "stop between pages when less than this remains"
                            " (Lambda only)"),
    "DISPATCH_CATCH_UP_DAYS": ("catch_up_days", "days back a run still owes what became"
                               " owed (the horizon; at least 1)"),
    "DISPATCH_SCHEDULE_INTERVAL_HOURS": ("schedule_interval_hours", "hours between two"
                                         " scheduled clocks (the schedule's own)"),
}  # fmt: skip
# Read by the commands themselves rather than by Settings.
_COMMAND_VARIABLES: Final = (
    ("DULY_PGDATA", "another data directory for the embedded PostgreSQL"),
    ("DULY_TRACEBACK", "1: an unexpected error's traceback instead of its one line"),
    ("POWERTOOLS_LOG_LEVEL", "the handler's log level; its JSON lines go to stderr with --logs"),
)


_HELP_WIDTH: Final = 100
_NAME_WIDTH: Final = max(map(len, [*SETTING_VARIABLES, *(n for n, _ in _COMMAND_VARIABLES)]))


class _Recorder(dict[str, str]):
    """An empty environment that notes each variable looked up in it."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self.read:
            self.read.append(key)
        return default


def settings_variables() -> list[str]:
    """The environment variables ``Settings.from_environ`` reads, in the order it reads them."""
    recorder = _Recorder()
    Settings.from_environ(recorder)
    return recorder.read


def _environment_help() -> str:
    defaults = Settings.from_environ({})
    lines = ["environment:"]
    described = [
        *((name, *_with_default(name, defaults)) for name in settings_variables()),
        *((name, meaning, "") for name, meaning in _COMMAND_VARIABLES),
    ]
    for name, meaning, default in described:
        lines.append(
            textwrap.fill(
                f"{meaning}{default}",
                width=_HELP_WIDTH,
                initial_indent=f"  {name:<{_NAME_WIDTH}} ",
                subsequent_indent=" " * (_NAME_WIDTH + 3),
            )
        )
    return "\n".join(lines)


def _with_default(name: str, defaults: Settings) -> tuple[str, str]:
    field, meaning = SETTING_VARIABLES.get(name, (None, "(not described)"))
    value = None if field is None else getattr(defaults, field)
    if value is None:
        return meaning, ""
    return meaning, f" (default {str(value).lower() if isinstance(value, bool) else value})"


def plain_help(text: str | None) -> str:
    """A docstring as help text: without the reStructuredText literal markup."""
    return (text or "").replace("``", "")


ENVIRONMENT: Final = _environment_help()

# The fields that mark the two schedule envelopes (events.parse_event).
_ENVELOPE_FIELDS: Final = ("detail-type", "scheduled_time")
# The run's own logs are quiet unless asked for: the bar and the report say it.
_QUIET: Final = "CRITICAL"


def register(commands: Any) -> None:
    """Add the ``invoke`` command to ``commands`` (an argparse sub-parsers object)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "invoke",
        help="run lambda_handler on an event file (or - for standard input)",
        description=plain_help(__doc__),
        epilog=f"{ENVIRONMENT}\n\n{exit_status.HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "event_file",
        metavar="EVENT_FILE",
        help="a JSON event, e.g. events/backfill-13-months.json; - reads standard input",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="write nothing: count what the run would create (adds dry_run to the event;"
        " a schedule envelope becomes the manual run at its time)",
    )
    parser.add_argument(
        "--now",
        metavar="ISO",
        type=arguments.instant,
        help="the run's clock, an ISO instant such as 2026-12-01T01:00Z (replaces the"
        " event's now, or a schedule envelope's time)",
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


def with_overrides(event: Any, *, dry_run: bool, now: str | datetime | None) -> Any:
    """``event`` with the command line's ``--dry-run`` and ``--now`` added.

    A schedule envelope takes no manual fields (docs/contract.md#invocation), so with either flag
    it becomes the manual payload it amounts to: a scheduled run at its time.
    Raises ``EventError`` for an envelope the parser refuses. Anything else
    that is not a JSON object is left for the parser to refuse.
    """
    if not (dry_run or now is not None) or not isinstance(event, dict):
        return event
    if any(name in event for name in _ENVELOPE_FIELDS):
        clock = parse_event(event, current_time=datetime.now(UTC)).now
        event = {"now": clock.isoformat()}
    extra: dict[str, Any] = {"dry_run": True} if dry_run else {}
    if now is not None:
        extra["now"] = now.isoformat() if isinstance(now, datetime) else now
    return {**event, **extra}


def run(
    args: argparse.Namespace,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    *,
    adjust_runtime: Callable[[Runtime], Runtime] | None = None,
) -> int:
    """Run the command; return its ``ExitStatus``. Never raises for an expected failure.

    The report goes to ``stdout`` whatever the run's outcome; a status other
    than ``OK`` is also said in one line on ``stderr``. ``adjust_runtime``
    (a test's) changes the runtime the command builds before the run starts:
    another time budget, another progress listener.
    """
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    try:
        event = _read_event(args.event_file, stdin)
    except (OSError, ValueError) as exc:
        exit_status.say(stderr, f"cannot read event {args.event_file!r}", str(exc))
        return ExitStatus.REFUSED
    try:
        event = with_overrides(event, dry_run=args.dry_run, now=args.now)
        report = _invoke(event, args, stderr, adjust_runtime)
    except exit_status.EXPECTED as exc:
        return exit_status.say_failure(stderr, exc)
    if args.json or not stdout.isatty() or "mode" not in report:  # a query: JSON alone
        print(json.dumps(report, indent=2), file=stdout)
    else:
        print("\n".join(summary_lines("invoke", report)), file=stdout)
    status, why = exit_status.of_report(report)
    if why is not None:
        exit_status.say(stderr, why)
    return status


def _invoke(
    event: Any,
    args: argparse.Namespace,
    stderr: TextIO,
    adjust_runtime: Callable[[Runtime], Runtime] | None,
) -> dict[str, Any]:
    settings = Settings.from_environ(os.environ)
    dsn = _prepare_database()
    connections = ConnectionCache()
    show_bar = not args.no_progress and stderr.isatty()
    # No metrics: stdout is the report, and EMF only means something in Lambda.
    try:
        # handle raises psycopg's errors only while connecting (a run's own are RunFailedError).
        with (
            exit_status.connecting(dsn),
            _log_level(logger, args.logs),
            _progress_bar(stderr, enabled=show_bar, dry_run=_asks_dry_run(event)) as bar,
        ):
            runtime = runtime_for(
                None,
                replace(settings, database_url=dsn),
                connections,
                clock=lambda: datetime.now(UTC),
                on_progress=bar,
            )
            if adjust_runtime is not None:
                runtime = adjust_runtime(runtime)
            return handle(event, None, runtime)
    finally:
        connections.discard()


def _asks_dry_run(event: Any) -> bool:
    return isinstance(event, dict) and event.get("dry_run") is True


def _read_event(name: str, stdin: TextIO) -> Any:
    text = stdin.read() if name == "-" else Path(name).read_text("utf-8")
    return json.loads(text)


def _prepare_database() -> str:
    dsn, is_embedded = embedded.local_dsn()
    if is_embedded:
        # A fresh checkout's embedded database has no schema yet.
        with exit_status.connecting(dsn):
            conn = open_url(dsn)
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
def _progress_bar(
    stream: TextIO, *, enabled: bool, dry_run: bool
) -> Iterator[Callable[[Progress], None] | None]:
    """A callback drawing a bar of duties done on ``stream``, or None when not enabled.

    A dry run's count is of tasks it would create, and the bar says so.
    """
    try:
        from tqdm import tqdm  # noqa: PLC0415 - only on a terminal, from the dev dependencies
    except ImportError:  # pragma: no cover - an install without them gets no bar
        enabled = False
    if not enabled:
        yield None
        return

    counted = "would_create" if dry_run else "created"
    with tqdm(file=stream, unit=" duties", dynamic_ncols=True, leave=False) as bar:

        def draw(progress: Progress) -> None:
            bar.total = progress.duties_total
            bar.n = progress.duties_done
            bar.set_postfix({counted: progress.tasks_created}, refresh=False)
            bar.refresh()

        yield draw
