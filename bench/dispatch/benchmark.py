"""Every phase of the benchmark in order: generate, dispatch, floor, backfill, naive, N/10."""

from __future__ import annotations

import dataclasses
import os

import psycopg

from bench.dispatch.child import ChildSpec
from bench.dispatch.data import BACKFILL_FROM, BACKFILL_TO, CLOCK, generate
from bench.dispatch.disk import FULL_BENCH, check_disk
from bench.dispatch.dispatcher import run_child
from bench.dispatch.floor import prepare_floor_tables, run_floor, stage_floor
from bench.dispatch.judging import judge
from bench.dispatch.mix import BIG_ORG, MIXES
from bench.dispatch.naive import run_naive
from bench.dispatch.options import Options
from bench.dispatch.results import Results
from bench.dispatch.server import (
    DISPATCH_TABLES,
    FLOOR_TABLES,
    fresh_database,
    scalar,
    settle,
    vacuum,
)


def run_benchmark(options: Options, server_dsn: str, server_label: str = "") -> Results:
    """Generate, measure every path, and judge the figures against the bar."""
    mix = MIXES[options.mix]
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        version = str(scalar(admin, "SHOW server_version"))
    disk = check_disk(
        server_dsn,
        mix,
        duties=options.duties,
        backfill_duties=options.backfill_duties,
        tables=FULL_BENCH,
        chunk_size=options.chunk_size,
    )
    with (
        fresh_database(server_dsn, "n", options.layout) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        data = generate(conn, options.duties, options.backfill_duties, mix)
        prepare_floor_tables(conn)
        settled = settle(conn)
        scheduled = ChildSpec(
            dsn=dsn,
            now=CLOCK.isoformat(),
            chunk_size=options.chunk_size,
            workers=options.workers,
            prepare=not options.rds_proxy,
            trace=options.trace_round_trips,
        )
        first = run_child(conn, scheduled)
        retry = run_child(conn, scheduled)
        vacuum(conn, DISPATCH_TABLES)
        noop = run_child(conn, scheduled)
        staged = stage_floor(conn)
        floor = run_floor(conn)
        floor_retry = run_floor(conn)
        vacuum(conn, FLOOR_TABLES)
        floor_noop = run_floor(conn)
        backfill_spec = dataclasses.replace(
            scheduled,
            window=(BACKFILL_FROM.isoformat(), BACKFILL_TO.isoformat()),
            organization_id=BIG_ORG,
        )
        backfill = run_child(conn, backfill_spec)
        conn.execute("ANALYZE duly_task")
        backfill_again = run_child(conn, backfill_spec)
        naive = run_naive(conn, options.naive_sample, staged, floor.advanced)
    # N/10 in a fresh database generated the same way: the same distribution at a
    # tenth of the size, the same first run, so only N differs.
    tenth = max(1, options.duties // 10)
    with (
        fresh_database(server_dsn, "tenth", options.layout) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        tenth_data = generate(
            conn, tenth, max(1, options.backfill_duties * tenth // options.duties), mix
        )
        tenth_first = run_child(conn, dataclasses.replace(scheduled, dsn=dsn))
    results = Results(
        parameters={
            "duties": options.duties,
            "backfill_duties": options.backfill_duties,
            "chunk_size": options.chunk_size,
            "workers": options.workers,
            "naive_sample": options.naive_sample,
            "mix": mix.name,
            "layout": options.layout,
            "clock": CLOCK.isoformat(),
            "backfill_window": [BACKFILL_FROM.isoformat(), BACKFILL_TO.isoformat()],
            "backfill_organization": BIG_ORG,
            "rds_proxy": options.rds_proxy,
            "cpus": os.cpu_count(),
        },
        server={"version": version, "where": server_label},
        data=data,
        first=first,
        retry=retry,
        noop=noop,
        staged_rows=staged,
        floor=floor,
        floor_retry=floor_retry,
        floor_noop=floor_noop,
        backfill=backfill,
        backfill_again=backfill_again,
        naive=naive,
        tenth_data=tenth_data,
        tenth_first=tenth_first,
        settled=settled,
        disk=disk,
    )
    results.verdicts = judge(results, options.duties, options.chunk_size)
    return results
