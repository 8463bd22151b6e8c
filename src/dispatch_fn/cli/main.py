"""Local commands: ``python -m dispatch_fn migrate | invoke | demo | runs | explain | stop-db``.

Each honours ``DATABASE_URL``; without it they use the embedded PostgreSQL kept
in the checkout's git-ignored ``.duly/`` directory, which keeps running between
commands until ``stop-db``. ``--version`` says the installed package's version.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from dispatch_fn.cli import embedded, exit_status, invoke
from dispatch_fn.cli.exit_status import ExitStatus
from dispatch_fn.db.database import url_conninfo
from dispatch_fn.db.migrate import apply_migrations, schema_state

# The distribution (pyproject.toml's name) whose metadata holds the version.
_DISTRIBUTION = "duly-dispatcher"
# Set to 1 to see the traceback of an unexpected error instead of its one line.
_TRACEBACK_VARIABLE = "DULY_TRACEBACK"


def _connect(dsn: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    with exit_status.connecting():
        return psycopg.connect(url_conninfo(dsn), autocommit=autocommit)


def _migrate(dsn: str) -> list[str]:
    with _connect(dsn) as conn:
        return apply_migrations(conn)


def _reader() -> psycopg.Connection[Any]:
    """An autocommit connection for a command that reads: an embedded server migrated first."""
    dsn, is_embedded = embedded.local_dsn()
    if is_embedded:
        _migrate(dsn)
    return _connect(dsn, autocommit=True)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}; expected 1 or more")
    return value


def _cmd_migrate(_: argparse.Namespace) -> int:
    dsn, _embedded = embedded.local_dsn()
    with _connect(dsn) as conn:
        applied = apply_migrations(conn)
        state = schema_state(conn)
    print(f"applied {', '.join(applied)}" if applied else "schema is up to date")
    if state.unknown:
        # Not an error (older code runs on a newer schema), but never silent.
        print(
            f"note: the database is ahead of the code: it holds {', '.join(state.unknown)}, "
            f"newer than this code's {state.code_newest}; migrations are forward-only, "
            "so they stay applied",
            file=sys.stderr,
        )
    return ExitStatus.OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from dispatch_fn.cli import demo  # noqa: PLC0415 - only this command needs it

    dsn, is_embedded = embedded.local_dsn()
    _migrate(dsn)
    reports = demo.run_demo(dsn, args.now)
    if is_embedded:
        print(
            f"\nThe embedded PostgreSQL keeps running (data in {embedded.default_data_dir()}),"
            " so later commands see these tasks;\nstop it with `python -m dispatch_fn stop-db`"
            " (or `make stop-db`)."
        )
    status, why = demo.exit_status_of(reports)
    if why is not None:
        exit_status.say(sys.stderr, why)
    return status


def _cmd_explain(args: argparse.Namespace) -> int:
    from datetime import UTC  # noqa: PLC0415 - only this command needs them

    from dispatch_fn.aws.events import parse_event  # noqa: PLC0415
    from dispatch_fn.run.explain import explain, render  # noqa: PLC0415

    # The clock and window are read exactly as an event's would be.
    given = {"now": args.now, "from": args.from_date, "to": args.to_date}
    event: dict[str, object] = {
        "dry_run": True,
        "duty_ids": [args.duty_id],
        **{field: value for field, value in given.items() if value is not None},
    }
    request = parse_event(event, current_time=datetime.now(UTC))
    now, window = request.now, request.window
    with _reader() as conn:
        explained = explain(conn, [args.duty_id], now, window)[args.duty_id]
    if args.json:
        print(json.dumps(explained, indent=2))
    else:
        print(render(explained, now.isoformat()))
    return ExitStatus.OK if explained["found"] else ExitStatus.UNKNOWN_DUTY


def _cmd_stop_db(_: argparse.Namespace) -> int:
    stopped = embedded.stop()
    where = embedded.default_data_dir()
    print(f"stopped the embedded PostgreSQL in {where}" if stopped else f"not running: {where}")
    return ExitStatus.OK


def _cmd_runs(args: argparse.Namespace) -> int:
    from dispatch_fn.db import runs_table  # noqa: PLC0415 - only this command needs it

    with _reader() as conn:
        print(
            runs_table.render(
                conn, limit=args.limit, as_json=args.json, mode=args.mode, status=args.status
            )
        )
    return ExitStatus.OK


def _cmd_runs_show(args: argparse.Namespace) -> int:
    from dispatch_fn.db import ledger, runs_table  # noqa: PLC0415 - only this command needs them

    with _reader() as conn:
        record = ledger.one(conn, args.run_id)
    if record is None:
        exit_status.say(sys.stderr, f"no run {args.run_id}", "`runs` lists the recorded ones")
        return ExitStatus.UNKNOWN_RUN
    print(runs_table.render_one(record, as_json=args.json))
    return ExitStatus.OK


def _version() -> str:
    try:
        return importlib.metadata.version(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (the package is not installed)"


def _instant(text: str) -> datetime:
    instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if instant.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no UTC offset; expected e.g. 2026-12-01T01:00Z"
        )
    return instant


def build_parser() -> argparse.ArgumentParser:
    """The command line: one sub-command per local task."""
    from dispatch_fn.db.ledger import MODES, SHOWN_STATUSES  # noqa: PLC0415 - names only

    parser = argparse.ArgumentParser(
        prog="python -m dispatch_fn",
        description=invoke.plain_help(__doc__),
        epilog=f"{invoke.ENVIRONMENT}\n\n{exit_status.HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="say the version"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "migrate",
        help="apply the pending schema migrations (a second call does nothing)",
        description="Apply the migrations in src/dispatch_fn/db/migrations/ that the database has"
        " not had yet, in order; say which, or that the schema is up to date.",
    ).set_defaults(run=_cmd_migrate)
    invoke.register(commands)
    demo = commands.add_parser(
        "demo",
        help="seed a demo organisation and run the dispatcher",
        description="Seed org-demo's own duties (a duty you added to org-demo is kept), then"
        " run a scheduled run, its re-run and a 13-month backfill twice, all scoped to org-demo,"
        " and print what each did.",
    )
    demo.add_argument(
        "--now", type=_instant, default=None, help="the demo's UTC clock (default: now)"
    )
    demo.set_defaults(run=_cmd_demo)
    runs = commands.add_parser(
        "runs",
        help="recent runs from the run ledger, newest first; runs show ID: one run's record",
        description="The run ledger, newest first: clock, mode, status, tasks created and"
        " already there, faults, duration. 'runs show ID' gives one run's whole record.",
    )
    runs.add_argument("--limit", type=_positive_int, default=20, help="how many (default 20)")
    runs.add_argument("--mode", choices=MODES, help="only runs of this mode")
    runs.add_argument("--status", choices=SHOWN_STATUSES, help="only runs shown with this status")
    runs.add_argument("--json", action="store_true", help="JSON for machines")
    runs.set_defaults(run=_cmd_runs)
    shown = runs.add_subparsers(dest="runs_command", metavar="show ID").add_parser(
        "show",
        help="one run's whole record: its ledger row, report and set-aside duties",
        description="One run's whole record: every ledger field, the duties it set aside (and"
        f" which run repaid each) and its report. Exit {ExitStatus.UNKNOWN_RUN.value}: no run"
        " has that id.",
    )
    shown.add_argument(
        "run_id", metavar="ID", type=_positive_int, help="the run's id (runs lists them)"
    )
    shown.add_argument("--json", action="store_true", help="JSON for machines")
    shown.set_defaults(run=_cmd_runs_show)
    why = commands.add_parser(
        "explain",
        help="every candidate period of one duty and its verdict "
        f"(exit {ExitStatus.UNKNOWN_DUTY.value}: unknown)",
        description="Every candidate period of one duty at the run's clock, with its verdict"
        " (would_create, exists, not_owed and why), or the duty's skip or fault; judged by the"
        " planner the run itself uses.",
    )
    why.add_argument("duty_id")
    why.add_argument("--now", help="the run's clock, an ISO instant (default: now)")
    why.add_argument("--from", dest="from_date", help="backfill window's first day, YYYY-MM-DD")
    why.add_argument("--to", dest="to_date", help="backfill window's last day (default: today)")
    why.add_argument("--json", action="store_true", help="machine-readable output")
    why.set_defaults(run=_cmd_explain)
    commands.add_parser(
        "stop-db",
        help="stop the embedded PostgreSQL that the other commands leave running",
        description="Stop the embedded PostgreSQL in .duly/pgdata (or $DULY_PGDATA) that the"
        " other commands start and leave running, so tasks persist between them; its data stays."
        f" Exit {ExitStatus.SERVER_BUSY.value}: another process still uses it.",
    ).set_defaults(run=_cmd_stop_db)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run one command; return its exit status (``ExitStatus``).

    Every command's failures are mapped here alike: one line on stderr, no traceback.
    """
    args = build_parser().parse_args(argv)
    try:
        status: int = args.run(args)
    # Anything at all, unexpected errors included: docs/contract.md#exit-statuses wants one line,
    # never a traceback.
    except (Exception, KeyboardInterrupt) as exc:
        failed = exit_status.say_failure(sys.stderr, exc)
        if failed is ExitStatus.UNEXPECTED and os.environ.get(_TRACEBACK_VARIABLE) == "1":
            raise
        return failed
    return status


if __name__ == "__main__":
    sys.exit(main())
