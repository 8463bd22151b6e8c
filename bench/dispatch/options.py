"""What one benchmark run measures, as the command line asked, and its defaults."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.dispatch.mix import CLASSIC, MIXES
from dispatch_fn.db.layout import LAYOUTS, PLAIN
from dispatch_fn.run import dispatch

BENCH_DIR: Final = Path(__file__).resolve().parent.parent

DEFAULT_DUTIES: Final = 1_000_000
# The backfill's organisation holds N/20 duties unless told otherwise: 50,000
# at the default N, and the same share of a smaller N.
BACKFILL_SHARE: Final = 20
DEFAULT_NAIVE_SAMPLE: Final = 5_000


@dataclass(frozen=True, slots=True)
class Options:
    """What one benchmark run measures, and where it writes the figures."""

    duties: int = DEFAULT_DUTIES
    backfill_duties: int = DEFAULT_DUTIES // BACKFILL_SHARE
    chunk_size: int = dispatch.DEFAULT_CHUNK_SIZE
    workers: int = dispatch.DEFAULT_WORKERS
    naive_sample: int = DEFAULT_NAIVE_SAMPLE
    mix: str = CLASSIC.name
    # duly_duty and duly_task as the migrations build them, or hash-partitioned
    # by organisation (dispatch_fn.db.layout); the floor's copies follow suit.
    layout: str = PLAIN
    json_path: Path | None = None
    database_url: str | None = None
    # Connect as the Lambda does behind RDS Proxy: no server-side prepared
    # statements (database.connect with DB_USES_RDS_PROXY=true).
    rds_proxy: bool = False
    # Also count round trips from libpq's protocol trace (the smoke test's
    # check that the cheap count is the true one); slows the runs a little.
    trace_round_trips: bool = False

    def result_path(self) -> Path:
        """Where the JSON goes."""
        suffix = "" if self.mix == CLASSIC.name else f"-{self.mix}"
        suffix += "" if self.layout == PLAIN else f"-{self.layout}"
        return self.json_path or BENCH_DIR / "results" / f"dispatch-{self.duties}{suffix}.json"


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
        default=dispatch.DEFAULT_CHUNK_SIZE,
        metavar="C",
        help=f"the dispatcher's page size (default {dispatch.DEFAULT_CHUNK_SIZE:,})",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=dispatch.DEFAULT_WORKERS,
        metavar="W",
        help=f"connections the dispatcher shares pages among (default {dispatch.DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--mix",
        choices=sorted(MIXES),
        default=CLASSIC.name,
        help=f"which duties to generate (default {CLASSIC.name}, the mix of record)",
    )
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default=PLAIN,
        help=f"duly_duty and duly_task {PLAIN} or hash-partitioned by organisation"
        f" (default {PLAIN})",
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
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="where to write the figures (default bench/results/dispatch-N[-MIX].json)",
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
        mix=args.mix,
        layout=args.layout,
        json_path=args.json,
        database_url=args.database_url,
        rds_proxy=args.rds_proxy,
        trace_round_trips=args.trace_round_trips,
    )


def positive_int(raw: str) -> int:
    value = int(raw.replace("_", "").replace(",", ""))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected a positive integer")
    return value
