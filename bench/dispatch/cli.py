"""``python -m bench.dispatch``: run every pass, print the tables, write the JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bench.dispatch
from bench.dispatch.benchmark import run_side_by_side
from bench.dispatch.options import parse_options
from bench.dispatch.render import render, render_side_by_side
from bench.dispatch.server import server


def main(argv: Sequence[str] | None = None) -> int:
    """Run every pass; print the tables; write the JSON. Exit 1 if a judged line fails."""
    doc = bench.dispatch.__doc__
    options = parse_options(
        list(sys.argv[1:] if argv is None else argv), doc.split("\n\n")[0] if doc else None
    )
    with server(options.database_url) as (server_dsn, label):
        side = run_side_by_side(
            options,
            server_dsn,
            label,
            on_full=lambda full: _publish(render(full), full.as_json(), options.result_path()),
        )
    if side.compared:
        print()
        _publish(render_side_by_side(side), side.as_json(), options.side_by_side_path())
    return 0 if side.passed else 1


def _publish(table: str, figures: dict[str, Any], path: Path) -> None:
    print(table, flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"\nfigures written to {path}", flush=True)
