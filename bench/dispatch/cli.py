"""``python -m bench.dispatch``: run the benchmark, print the table, write the JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import bench.dispatch
from bench.dispatch.benchmark import run_benchmark
from bench.dispatch.options import parse_options
from bench.dispatch.render import render
from bench.dispatch.server import server


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table; write the JSON. Exit 1 if a bar is missed."""
    doc = bench.dispatch.__doc__
    options = parse_options(
        list(sys.argv[1:] if argv is None else argv), doc.split("\n\n")[0] if doc else None
    )
    with server(options.database_url) as (server_dsn, label):
        results = run_benchmark(options, server_dsn, label)
    print(render(results))
    path = options.result_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results.as_json(), indent=2) + "\n", encoding="utf-8")
    print(f"\nfigures written to {path}")
    return 0 if all(v.passed for v in results.verdicts if v.judged) else 1
