"""A day's run on years of task history against the same day without it (issue 37, part 4).

Run: .venv/bin/python -m bench.dispatch.history [--duties N] [--factor F]
         [--mix MIX] [--layout LAYOUT] [--chunk-size C] [--workers W]
         [--json PATH] [--database-url DSN]

``make bench-history`` runs it; it is a pass of its own, not part of ``make
bench``, because the history multiplies the task table F-fold (34 by default:
at the default 200,000 duties, about 11 million tasks, some 4 GiB).

Two fresh databases, generated alike (``data``), in the same layout. In each
the first run at the bench's clock (``data.CLOCK``). Then, in one of them, the
task history grows to F times the tasks there are: for every duty and owner,
F - 1 past periods of its frequency per task it holds, before its earliest,
written set-based in time order (one ``INSERT … SELECT``), each a copy of that
task moved back by whole periods, and closed (status ``done``), as years of
tasks would be. Both vacuumed and analysed as autovacuum would leave them;
then the day's run at the next scheduled clock (the clock + 1 day) in each,
back to back. The goal, printed and never judged: the day with the history
costs at most 1.2 times the day without, in server CPU (and wall time shown
beside it). The two days must create the same tasks: the history is over,
and owes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import psycopg

from bench.dispatch.child import ChildSpec
from bench.dispatch.data import CLOCK, DataSummary, generate
from bench.dispatch.disk import DiskCheck, Tables, check_disk
from bench.dispatch.dispatcher import ChildRun, run_child
from bench.dispatch.judging import GOAL, ratio
from bench.dispatch.mix import CLASSIC, MIXES
from bench.dispatch.options import BENCH_DIR, EVERY_LAYOUT, positive_int
from bench.dispatch.render import disk_line
from bench.dispatch.server import (
    DISPATCH_TABLES,
    BenchError,
    Conn,
    fresh_database,
    scalar,
    server,
    vacuum,
)
from bench.dispatch.week import SCHEDULE_INTERVAL
from dispatch_fn import settings
from dispatch_fn.db.layout import PLAIN
from dispatch_fn.planning import FaultReason, SkipReason

DEFAULT_HISTORY_DUTIES: Final = 200_000
# The skips the census counts from the index of duties not dispatched, by the
# columns plan.classify reads (duty_census_left_out.sql): none of them is read.
_NOT_DISPATCHED: Final = (
    SkipReason.STANDING,
    SkipReason.ONE_OFF,
    SkipReason.NOT_ACTIVE,
    SkipReason.NOT_APPROVED,
)
DEFAULT_FACTOR: Final = 34
HISTORY_GOAL: Final = 1.2

# Each duty and owner's earliest task (by its period's first day) and how many
# it holds; F - 1 periods back from that task per task held. The keys are
# spelled as periods.period_key_for spells them; a fortnight starts on an odd
# ISO week, so a start on an even one (after a 53-week year) moves back one.
_HISTORY: Final = """
INSERT INTO duly_task (organization_id, duty_id, owner_id, business_unit_id, subject, source,
                       period_key, due_date, visible_from, late_after, status, created_at)
SELECT t.organization_id, t.duty_id, t.owner_id, t.business_unit_id, t.subject, t.source,
       k.key, t.due_date + k.shift, t.visible_from + k.shift, t.late_after + k.shift, 'done',
       t.created_at + k.shift * interval '1 day'
FROM (SELECT DISTINCT ON (organization_id, duty_id, owner_id)
             organization_id, duty_id, owner_id, business_unit_id, subject, source,
             due_date, visible_from, late_after, created_at,
             duly_period_first_day(period_key) AS first_day,
             count(*) OVER (PARTITION BY organization_id, duty_id, owner_id) AS held
      FROM duly_task
      ORDER BY organization_id, duty_id, owner_id, duly_period_first_day(period_key)) t
JOIN duly_duty d ON d.organization_id = t.organization_id AND d.id = t.duty_id
CROSS JOIN LATERAL generate_series(1, ((%(factor)s::int - 1) * t.held)::int) AS j
CROSS JOIN LATERAL (SELECT CASE d.frequency
        WHEN 'daily' THEN t.first_day - j
        WHEN 'weekly' THEN t.first_day - 7 * j
        WHEN 'fortnightly' THEN t.first_day - 14 * j
            - CASE WHEN extract(week FROM t.first_day - 14 * j)::int %% 2 = 0 THEN 7 ELSE 0 END
        WHEN 'monthly' THEN (t.first_day - make_interval(months => j))::date
        WHEN 'quarterly' THEN (t.first_day - make_interval(months => 3 * j))::date
        WHEN 'semiannual' THEN (t.first_day - make_interval(months => 6 * j))::date
        WHEN 'annual' THEN (t.first_day - make_interval(years => j))::date
    END AS start) s
CROSS JOIN LATERAL (SELECT CASE d.frequency
        WHEN 'daily' THEN to_char(s.start, 'YYYY-MM-DD')
        WHEN 'weekly' THEN to_char(s.start, 'IYYY-"W"IW')
        WHEN 'fortnightly' THEN to_char(s.start, 'IYYY-"W"IW')
        WHEN 'monthly' THEN to_char(s.start, 'YYYY-MM')
        WHEN 'quarterly' THEN to_char(s.start, 'YYYY-"Q"Q')
        WHEN 'semiannual' THEN to_char(s.start, 'YYYY')
            || CASE WHEN extract(month FROM s.start) <= 6 THEN '-H1' ELSE '-H2' END
        WHEN 'annual' THEN to_char(s.start, 'YYYY')
    END AS key, s.start - t.first_day AS shift) k
WHERE k.key IS NOT NULL
ORDER BY s.start, t.organization_id, t.duty_id
ON CONFLICT DO NOTHING
"""


@dataclass(frozen=True, slots=True)
class HistoryOptions:
    """What one history pass measures."""

    duties: int = DEFAULT_HISTORY_DUTIES
    factor: int = DEFAULT_FACTOR
    mix: str = CLASSIC.name
    layout: str = PLAIN
    chunk_size: int = settings.DEFAULT_CHUNK_SIZE
    workers: int = settings.DEFAULT_WORKERS
    json_path: Path | None = None
    database_url: str | None = None

    def result_path(self) -> Path:
        """Where the JSON goes."""
        suffix = "" if self.mix == CLASSIC.name else f"-{self.mix}"
        suffix += "" if self.layout == PLAIN else f"-{self.layout}"
        name = f"history-{self.duties}-x{self.factor}{suffix}.json"
        return self.json_path or BENCH_DIR / "results" / name


@dataclass(frozen=True, slots=True)
class Side:
    """One database: the first run, the tasks the day found there, and the day's run."""

    data: DataSummary
    first: ChildRun
    tasks_before_day: int
    day: ChildRun


@dataclass(slots=True)
class HistoryResults:
    """Both sides, and the ratios the goal reads."""

    parameters: dict[str, Any]
    server: dict[str, Any]
    disk: DiskCheck
    without: Side
    with_history: Side
    history_seconds: float = 0.0
    code_versions: list[str] = field(default_factory=list)

    @property
    def server_cpu_ratio(self) -> float | None:
        """The day's server CPU with the history over without it; None where not read."""
        spent = self.with_history.day.server_cpu_seconds
        without = self.without.day.server_cpu_seconds
        return None if spent is None or without is None else ratio(spent, without)

    @property
    def wall_ratio(self) -> float:
        """The day's wall time with the history over without it."""
        return ratio(self.with_history.day.seconds, self.without.day.seconds)

    def as_json(self) -> dict[str, Any]:
        """Everything, JSON-serialisable."""
        return {
            **asdict(self),
            "server_cpu_ratio": self.server_cpu_ratio,
            "wall_ratio": self.wall_ratio,
        }


def add_history(conn: Conn, factor: int) -> int:
    """Grow the task history to about ``factor`` times the tasks there are; return the tasks."""
    conn.execute(_HISTORY, {"factor": factor})
    return int(scalar(conn, "SELECT count(*) FROM duly_task"))


def run_history(options: HistoryOptions, server_dsn: str, label: str = "") -> HistoryResults:
    """Check the disk; measure the day without the history and with it, back to back."""
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        version = str(scalar(admin, "SHOW server_version"))
    # Two databases: the duties in each, the first run's tasks in one and F
    # times them in the other, each side growing by the day's tasks.
    tables = Tables(duty_copies=2, task_copies=options.factor + 2, backfill=False)
    mix = MIXES[options.mix]
    disk = check_disk(
        server_dsn,
        mix,
        duties=options.duties,
        backfill_duties=0,
        tables=tables,
        chunk_size=options.chunk_size,
    )
    with (
        fresh_database(server_dsn, "plain_history", options.layout) as without_dsn,
        fresh_database(server_dsn, "history", options.layout) as with_dsn,
        psycopg.connect(without_dsn, autocommit=True) as without,
        psycopg.connect(with_dsn, autocommit=True) as with_history,
    ):
        specs = [
            ChildSpec(
                dsn=dsn,
                now=CLOCK.isoformat(),
                chunk_size=options.chunk_size,
                workers=options.workers,
                recorded=True,
            )
            for dsn in (without_dsn, with_dsn)
        ]
        conns = (without, with_history)
        data = [generate(conn, options.duties, max(1, options.duties // 20), mix) for conn in conns]
        firsts = [run_child(conn, spec) for conn, spec in zip(conns, specs, strict=True)]
        before = [int(scalar(without, "SELECT count(*) FROM duly_task"))]
        started = scalar(with_history, "SELECT clock_timestamp()")
        before.append(add_history(with_history, options.factor))
        history_seconds = float(
            scalar(with_history, "SELECT extract(epoch FROM clock_timestamp() - %s)", (started,))
        )
        for conn in conns:
            vacuum(conn, DISPATCH_TABLES)
        next_clock = (CLOCK + SCHEDULE_INTERVAL).isoformat()
        days = [
            run_child(conn, dataclasses.replace(spec, now=next_clock))
            for conn, spec in zip(conns, specs, strict=True)
        ]
    if days[0].tasks_created != days[1].tasks_created:
        raise BenchError(
            f"the day created {days[0].tasks_created:,} tasks without the history and "
            f"{days[1].tasks_created:,} with it: the history must owe nothing"
        )
    sides = [
        Side(data=d, first=f, tasks_before_day=b, day=day)
        for d, f, b, day in zip(data, firsts, before, days, strict=True)
    ]
    return HistoryResults(
        parameters={**asdict(options), "json_path": None, "cpus": os.cpu_count()},
        server={"version": version, "where": label},
        disk=disk,
        without=sides[0],
        with_history=sides[1],
        history_seconds=history_seconds,
        code_versions=sorted({run.code for run in (*firsts, *days)}),
    )


def render_history(results: HistoryResults) -> str:
    """The two days side by side, and the goal."""
    p = results.parameters
    lines = [
        f"history benchmark: N={p['duties']:,} duties, {p['mix']} mix, {p['layout']} layout, "
        f"chunk {p['chunk_size']:,}, {p['workers']} dispatcher connection(s); the day's run at "
        f"{(CLOCK + SCHEDULE_INTERVAL).isoformat()} with {p['factor']}x the task history and "
        "without it, each in a fresh database",
        f"PostgreSQL {results.server['version']} ({results.server['where']}), {p['cpus']} CPUs, "
        f"dispatcher code {', '.join(results.code_versions)}; history written in "
        f"{results.history_seconds:.1f} s",
        disk_line(results.disk),
        "",
        f"{'the day':<24} {'tasks before':>13} {'seconds':>9} {'srv CPU':>8} {'tasks':>9} "
        f"{'duties read':>11} {'owing':>9} {'owing none':>10} {'counted':>9}",
    ]
    for label, side in (("without history", results.without),
                        ("with the history", results.with_history)):  # fmt: skip
        cpu = side.day.server_cpu_seconds
        report = side.day.report
        lines.append(
            f"{label:<24} {side.tasks_before_day:>13,} {side.day.seconds:>9.2f} "
            f"{'n/a' if cpu is None else f'{cpu:.2f}':>8} {side.day.tasks_created:>9,} "
            f"{side.day.duties_read:>11,} {report['duties_owing']:>9,} "
            f"{_owing_none(report):>10,} {_counted(report):>9,}"
        )
    cpu_ratio = results.server_cpu_ratio
    met = cpu_ratio is not None and cpu_ratio <= HISTORY_GOAL
    lines += [
        "(duties read: those the day judged, owing something or none, and those it does not "
        "dispatch,",
        " counted from an index and never read: docs/contract.md#account)",
        "",
        f"server CPU: the day with the history / without: "
        f"{'n/a (CPU not read)' if cpu_ratio is None else f'{cpu_ratio:.2f}x'}  "
        f"{GOAL} <= {HISTORY_GOAL:.2f}x  {'met' if met else 'missed'}",
        f"wall time: the day with the history / without: {results.wall_ratio:.2f}x",
    ]
    return "\n".join(lines)


def _owing_none(report: dict[str, Any]) -> int:
    """The duties a report judged that owed nothing: none due, or outside their window."""
    skipped = report["skipped"]
    return int(skipped[SkipReason.NOTHING_DUE] + skipped[SkipReason.OUTSIDE_EFFECTIVE_WINDOW])


def _counted(report: dict[str, Any]) -> int:
    """The duties a report counts as not dispatchable (and of an unknown form), from an index."""
    skipped = report["skipped"]
    unknown_form = report["fault_counts"][FaultReason.UNKNOWN_FORM]
    return int(sum(skipped[reason] for reason in _NOT_DISPATCHED) + unknown_form)


def parse_history_options(argv: Sequence[str]) -> HistoryOptions:
    """The command line as ``HistoryOptions``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.dispatch.history", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument(
        "--duties",
        type=positive_int,
        default=DEFAULT_HISTORY_DUTIES,
        metavar="N",
        help=f"duties (default {DEFAULT_HISTORY_DUTIES:,})",
    )
    parser.add_argument(
        "--factor",
        type=positive_int,
        default=DEFAULT_FACTOR,
        metavar="F",
        help=f"the task history, times the tasks there are (default {DEFAULT_FACTOR})",
    )
    parser.add_argument("--mix", choices=sorted(MIXES), default=CLASSIC.name)
    parser.add_argument("--layout", choices=EVERY_LAYOUT, default=PLAIN)
    parser.add_argument(
        "--chunk-size", type=positive_int, default=settings.DEFAULT_CHUNK_SIZE, metavar="C"
    )
    parser.add_argument(
        "--workers", type=positive_int, default=settings.DEFAULT_WORKERS, metavar="W"
    )
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL") or None)
    args = parser.parse_args(list(argv))
    return HistoryOptions(
        duties=args.duties,
        factor=args.factor,
        mix=args.mix,
        layout=args.layout,
        chunk_size=args.chunk_size,
        workers=args.workers,
        json_path=args.json,
        database_url=args.database_url,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the history pass; print it; write the JSON. The goal never sets the exit status."""
    options = parse_history_options(sys.argv[1:] if argv is None else argv)
    with server(options.database_url) as (server_dsn, label):
        results = run_history(options, server_dsn, label)
    print(render_history(results))
    path = options.result_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results.as_json(), indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\nfigures written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
