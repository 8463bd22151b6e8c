"""Local commands: ``python -m dispatch_fn migrate | invoke EVENT_FILE | demo | stop-db``.

Each honours ``DATABASE_URL``; without it they use the embedded PostgreSQL kept
in the checkout's git-ignored ``.duly/`` directory, which keeps running between
commands until ``stop-db``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime

import psycopg

from dispatch_fn import embedded, invoke_cli
from dispatch_fn.errors import EmbeddedServerBusyError
from dispatch_fn.migrate import apply_migrations


def _migrate(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return apply_migrations(conn)


def _cmd_migrate(_: argparse.Namespace) -> int:
    dsn, _embedded = embedded.local_dsn()
    applied = _migrate(dsn)
    print(f"applied {', '.join(applied)}" if applied else "schema is up to date")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from dispatch_fn import demo  # noqa: PLC0415 - only this command needs it

    dsn, is_embedded = embedded.local_dsn()
    _migrate(dsn)
    demo.run_demo(dsn, args.now)
    if is_embedded:
        print(
            f"\nThe embedded PostgreSQL keeps running (data in {embedded.default_data_dir()}),"
            " so later commands see these tasks;\nstop it with `python -m dispatch_fn stop-db`"
            " (or `make stop-db`)."
        )
    return 0


def _cmd_stop_db(_: argparse.Namespace) -> int:
    try:
        stopped = embedded.stop()
    except EmbeddedServerBusyError as busy:
        print(f"error: {busy}", file=sys.stderr)
        return 1
    where = embedded.default_data_dir()
    print(f"stopped the embedded PostgreSQL in {where}" if stopped else f"not running: {where}")
    return 0


def _instant(text: str) -> datetime:
    instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if instant.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no UTC offset; expected e.g. 2026-12-01T01:00Z"
        )
    return instant


def build_parser() -> argparse.ArgumentParser:
    """The command line: one sub-command per local task."""
    parser = argparse.ArgumentParser(
        prog="python -m dispatch_fn",
        description=__doc__,
        epilog=f"{invoke_cli.ENVIRONMENT}\n\ninvoke's {invoke_cli.EXIT_STATUSES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply pending schema migrations").set_defaults(
        run=_cmd_migrate
    )
    invoke_cli.register(commands)
    demo = commands.add_parser("demo", help="seed a demo organisation and run the dispatcher")
    demo.add_argument(
        "--now", type=_instant, default=None, help="the demo's UTC clock (default: now)"
    )
    demo.set_defaults(run=_cmd_demo)
    commands.add_parser(
        "stop-db", help="stop the embedded PostgreSQL that the other commands leave running"
    ).set_defaults(run=_cmd_stop_db)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run one command; return the exit status."""
    args = build_parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
