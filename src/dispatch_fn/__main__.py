"""Local commands: ``python -m dispatch_fn migrate | invoke | demo | runs | explain``.

Each honours ``DATABASE_URL``; without it they use the embedded PostgreSQL kept
in the checkout's git-ignored ``.duly/`` directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from dispatch_fn import embedded
from dispatch_fn.database import ConnectionCache
from dispatch_fn.errors import ConfigurationError, EventError
from dispatch_fn.migrate import apply_migrations
from dispatch_fn.settings import Settings

_EXIT_REFUSED = 2
_EXIT_CONFIGURATION = 3
_EXIT_UNKNOWN_DUTY = 4


def _database_url() -> tuple[str, bool]:
    """The DSN to use, and whether it is the embedded server."""
    if url := os.environ.get("DATABASE_URL"):
        return url, False
    return embedded.start(), True


def _migrate(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return apply_migrations(conn)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}; expected 1 or more")
    return value


def _cmd_migrate(_: argparse.Namespace) -> int:
    dsn, _embedded = _database_url()
    applied = _migrate(dsn)
    print(f"applied {', '.join(applied)}" if applied else "schema is up to date")
    return 0


def _cmd_invoke(args: argparse.Namespace) -> int:
    path = Path(args.event_file)
    try:
        event = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        print(f"error: cannot read event {str(path)!r}: {exc}", file=sys.stderr)
        return _EXIT_REFUSED
    dsn, is_embedded = _database_url()
    if is_embedded:
        # A fresh checkout's embedded database has no schema yet.
        _migrate(dsn)
    from dispatch_fn.invocation import handle  # noqa: PLC0415 - only this command needs it

    # No metrics: stdout is the report, and EMF only means something in Lambda.
    connections = ConnectionCache()
    try:
        settings = replace(Settings.from_environ(os.environ), database_url=dsn)
        report = handle(
            event,
            None,
            settings=settings,
            connections=connections,
            clock=lambda: datetime.now(UTC),
        )
    except EventError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _EXIT_REFUSED
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _EXIT_CONFIGURATION
    finally:
        connections.discard()
    print(json.dumps(report, indent=2))
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime  # noqa: PLC0415 - only this command needs them

    from dispatch_fn.events import parse_event  # noqa: PLC0415
    from dispatch_fn.explain import explain, render  # noqa: PLC0415

    # The clock and window are read exactly as an event's would be.
    given = {"now": args.now, "from": args.from_date, "to": args.to_date}
    event: dict[str, object] = {
        "dry_run": True,
        "duty_ids": [args.duty_id],
        **{field: value for field, value in given.items() if value is not None},
    }
    try:
        request = parse_event(event, current_time=datetime.now(UTC))
    except EventError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _EXIT_REFUSED
    now, window = request.now, request.window
    dsn, is_embedded = _database_url()
    if is_embedded:
        _migrate(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        explained = explain(conn, [args.duty_id], now, window)[args.duty_id]
    if args.json:
        print(json.dumps(explained, indent=2))
    else:
        print(render(explained, now.isoformat()))
    return 0 if explained["found"] else _EXIT_UNKNOWN_DUTY


def _cmd_demo(_: argparse.Namespace) -> int:
    from dispatch_fn import demo  # noqa: PLC0415 - only this command needs it

    dsn, _embedded = _database_url()
    _migrate(dsn)
    demo.run_demo(dsn)
    return 0


def _cmd_runs(args: argparse.Namespace) -> int:
    from dispatch_fn import runs_table  # noqa: PLC0415 - only this command needs it

    dsn, is_embedded = _database_url()
    if is_embedded:
        _migrate(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        print(runs_table.render(conn, limit=args.limit, as_json=args.json))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run one command; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m dispatch_fn", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply pending schema migrations").set_defaults(
        run=_cmd_migrate
    )
    invoke = commands.add_parser("invoke", help="run lambda_handler on an event file")
    invoke.add_argument("event_file", help="a JSON event, e.g. events/backfill-13-months.json")
    invoke.set_defaults(run=_cmd_invoke)
    commands.add_parser(
        "demo", help="seed a demo organisation and run the dispatcher"
    ).set_defaults(run=_cmd_demo)
    runs = commands.add_parser("runs", help="recent runs from the run ledger, newest first")
    runs.add_argument("--limit", type=_positive_int, default=20, help="how many (default 20)")
    runs.add_argument("--json", action="store_true", help="JSON for machines")
    runs.set_defaults(run=_cmd_runs)
    why = commands.add_parser(
        "explain", help="every candidate period of one duty and its verdict (exit 4: unknown)"
    )
    why.add_argument("duty_id")
    why.add_argument("--now", help="the run's clock, an ISO instant (default: now)")
    why.add_argument("--from", dest="from_date", help="backfill window's first day, YYYY-MM-DD")
    why.add_argument("--to", dest="to_date", help="backfill window's last day (default: today)")
    why.add_argument("--json", action="store_true", help="machine-readable output")
    why.set_defaults(run=_cmd_explain)
    args = parser.parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
