"""The first run, the no-op and the week at a large N, as chains of Lambda invocations, beside N/10.

Run: .venv/bin/python -m bench.dispatch.scale [--duties N] [--chunk-size C]
         [--workers W] [--mix classic|compliance] [--invocation-s S]
         [--reserve-ms R] [--json PATH] [--database-url DSN] [--rds-proxy]
         [--no-week]

``make bench-10m`` runs it at N = 10,000,000. It checks the disk first (a
probe on a few thousand duties, ``disk``), generates N duties server-side in a
fresh database, then makes the first scheduled run and, after the vacuum
autovacuum would make, the no-op re-run. Each is a chain of simulated
invocations of ``--invocation-s`` (the function's 900 s timeout): a link stops
taking pages when less than the reserve is left and hands ``resume_after`` on
to the next, as the deployed function does (``chain``). The same again at N/10
in a fresh database, so that only N differs. The bar: the first run within
half an invocation, the peak RSS flat from N/10 to N, round trips that grow
with N / page size. Then the week (``week``): the daily runs at the seven
clocks after the first, each a chain after the vacuum, each against the floor
of its own rows in copies of the tables as they stood. Printed beside the bar,
never judged: issue 37's goals, each day's server CPU and wall time against
its floor's, the no-op's share of the first run's server CPU, and the week's
server CPU per task created at N against N/10's. The first run's floor, the
backfill and the naive path are the full bench's (``python -m
bench.dispatch``), left out here to keep a large N short.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import psycopg

from bench.dispatch.chain import DEFAULT_RESERVE_MS, run_chain
from bench.dispatch.child import ChildSpec
from bench.dispatch.data import CLOCK, generate
from bench.dispatch.disk import SCALE_BENCH, check_disk
from bench.dispatch.judging import (
    GOAL,
    LAMBDA_SHARE_MAX,
    LAMBDA_TIMEOUT_S,
    NOOP_VS_FIRST_CPU_GOAL,
    ROUND_TRIPS_PER_PAGE_MAX,
    ROUND_TRIPS_PER_RUN_MAX,
    RSS_GROWTH_BAR,
    SCALE_CPU_PER_TASK_GOAL,
    WEEK_SERVER_CPU_GOAL,
    WEEK_WALL_GOAL,
    rss_flat,
    rss_growth,
)
from bench.dispatch.mix import CLASSIC, MIXES
from bench.dispatch.options import positive_int
from bench.dispatch.scale_render import render_scale
from bench.dispatch.scale_results import (
    DEFAULT_SCALE_DUTIES,
    AtN,
    ScaleOptions,
    ScaleResults,
    ScaleVerdict,
)
from bench.dispatch.server import DISPATCH_TABLES, fresh_database, scalar, server, vacuum
from bench.dispatch.week import run_week
from dispatch_fn import settings


def measure_at(server_dsn: str, duties: int, options: ScaleOptions) -> AtN:
    """Generate ``duties`` in a fresh database; the first run and the no-op, as chains."""
    mix = MIXES[options.mix]
    with fresh_database(server_dsn, "scale") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        data = generate(conn, duties, max(1, duties // 20), mix)
        spec = ChildSpec(
            dsn=dsn,
            now=CLOCK.isoformat(),
            chunk_size=options.chunk_size,
            workers=options.workers,
            prepare=not options.rds_proxy,
            pause_s=options.pause_s,
        )
        first = run_chain(conn, spec, options.invocation_ms, options.reserve_ms)
        vacuum(conn, DISPATCH_TABLES)
        noop = run_chain(conn, spec, options.invocation_ms, options.reserve_ms)
        week = (
            run_week(
                conn,
                spec,
                run=lambda c, s: run_chain(c, s, options.invocation_ms, options.reserve_ms),
            )
            if options.week
            else None
        )
    return AtN(data, first, noop, week)


def run_scale(options: ScaleOptions, server_dsn: str, server_label: str = "") -> ScaleResults:
    """Check the disk, measure at N and at N/10, and judge the figures."""
    mix = MIXES[options.mix]
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        version = str(scalar(admin, "SHOW server_version"))
    disk = check_disk(
        server_dsn,
        mix,
        duties=options.duties,
        backfill_duties=0,
        tables=SCALE_BENCH,
        chunk_size=options.chunk_size,
    )
    at_n = measure_at(server_dsn, options.duties, options)
    at_tenth = measure_at(server_dsn, max(1, options.duties // 10), options)
    results = ScaleResults(
        parameters={**asdict(options), "json_path": None, "cpus": os.cpu_count()},
        server={"version": version, "where": server_label},
        disk=disk,
        at_n=at_n,
        at_tenth=at_tenth,
    )
    results.verdicts = judge_scale(results, options)
    return results


def judge_scale(results: ScaleResults, options: ScaleOptions) -> list[ScaleVerdict]:
    """The scale bar: within half an invocation, flat RSS, round trips by pages."""
    first, tenth = results.at_n.first, results.at_tenth.first
    budget = LAMBDA_TIMEOUT_S * LAMBDA_SHARE_MAX
    growth = rss_growth(first.rss_peak_mib, tenth.rss_peak_mib)
    verdicts = [
        ScaleVerdict(
            "first run, wall time",
            f"{first.seconds:.1f} s in {len(first.links)} invocation(s)",
            f"<= {budget:g} s",
            first.seconds <= budget,
        ),
        ScaleVerdict(
            "first run completed by the chain",
            f"{len(first.links)} link(s), complete: {first.complete}",
            "complete",
            first.complete,
        ),
        ScaleVerdict(
            "peak RSS growth, N/10 to N",
            f"{first.rss_peak_mib:.1f} vs {tenth.rss_peak_mib:.1f} MiB ({growth:+.1%})",
            RSS_GROWTH_BAR,
            rss_flat(growth),
        ),
    ]
    for label, at in (("first run", results.at_n.first), ("no-op", results.at_n.noop)):
        pages_bound = math.ceil(results.at_n.data.duties / options.chunk_size)
        links = len(at.links)
        trips_max = ROUND_TRIPS_PER_PAGE_MAX * pages_bound + ROUND_TRIPS_PER_RUN_MAX * links
        verdicts.append(
            ScaleVerdict(
                f"{label}: round trips vs N / chunk size",
                f"{at.round_trips:,} vs {pages_bound:,} pages",
                f"<= {ROUND_TRIPS_PER_PAGE_MAX}/page + {ROUND_TRIPS_PER_RUN_MAX}/link"
                f" = {trips_max:,}",
                at.round_trips <= trips_max,
            )
        )
    noop_written = results.at_n.noop.tasks_created + results.at_n.noop.duties_advanced
    verdicts.append(
        ScaleVerdict("no-op tasks created + duties advanced", f"{noop_written:,}", "= 0",
                     noop_written == 0)
    )  # fmt: skip
    return verdicts + scale_week_goals(results.at_n, results.at_tenth)


def scale_week_goals(at_n: AtN, at_tenth: AtN) -> list[ScaleVerdict]:
    """Issue 37's goals for the week at N, printed beside the bar, never judged.

    Each day's server CPU and wall time against its floor's (the worst day
    shown), the no-op's share of the first run's server CPU, and the week's
    server CPU per task created at N against N/10's: a day costs about what
    it writes, whatever the tables hold.
    """
    verdicts: list[ScaleVerdict] = []
    first_cpu, noop_cpu = at_n.first.server_cpu_seconds, at_n.noop.server_cpu_seconds
    if first_cpu and noop_cpu is not None:
        share = noop_cpu / first_cpu
        verdicts.append(
            ScaleVerdict("server CPU: no-op / first run", f"{share:.1%}",
                         f"{GOAL} <= {NOOP_VS_FIRST_CPU_GOAL:.0%}",
                         share <= NOOP_VS_FIRST_CPU_GOAL, judged=False)
        )  # fmt: skip
    week, tenth_week = at_n.week, at_tenth.week
    if week is None or tenth_week is None:
        return verdicts
    for name, each, goal in (
        ("server CPU", [day.server_cpu_ratio for day in week.days], WEEK_SERVER_CPU_GOAL),
        ("wall time", [day.wall_ratio for day in week.days], WEEK_WALL_GOAL),
    ):
        worst = max(each)
        verdicts.append(
            ScaleVerdict(
                f"the week at N: each day's {name} / floor",
                "n/a (CPU not read)" if math.isnan(worst) else
                f"worst {worst:.2f}x (days {', '.join(f'{r:.2f}' for r in each)})",
                f"{GOAL} <= {goal:.2f}x",
                worst <= goal,
                judged=False,
            )
        )  # fmt: skip
    per_task = week.server_cpu_ms_per_task / tenth_week.server_cpu_ms_per_task
    verdicts.append(
        ScaleVerdict(
            "the week: server CPU per task, N / N/10",
            f"{per_task:.2f}x ({week.server_cpu_ms_per_task:.3f} vs "
            f"{tenth_week.server_cpu_ms_per_task:.3f} ms a task)",
            f"{GOAL} <= {SCALE_CPU_PER_TASK_GOAL:.2f}x",
            per_task <= SCALE_CPU_PER_TASK_GOAL,
            judged=False,
        )
    )
    return verdicts


def parse_scale_options(argv: Sequence[str]) -> ScaleOptions:
    """The command line as ``ScaleOptions``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.dispatch.scale", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--duties", type=positive_int, default=DEFAULT_SCALE_DUTIES, metavar="N")
    parser.add_argument(
        "--chunk-size", type=positive_int, default=settings.DEFAULT_CHUNK_SIZE, metavar="C"
    )
    parser.add_argument(
        "--workers", type=positive_int, default=settings.DEFAULT_WORKERS, metavar="W"
    )
    parser.add_argument("--mix", choices=sorted(MIXES), default=CLASSIC.name)
    parser.add_argument(
        "--invocation-s",
        type=positive_int,
        default=int(LAMBDA_TIMEOUT_S),
        metavar="S",
        help="the simulated invocation's length (default the function's timeout, 900 s)",
    )
    parser.add_argument(
        "--reserve-ms",
        type=int,
        default=DEFAULT_RESERVE_MS,
        metavar="R",
        help="time a link keeps for its report and hand-off (DISPATCH_RESERVE_MS)",
    )
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL") or None)
    parser.add_argument("--rds-proxy", action="store_true")
    parser.add_argument(
        "--no-week", dest="week", action="store_false", help="leave out the week of daily runs"
    )
    args = parser.parse_args(list(argv))
    return ScaleOptions(
        duties=args.duties,
        chunk_size=args.chunk_size,
        workers=args.workers,
        mix=args.mix,
        invocation_ms=args.invocation_s * 1000,
        reserve_ms=args.reserve_ms,
        rds_proxy=args.rds_proxy,
        json_path=args.json,
        database_url=args.database_url,
        week=args.week,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scale bench; print the table; write the JSON. Exit 1 if a bar is missed."""
    options = parse_scale_options(sys.argv[1:] if argv is None else argv)
    with server(options.database_url) as (server_dsn, label):
        results = run_scale(options, server_dsn, label)
    print(render_scale(results))
    path = options.result_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results.as_json(), indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\nfigures written to {path}")
    return 0 if all(v.passed for v in results.verdicts if v.judged) else 1


if __name__ == "__main__":
    sys.exit(main())
