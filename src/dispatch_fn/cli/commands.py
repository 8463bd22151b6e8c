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

from dispatch_fn.cli import arguments, embedded, exit_status, invoke
from dispatch_fn.cli.exit_status import ExitStatus
from dispatch_fn.db import apply_migrations, open_url, schema_state

# The distribution (pyproject.toml's name) whose metadata holds the version.
_DISTRIBUTION = "duly-dispatcher"
# Set to 1 to see the traceback of an unexpected error instead of its one line.
_TRACEBACK_VARIABLE = "DULY_TRACEBACK"


def _connect(dsn: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    with exit_status.connecting(dsn):
        return open_url(dsn, autocommit=autocommit)


def _migrate(dsn: str) -> list[str]:
    with _connect(dsn) as conn:
        return apply_migrations(conn)


def _reader() -> psycopg.Connection[Any]:
    """An autocommit connection for a command that reads: an embedded server migrated first."""
    dsn, is_embedded = embedded.local_dsn()
    if is_embedded:
        _migrate(dsn)
    return _connect(dsn, autocommit=True)


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

    from dispatch_fn.aws import parse_event  # noqa: PLC0415
    from dispatch_fn.run import explain, render_explanation  # noqa: PLC0415
    from dispatch_fn.settings import Settings  # noqa: PLC0415

    # Judged as the deployment's runs judge (docs/contract.md#explain): its
    # horizon, and its schedule interval, which places a new duty's origin.
    settings = Settings.from_environ(os.environ)

    # The clock and window are read exactly as an event's would be (the flags' types have
    # checked each value already, so a refusal here is of the combination: 'to' alone).
    given = {
        "now": None if args.now is None else args.now.isoformat(),
        "from": None if args.from_date is None else args.from_date.isoformat(),
        "to": None if args.to_date is None else args.to_date.isoformat(),
    }
    event: dict[str, object] = {
        "dry_run": True,
        "duty_ids": [args.duty_id],
        "organization_id": args.organization_id,
        **{field: value for field, value in given.items() if value is not None},
    }
    request = parse_event(
        event,
        current_time=datetime.now(UTC),
        max_window_days=settings.max_window_days,
        interval=settings.interval,
    )
    now, window = request.now, request.window
    with _reader() as conn:
        explained = explain(
            conn,
            [args.duty_id],
            now,
            window,
            interval=request.interval,
            catch_up_days=settings.catch_up_days,
            organization_id=request.scope.organization_id,
        )[args.duty_id]
    if args.json:
        print(json.dumps(explained, indent=2))
    else:
        print(render_explanation(explained, now.isoformat()))
    status, why = exit_status.of_explained(explained)
    if why is not None:
        exit_status.say(sys.stderr, why)
    return status


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


def _cmd_redrive(args: argparse.Namespace) -> int:
    import boto3  # noqa: PLC0415 - only this command talks to AWS
    from botocore.exceptions import BotoCoreError  # noqa: PLC0415

    from dispatch_fn.cli import redrive  # noqa: PLC0415
    from dispatch_fn.errors import ConfigurationError  # noqa: PLC0415

    try:
        clients = boto3 if args.aws_session is None else args.aws_session
        sqs = clients.client("sqs", region_name=args.region)
        lambda_client = clients.client("lambda", region_name=args.region)
        outcome = redrive.redrive(
            sqs, lambda_client, args.queue_urls, function=args.function, execute=args.execute
        )
    except BotoCoreError as exc:  # no region, no credentials, no route: nothing was redriven
        raise ConfigurationError(f"AWS: {exc}; expected credentials and a region") from exc
    print("\n".join(redrive.lines(outcome, execute=args.execute)))
    if outcome.complete:
        return ExitStatus.OK
    exit_status.say(
        sys.stderr,
        f"{len(outcome.left)} message(s) left in the queue",
        "the lines above say why; mend that and redrive again",
    )
    return ExitStatus.FAILED


def _cmd_schedule(args: argparse.Namespace) -> int:
    from datetime import UTC  # noqa: PLC0415 - only this command needs them

    import boto3  # noqa: PLC0415 - only this command talks to AWS
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

    from dispatch_fn.cli import schedule  # noqa: PLC0415
    from dispatch_fn.errors import ConfigurationError  # noqa: PLC0415

    try:
        clients = boto3 if args.aws_session is None else args.aws_session
        cloudformation = clients.client("cloudformation", region_name=args.region)
        scheduler = clients.client("scheduler", region_name=args.region)
        if args.action != "status":
            state = schedule.DISABLED if args.action == "pause" else schedule.ENABLED
            if schedule.set_state(cloudformation, args.stack, state):
                print(f"updating {args.stack}: {schedule.PARAMETER}={state}, nothing else")
                if not args.no_wait:
                    cloudformation.get_waiter("stack_update_complete").wait(StackName=args.stack)
            else:
                print(f"{args.stack} already deploys {schedule.PARAMETER}={state}")
        status = schedule.status(cloudformation, scheduler, args.stack, now=datetime.now(UTC))
    except (BotoCoreError, ClientError) as exc:
        raise ConfigurationError(
            f"AWS: {exc}; expected credentials, a region and the dispatcher's stack name"
        ) from exc
    print("\n".join(status.lines()))
    return ExitStatus.OK


def _version() -> str:
    try:
        return importlib.metadata.version(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (the package is not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The command line: one sub-command per local task."""
    from dispatch_fn.planning import MODES, SHOWN_STATUSES  # noqa: PLC0415 - names only

    parser = arguments.Parser(
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
        "--now", type=arguments.instant, default=None, help="the demo's UTC clock (default: now)"
    )
    demo.set_defaults(run=_cmd_demo)
    runs = commands.add_parser(
        "runs",
        help="recent runs from the run ledger, newest first; runs show ID: one run's record",
        description="The run ledger, newest first: clock, mode, status, tasks created and"
        " already there, faults, duration. 'runs show ID' gives one run's whole record.",
    )
    runs.add_argument(
        "--limit",
        type=arguments.whole_number(arguments.MAX_BIGINT),
        default=20,
        help="how many (default 20)",
    )
    runs.add_argument("--mode", choices=MODES, help="only runs of this mode")
    runs.add_argument("--status", choices=SHOWN_STATUSES, help="only runs shown with this status")
    runs.add_argument("--json", action="store_true", help="JSON for machines")
    runs.set_defaults(run=_cmd_runs)
    shown = runs.add_subparsers(dest="runs_command", metavar="show ID").add_parser(
        "show",
        help="one run's whole record: its ledger row, report and set-aside duties",
        description="One run's whole record: every ledger field, the duties it set aside (each"
        " with its reason and the clock it was owed from) and its report."
        f" Exit {ExitStatus.UNKNOWN_RUN.value}: no run has that id.",
    )
    shown.add_argument(
        "run_id",
        metavar="ID",
        type=arguments.whole_number(arguments.MAX_BIGINT),
        help="the run's id (runs lists them)",
    )
    shown.add_argument("--json", action="store_true", help="JSON for machines")
    shown.set_defaults(run=_cmd_runs_show)
    why = commands.add_parser(
        "explain",
        help="every candidate period of one duty and its verdict "
        f"(exit {ExitStatus.UNKNOWN_DUTY.value}: unknown)",
        description="Every candidate period of one duty at the run's clock, with its verdict"
        " (would_create, exists, not_owed and why), or the duty's skip or fault; judged by the"
        " planner the run itself uses, with the deployment's DISPATCH_CATCH_UP_DAYS and"
        " DISPATCH_SCHEDULE_INTERVAL_HOURS from the environment.",
    )
    why.add_argument("duty_id")
    why.add_argument(
        "--now", type=arguments.instant, help="the run's clock, an ISO instant (default: now)"
    )
    why.add_argument(
        "--from",
        dest="from_date",
        type=arguments.day,
        help="backfill window's first day, YYYY-MM-DD",
    )
    why.add_argument(
        "--to",
        dest="to_date",
        type=arguments.day,
        help="backfill window's last day (default: today)",
    )
    why.add_argument(
        "--organization",
        dest="organization_id",
        help="the duty's organisation, where several hold its id (a partitioned layout)",
    )
    why.add_argument("--json", action="store_true", help="machine-readable output")
    why.set_defaults(run=_cmd_explain)
    kill_switch = commands.add_parser(
        "schedule",
        help="the kill switch: pause or resume the stack's schedule, or say its state and next run",
        description="status: what the stack deploys (DispatchScheduleState), what the schedule"
        " itself says, whether they disagree, and its next run. pause / resume: update the"
        " deployed stack with its previous template and every other parameter as it was,"
        " changing only DispatchScheduleState, then wait for the update and say the status."
        " Uses the AWS credentials and region of the environment.",
    )
    kill_switch.add_argument("action", choices=("status", "pause", "resume"))
    kill_switch.add_argument("stack", metavar="STACK", help="the dispatcher's stack name")
    kill_switch.add_argument("--region", help="the stack's region (default: AWS's)")
    kill_switch.add_argument(
        "--no-wait", action="store_true", help="pause / resume: do not wait for the update"
    )
    kill_switch.set_defaults(run=_cmd_schedule)
    redriven = commands.add_parser(
        "redrive",
        help="re-invoke what the failed-run queue and the schedule dead-letter queue hold,"
        " and drain them (a dry run unless --execute)",
        description="Read every message of each queue (outputs FailedRunQueueUrl and"
        " ScheduleDeadLetterQueueUrl): a failed-run record's requestPayload, or a dead-lettered"
        " schedule payload. A dry run (the default) lists them and leaves the queues as they"
        " were; --execute invokes each event again, asynchronously, on the function it was sent"
        " to, and deletes its message once Lambda accepted it. Uses the AWS credentials and"
        f" region of the environment. Exit {ExitStatus.FAILED.value}: a message was left.",
    )
    redriven.add_argument(
        "queue_urls", metavar="QUEUE_URL", nargs="+", help="a queue to redrive (one or both)"
    )
    redriven.add_argument(
        "--execute", action="store_true", help="invoke and delete (default: only say what)"
    )
    redriven.add_argument(
        "--function",
        metavar="NAME_OR_ARN",
        help="invoke this function instead of the one each message names",
    )
    redriven.add_argument("--region", help="the queues' and function's region (default: AWS's)")
    redriven.set_defaults(run=_cmd_redrive)
    commands.add_parser(
        "stop-db",
        help="stop the embedded PostgreSQL that the other commands leave running",
        description="Stop the embedded PostgreSQL in .duly/pgdata (or $DULY_PGDATA) that the"
        " other commands start and leave running, so tasks persist between them; its data stays."
        f" Exit {ExitStatus.SERVER_BUSY.value}: another process still uses it.",
    ).set_defaults(run=_cmd_stop_db)
    return parser


def main(argv: Sequence[str] | None = None, *, aws_session: Any = None) -> int:
    """Parse the command line and run one command; return its exit status (``ExitStatus``).

    Every command's failures are mapped here alike: one line on stderr, no traceback.
    The AWS commands make their clients from ``aws_session`` (a
    ``boto3.session.Session``), else from boto3's default session.
    """
    args = build_parser().parse_args(argv)
    args.aws_session = aws_session
    try:
        status: int = args.run(args)
        # Written now, not at exit, so a reader that went away is heard here.
        sys.stdout.flush()
    except BrokenPipeError:
        return _reader_gone()
    # Anything at all, unexpected errors included: docs/contract.md#exit-statuses wants one line,
    # never a traceback.
    except (Exception, KeyboardInterrupt) as exc:
        failed = exit_status.say_failure(sys.stderr, exc)
        if failed is ExitStatus.UNEXPECTED and os.environ.get(_TRACEBACK_VARIABLE) == "1":
            raise
        return failed
    return status


def _reader_gone() -> ExitStatus:
    """Standard output's reader went away (``| head``): stop quietly, as Unix tools do.

    Whatever is still buffered goes to /dev/null, so the interpreter's own flush
    at exit does not fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return ExitStatus.BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
