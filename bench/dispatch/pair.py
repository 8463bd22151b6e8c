"""Two checkouts' no-op runs, alternated on one database: a change's before and after.

Run: .venv/bin/python -m bench.dispatch.pair --against DIR [--duties N]
         [--mix classic|compliance] [--layout plain|partitioned] [--rounds K]
         [--chunk-size C] [--workers W] [--database-url DSN, default $DATABASE_URL]

``DIR`` is another checkout of this repository, such as an earlier commit's
worktree (``git worktree add /tmp/before COMMIT``). It generates N duties in
a fresh database, makes the first scheduled run with this checkout, vacuums
as autovacuum would, then makes K rounds of the no-op re-run, each round
both checkouts' back to back (this one first in odd rounds, DIR's first in
even ones, so neither always follows the other), every run recorded in the
ledger as the deployed function records it. It prints each round, then the
median over the rounds of each round's ratio, this checkout's over DIR's:
wall time, the whole server's CPU (``readings``), and the client's (the
dispatching process's own CPU around the run; the whole child process's,
start-up included, where DIR's child does not read its own). Pairing keeps a
ratio meaningful while this shared machine's speed drifts; the full bench
(``python -m bench.dispatch``) measures one checkout against PostgreSQL's
floor instead.

DIR runs on this checkout's virtual environment and schema (its migrations
are not applied), and its child must know recorded runs (``9f3de54`` or
later). No disk check: N is meant to stay small.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.dispatch.child import ChildSpec, code_fingerprint
from bench.dispatch.data import CLOCK, generate
from bench.dispatch.dispatcher import ChildRun, run_child
from bench.dispatch.mix import CLASSIC, MIXES
from bench.dispatch.options import BACKFILL_SHARE, positive_int
from bench.dispatch.server import DISPATCH_TABLES, BenchError, fresh_database, server, vacuum
from dispatch_fn import settings
from dispatch_fn.db.layout import LAYOUTS, PLAIN

DEFAULT_PAIR_DUTIES = 200_000
DEFAULT_ROUNDS = 6


@dataclass(frozen=True, slots=True)
class PairOptions:
    """What one pairing measures."""

    against: Path
    duties: int = DEFAULT_PAIR_DUTIES
    mix: str = CLASSIC.name
    layout: str = PLAIN
    rounds: int = DEFAULT_ROUNDS
    chunk_size: int = settings.DEFAULT_CHUNK_SIZE
    workers: int = settings.DEFAULT_WORKERS
    database_url: str | None = None


@dataclass(frozen=True, slots=True)
class Round:
    """One round: this checkout's no-op, then the other's."""

    this: ChildRun
    other: ChildRun


def run_pair(options: PairOptions, server_dsn: str) -> list[Round]:
    """Generate, run and vacuum with this checkout, then alternate the two checkouts' no-ops."""
    rounds: list[Round] = []
    with (
        fresh_database(server_dsn, "pair", options.layout) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        generate(conn, options.duties, max(1, options.duties // BACKFILL_SHARE), MIXES[options.mix])
        spec = ChildSpec(
            dsn=dsn,
            now=CLOCK.isoformat(),
            chunk_size=options.chunk_size,
            workers=options.workers,
            recorded=True,
        )
        run_child(conn, spec)
        vacuum(conn, DISPATCH_TABLES)
        for number in range(1, options.rounds + 1):
            if number % 2:
                this = run_child(conn, spec)
                other = run_child(conn, spec, root=options.against)
            else:
                other = run_child(conn, spec, root=options.against)
                this = run_child(conn, spec)
            pair = Round(this, other)
            for each in (pair.this, pair.other):
                if each.written.total:
                    raise BenchError(f"a no-op wrote {each.written.total} rows, expected none")
            rounds.append(pair)
            print(render_round(number, pair), flush=True)
    return rounds


def ratios(rounds: Sequence[Round]) -> dict[str, float]:
    """Medians over the rounds of each round's ratio, this checkout's over the other's.

    NaN where no round has both figures: a server not on this machine has
    no CPU to read, an older child no CPU of its own.
    """
    both_read = all(r.this.client_cpu_seconds is not None for r in rounds) and all(
        r.other.client_cpu_seconds is not None for r in rounds
    )
    client = "client_cpu_seconds" if both_read else "process_cpu_seconds"
    return {
        "wall": _median_ratio(rounds, "seconds"),
        "server_cpu": _median_ratio(rounds, "server_cpu_seconds"),
        "client_cpu": _median_ratio(rounds, client),
    }


def _median_ratio(rounds: Sequence[Round], figure: str) -> float:
    values = [_ratio(getattr(r.this, figure), getattr(r.other, figure)) for r in rounds]
    read = [value for value in values if not math.isnan(value)]
    return statistics.median(read) if read else float("nan")


def _ratio(this: float | None, other: float | None) -> float:
    if this is None or other is None or other <= 0:
        return float("nan")
    return this / other


def render_round(number: int, pair: Round) -> str:
    """One round's figures, this checkout's then the other's."""
    return f"round {number}: " + "; ".join(
        f"{name} wall {run.seconds:.2f} s, server CPU {_seconds(run.server_cpu_seconds)},"
        f" client CPU {_seconds(run.client_cpu_seconds)} (process {run.process_cpu_seconds:.2f} s)"
        for name, run in (("this", pair.this), ("other", pair.other))
    )


def _seconds(value: float | None) -> str:
    return "unread" if value is None else f"{value:.2f} s"


def render_ratios(options: PairOptions, rounds: Sequence[Round]) -> str:
    """The medians of the rounds' ratios, and a warning where the code is not what was meant."""
    medians = ratios(rounds)
    this = sorted({r.this.code for r in rounds})
    other = sorted({r.other.code for r in rounds})
    lines = [
        f"no-op, this checkout ({', '.join(this)}) / {options.against} ({', '.join(other)}),"
        f" median of {len(rounds)} alternated rounds' ratios: wall {_times(medians['wall'])},"
        f" server CPU {_times(medians['server_cpu'])}, client CPU {_times(medians['client_cpu'])}"
    ]
    if len(this) > 1 or len(other) > 1:
        lines.append("warning: a checkout's code changed between rounds; the ratios mix versions")
    if set(this) & set(other):
        lines.append("warning: both checkouts run the same dispatcher code")
    return "\n".join(lines)


def _times(value: float) -> str:
    return "unread" if math.isnan(value) else f"{value:.3f}x"


def parse_pair_options(argv: Sequence[str]) -> PairOptions:
    """The command line as ``PairOptions``."""
    parser = argparse.ArgumentParser(prog="python -m bench.dispatch.pair")
    parser.add_argument("--against", type=Path, required=True, metavar="DIR")
    parser.add_argument("--duties", type=positive_int, default=DEFAULT_PAIR_DUTIES)
    parser.add_argument("--mix", choices=sorted(MIXES), default=CLASSIC.name)
    parser.add_argument("--layout", choices=LAYOUTS, default=PLAIN)
    parser.add_argument("--rounds", type=positive_int, default=DEFAULT_ROUNDS)
    parser.add_argument("--chunk-size", type=positive_int, default=settings.DEFAULT_CHUNK_SIZE)
    parser.add_argument("--workers", type=positive_int, default=settings.DEFAULT_WORKERS)
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL") or None, metavar="DSN"
    )
    args = parser.parse_args(list(argv))
    against = args.against.resolve()
    if not (against / "bench" / "dispatch" / "child.py").is_file():
        parser.error(f"--against {against}: not a checkout of this repository (no bench/dispatch)")
    return PairOptions(**{**vars(args), "against": against})


def main(argv: Sequence[str] | None = None) -> int:
    """Alternate the two checkouts' no-ops; print the rounds and the medians."""
    options = parse_pair_options(sys.argv[1:] if argv is None else argv)
    print(
        f"pair: N={options.duties:,} duties, {options.mix} mix, {options.layout} layout,"
        f" chunk {options.chunk_size:,}, {options.workers} connection(s), this checkout's"
        f" code {code_fingerprint()}",
        flush=True,
    )
    with server(options.database_url) as (server_dsn, _label):
        rounds = run_pair(options, server_dsn)
    print(render_ratios(options, rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
