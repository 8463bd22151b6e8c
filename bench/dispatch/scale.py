"""The first run and the no-op at a large N, as chains of Lambda invocations, beside N/10.

Run: .venv/bin/python -m bench.dispatch.scale [--duties N] [--chunk-size C]
         [--workers W] [--mix classic|compliance] [--invocation-s S]
         [--reserve-ms R] [--json PATH] [--database-url DSN] [--rds-proxy]

``make bench-10m`` runs it at N = 10,000,000. It checks the disk first (a
probe on a few thousand duties, ``disk``), generates N duties server-side in a
fresh database, then makes the first scheduled run and, after the vacuum
autovacuum would make, the no-op re-run. Each is a chain of simulated
invocations of ``--invocation-s`` (the function's 900 s timeout): a link stops
taking pages when less than the reserve is left and hands ``resume_after`` on
to the next, as the deployed function does (``chain``). The same again at N/10
in a fresh database, so that only N differs. The bar: the first run within
half an invocation, the peak RSS flat from N/10 to N, round trips that grow
with N / page size. The floor, the backfill and the naive path are the full
bench's (``python -m bench.dispatch``), left out here to keep a large N short.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.dispatch.chain import DEFAULT_RESERVE_MS, ChainRun, run_chain
from bench.dispatch.child import ChildSpec
from bench.dispatch.data import CLOCK, DataSummary, generate
from bench.dispatch.disk import SCALE_BENCH, DiskCheck, check_disk
from bench.dispatch.judging import (
    LAMBDA_SHARE_MAX,
    LAMBDA_TIMEOUT_S,
    ROUND_TRIPS_PER_PAGE_MAX,
    ROUND_TRIPS_PER_RUN_MAX,
    RSS_GROWTH_BAR,
    rss_flat,
    rss_growth,
)
from bench.dispatch.mix import CLASSIC, MIXES
from bench.dispatch.options import BENCH_DIR, positive_int
from bench.dispatch.render import disk_line
from bench.dispatch.server import DISPATCH_TABLES, fresh_database, scalar, server, vacuum
from dispatch_fn.run import dispatch

DEFAULT_SCALE_DUTIES = 10_000_000


@dataclass(frozen=True, slots=True)
class ScaleOptions:
    """What one scale run measures."""

    duties: int = DEFAULT_SCALE_DUTIES
    chunk_size: int = dispatch.DEFAULT_CHUNK_SIZE
    workers: int = dispatch.DEFAULT_WORKERS
    mix: str = CLASSIC.name
    invocation_ms: int = int(LAMBDA_TIMEOUT_S * 1000)
    reserve_ms: int = DEFAULT_RESERVE_MS
    rds_proxy: bool = False
    json_path: Path | None = None
    database_url: str | None = None
    # Sleep before each page: lets a test make a tiny N outlast a short invocation.
    pause_s: float = 0.0

    def result_path(self) -> Path:
        """Where the JSON goes."""
        suffix = "" if self.mix == CLASSIC.name else f"-{self.mix}"
        return self.json_path or BENCH_DIR / "results" / f"scale-{self.duties}{suffix}.json"


@dataclass(frozen=True, slots=True)
class AtN:
    """One N's data, first run and no-op."""

    data: DataSummary
    first: ChainRun
    noop: ChainRun


@dataclass(frozen=True, slots=True)
class ScaleVerdict:
    """One line of the scale bar."""

    name: str
    shown: str
    bar: str
    passed: bool


@dataclass(slots=True)
class ScaleResults:
    """Every figure of one scale run."""

    parameters: dict[str, Any]
    server: dict[str, Any]
    disk: DiskCheck
    at_n: AtN
    at_tenth: AtN
    verdicts: list[ScaleVerdict] = field(default_factory=list)

    @property
    def code_versions(self) -> list[str]:
        """Fingerprints of the dispatcher code every link used; more than one is a mixed run."""
        chains = (self.at_n.first, self.at_n.noop, self.at_tenth.first, self.at_tenth.noop)
        return sorted({link.code for chain in chains for link in chain.links})

    def as_json(self) -> dict[str, Any]:
        """Everything, JSON-serialisable (each chain with its links)."""
        return {**asdict(self), "code_versions": self.code_versions}


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
    return AtN(data, first, noop)


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
    return verdicts


def render_scale(results: ScaleResults) -> str:
    """The figures and the bar as a plain-text table."""
    p = results.parameters
    lines = [
        f"scale benchmark: N={results.at_n.data.duties:,} duties "
        f"({results.at_n.data.dispatchable:,} dispatchable), chunk {p['chunk_size']:,}, "
        f"{p['workers']} dispatcher connection(s), invocations of {p['invocation_ms'] / 1000:g} s "
        f"(reserve {p['reserve_ms'] / 1000:g} s), {p['mix']} mix, clock {CLOCK.isoformat()}",
        f"PostgreSQL {results.server['version']} ({results.server['where']}), {p['cpus']} CPUs, "
        f"dispatcher code {', '.join(results.code_versions)}",
        disk_line(results.disk),
        "",
        f"{'measurement':<34} {'seconds':>9} {'srv CPU':>8} {'tasks':>11} {'advanced':>10} "
        f"{'pages':>6} {'trips':>7} {'RSS MiB':>8} {'links':>5}",
    ]
    for label, at in (("N", results.at_n), ("N/10", results.at_tenth)):
        lines.append(f"{label} = {at.data.duties:,} duties, generated in {at.data.seconds:.1f} s")
        for name, chain in (("first scheduled run", at.first), ("no-op, tables vacuumed", at.noop)):
            cpu = chain.server_cpu_seconds
            lines.append(
                f"  {name:<32} {chain.seconds:>9.2f} {'n/a' if cpu is None else f'{cpu:.2f}':>8} "
                f"{chain.tasks_created:>11,} {chain.duties_advanced:>10,} {chain.pages:>6,} "
                f"{chain.round_trips:>7,} {chain.rss_peak_mib:>8.1f} {len(chain.links):>5}"
            )
            if len(chain.links) > 1:
                lines += [
                    f"    link {i + 1}: {link.seconds:8.2f} s, {link.pages:,} pages, "
                    f"{link.tasks_created:,} tasks, resume_after "
                    f"{link.report.get('resume_after')!r}, stopped by "
                    f"{link.report.get('stopped_by')!r}"
                    for i, link in enumerate(chain.links)
                ]
    lines += ["", f"{'bar':<40} {'value':>40}  {'limit':<30} verdict"]
    lines += [
        f"{v.name:<40} {v.shown:>40}  {v.bar:<30} {'PASS' if v.passed else 'FAIL'}"
        for v in results.verdicts
    ]
    return "\n".join(lines)


def parse_scale_options(argv: Sequence[str]) -> ScaleOptions:
    """The command line as ``ScaleOptions``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.dispatch.scale", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--duties", type=positive_int, default=DEFAULT_SCALE_DUTIES, metavar="N")
    parser.add_argument(
        "--chunk-size", type=positive_int, default=dispatch.DEFAULT_CHUNK_SIZE, metavar="C"
    )
    parser.add_argument(
        "--workers", type=positive_int, default=dispatch.DEFAULT_WORKERS, metavar="W"
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
    return 0 if all(v.passed for v in results.verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
