"""What one benchmark run measures, as the command line asked, and its defaults."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from bench.dispatch.mix import CLASSIC, MIXES
from dispatch_fn import settings
from dispatch_fn.db.layout import LAYOUTS, PLAIN

BENCH_DIR: Final = Path(__file__).resolve().parent.parent

DEFAULT_DUTIES: Final = 1_000_000
# The backfill's organisation holds N/20 duties unless told otherwise: 50,000
# at the default N, and the same share of a smaller N.
BACKFILL_SHARE: Final = 20
DEFAULT_NAIVE_SAMPLE: Final = 5_000
# No-op rounds a pass makes, each the dispatcher's no-op then the floor's: the
# no-op ratios are the median of the rounds' (judging.paired_median), so one
# round that lands on a slow spell of this shared machine does not decide
# them. One round's ratio moves by up to 0.35 between two identical benches
# (docs/performance-history.md#side-by-side-9a1a929).
DEFAULT_NOOP_ROUNDS: Final = 3
# Every mix and every layout, those of record first.
ALL: Final = "all"
EVERY_MIX: Final = (CLASSIC.name, *sorted(set(MIXES) - {CLASSIC.name}))
EVERY_LAYOUT: Final = (PLAIN, *(each for each in LAYOUTS if each != PLAIN))


@dataclass(frozen=True, slots=True)
class Options:
    """What one benchmark run measures, and where it writes the figures."""

    duties: int = DEFAULT_DUTIES
    backfill_duties: int = DEFAULT_DUTIES // BACKFILL_SHARE
    chunk_size: int = settings.DEFAULT_CHUNK_SIZE
    workers: int = settings.DEFAULT_WORKERS
    naive_sample: int = DEFAULT_NAIVE_SAMPLE
    noop_rounds: int = DEFAULT_NOOP_ROUNDS
    # Each pass ends with the week: the daily runs at the seven clocks after
    # the first, each against the floor of its rows (``week``).
    week: bool = True
    # Every mix and layout to measure side by side, each (mix, layout) in a
    # fresh database: the first of each runs the full benchmark, every other
    # combination a comparison pass (benchmark.run_comparison). A layout is
    # duly_duty and duly_task as the migrations build them, or hash-partitioned
    # by organisation (dispatch_fn.db.layout); the floor's copies follow suit.
    mixes: tuple[str, ...] = EVERY_MIX
    layouts: tuple[str, ...] = EVERY_LAYOUT
    json_path: Path | None = None
    database_url: str | None = None
    # Connect as the Lambda does behind RDS Proxy: no server-side prepared
    # statements (database.connect with DB_USES_RDS_PROXY=true).
    rds_proxy: bool = False
    # Also count round trips from libpq's protocol trace (the smoke test's
    # check that the cheap count is the true one); slows the runs a little.
    trace_round_trips: bool = False

    @property
    def mix(self) -> str:
        """The full pass's mix: the first asked for."""
        return self.mixes[0]

    @property
    def layout(self) -> str:
        """The full pass's layout: the first asked for."""
        return self.layouts[0]

    def combinations(self) -> list[Options]:
        """One ``Options`` per (mix, layout) asked for, the full pass's first."""
        return [
            replace(self, mixes=(mix,), layouts=(layout,))
            for mix in self.mixes
            for layout in self.layouts
        ]

    def result_path(self) -> Path:
        """Where the full pass's JSON goes."""
        suffix = "" if self.mix == CLASSIC.name else f"-{self.mix}"
        suffix += "" if self.layout == PLAIN else f"-{self.layout}"
        return self.json_path or BENCH_DIR / "results" / f"dispatch-{self.duties}{suffix}.json"

    def side_by_side_path(self) -> Path:
        """Where the side-by-side table's JSON goes, every combination's figures in it."""
        if self.json_path is not None:
            path = self.json_path
            return path.with_name(f"{path.stem}-side-by-side{path.suffix}")
        return BENCH_DIR / "results" / f"dispatch-{self.duties}-side-by-side.json"


def parse_options(argv: Sequence[str] | None, description: str | None = None) -> Options:
    """The command line as ``Options``."""
    parser = argparse.ArgumentParser(prog="python -m bench.dispatch", description=description)
    parser.add_argument(
        "--duties",
        type=positive_int,
        default=DEFAULT_DUTIES,
        metavar="N",
        help=f"duties to generate (default {DEFAULT_DUTIES:,})",
    )
    parser.add_argument(
        "--backfill-duties",
        type=positive_int,
        default=None,
        metavar="M",
        help=f"duties in the backfilled organisation (default N/{BACKFILL_SHARE})",
    )
    parser.add_argument(
        "--chunk-size",
        type=positive_int,
        default=settings.DEFAULT_CHUNK_SIZE,
        metavar="C",
        help=f"the dispatcher's page size (default {settings.DEFAULT_CHUNK_SIZE:,})",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=settings.DEFAULT_WORKERS,
        metavar="W",
        help=f"connections the dispatcher shares pages among (default {settings.DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--mix",
        type=names_of(EVERY_MIX),
        default=EVERY_MIX,
        metavar="MIX[,MIX]",
        help=f"which duties to generate: {', '.join(EVERY_MIX)}, a comma-separated list of "
        f"them, or {ALL} (the default); the first runs the full bench, the others with "
        f"each layout a comparison pass ({CLASSIC.name} is the mix of record)",
    )
    parser.add_argument(
        "--layout",
        type=names_of(EVERY_LAYOUT),
        default=EVERY_LAYOUT,
        metavar="LAYOUT[,LAYOUT]",
        help=f"duly_duty and duly_task {PLAIN} or hash-partitioned by organisation: a "
        f"comma-separated list, or {ALL} (the default; {PLAIN} is the layout of record)",
    )
    parser.add_argument(
        "--naive-sample",
        type=positive_int,
        default=DEFAULT_NAIVE_SAMPLE,
        metavar="S",
        help="advanced duties whose tasks the naive path inserts one by one, each duty then "
        f"updated (default {DEFAULT_NAIVE_SAMPLE:,})",
    )
    parser.add_argument(
        "--noop-rounds",
        type=positive_int,
        default=DEFAULT_NOOP_ROUNDS,
        metavar="K",
        help="no-op rounds per pass, the dispatcher's then the floor's, whose median ratio is "
        f"judged (default {DEFAULT_NOOP_ROUNDS})",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="where to write the full pass's figures (default "
        "bench/results/dispatch-N[-MIX][-LAYOUT].json); the side-by-side table's go beside "
        "it, in PATH's name with -side-by-side",
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL") or None,
        metavar="DSN",
        help="server to create the benchmark's databases on (default: $DATABASE_URL, "
        "else an embedded PostgreSQL under /tmp)",
    )
    parser.add_argument(
        "--rds-proxy",
        action="store_true",
        help="run the dispatcher without prepared statements, as behind RDS Proxy",
    )
    parser.add_argument(
        "--no-week",
        dest="week",
        action="store_false",
        help="leave out the week of daily runs after the first run, each against its floor",
    )
    parser.add_argument("--trace-round-trips", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return Options(
        duties=args.duties,
        backfill_duties=min(
            args.backfill_duties or max(1, args.duties // BACKFILL_SHARE), args.duties
        ),
        chunk_size=args.chunk_size,
        workers=args.workers,
        naive_sample=args.naive_sample,
        noop_rounds=args.noop_rounds,
        week=args.week,
        mixes=args.mix,
        layouts=args.layout,
        json_path=args.json,
        database_url=args.database_url,
        rds_proxy=args.rds_proxy,
        trace_round_trips=args.trace_round_trips,
    )


def names_of(known: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """An argparse type: a comma-separated list of ``known`` names, or every one of them."""

    def names(raw: str) -> tuple[str, ...]:
        if raw.strip() == ALL:
            return tuple(known)
        asked = [each.strip() for each in raw.split(",") if each.strip()]
        unknown = [each for each in asked if each not in known]
        if unknown or not asked:
            raise argparse.ArgumentTypeError(
                f"{raw!r}: expected {', '.join(known)}, a comma-separated list of them, or {ALL}"
            )
        return tuple(dict.fromkeys(asked))  # in the order asked, each once

    return names


def positive_int(raw: str) -> int:
    value = int(raw.replace("_", "").replace(",", ""))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected a positive integer")
    return value
