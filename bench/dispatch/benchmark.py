"""The benchmark's passes: generate, dispatch, floor; the full pass also backfill, naive, N/10."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from bench.dispatch.child import ChildSpec
from bench.dispatch.data import BACKFILL_FROM, BACKFILL_TO, CLOCK, generate
from bench.dispatch.disk import (
    COMPARISON_BENCH,
    FULL_BENCH,
    PROBE_DUTIES,
    DiskCheck,
    check_disk,
    probe,
)
from bench.dispatch.dispatcher import run_child
from bench.dispatch.floor import prepare_floor_tables, run_floor, stage_floor
from bench.dispatch.judging import judge, judge_pass
from bench.dispatch.mix import BIG_ORG, MIXES
from bench.dispatch.naive import run_naive
from bench.dispatch.options import Options
from bench.dispatch.results import NoopRound, Pass, Results, SideBySide, phases_of
from bench.dispatch.server import (
    DISPATCH_TABLES,
    FLOOR_TABLES,
    Conn,
    fresh_database,
    scalar,
    settle,
    vacuum,
)
from bench.dispatch.week import run_week


def run_side_by_side(
    options: Options,
    server_dsn: str,
    server_label: str = "",
    on_full: Callable[[Results], None] | None = None,
) -> SideBySide:
    """Every (mix, layout) asked for, on one server: the first in full, then each other compared.

    The disk is checked for all of them before anything is generated.
    ``on_full`` is handed the full pass's figures as soon as they are in: the
    comparison passes take a while yet.
    """
    record, *others = options.combinations()
    disks = check_disks([record, *others], server_dsn)
    full = run_benchmark(record, server_dsn, server_label, disks[0])
    if on_full is not None:
        on_full(full)
    compared = tuple(
        run_comparison(each, server_dsn, disk) for each, disk in zip(others, disks[1:], strict=True)
    )
    return SideBySide(full, compared)


def check_disks(passes: Sequence[Options], server_dsn: str) -> list[DiskCheck]:
    """The disk checked for every pass before any is generated, the first in full.

    One probe per mix: the passes run one after another, each database
    dropped before the next is made, so each must fit alone.
    """
    mixes = dict.fromkeys(options.mix for options in passes)
    footprints = {
        mix: probe(
            server_dsn, MIXES[mix], passes[0].chunk_size, min(PROBE_DUTIES, passes[0].duties)
        )
        for mix in mixes
    }
    return [
        check_disk(
            server_dsn,
            MIXES[options.mix],
            duties=options.duties,
            backfill_duties=options.backfill_duties,
            tables=COMPARISON_BENCH if index else FULL_BENCH,
            chunk_size=options.chunk_size,
            footprint=footprints[options.mix],
        )
        for index, options in enumerate(passes)
    ]


def run_benchmark(
    options: Options, server_dsn: str, server_label: str = "", disk: DiskCheck | None = None
) -> Results:
    """The full pass: measure every path and judge the figures against the bar.

    ``options``' first mix and layout; ``disk`` is checked first unless given.
    """
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        version = str(scalar(admin, "SHOW server_version"))
    if disk is None:
        disk = check_disks([options], server_dsn)[0]
    parameters = {
        **_parameters(options, "full"),
        "naive_sample": options.naive_sample,
        "backfill_window": [BACKFILL_FROM.isoformat(), BACKFILL_TO.isoformat()],
        "backfill_organization": BIG_ORG,
    }
    with _measured(options, server_dsn, disk, parameters) as (conn, scheduled, measured):
        backfill_spec = dataclasses.replace(
            scheduled,
            window=(BACKFILL_FROM.isoformat(), BACKFILL_TO.isoformat()),
            organization_id=BIG_ORG,
        )
        backfill = run_child(conn, backfill_spec)
        conn.execute("ANALYZE duly_task")
        backfill_again = run_child(conn, backfill_spec)
        naive = run_naive(conn, options.naive_sample, measured.staged_rows, measured.floor.advanced)
        # Last: the week rebuilds the floor's tables the naive path used.
        week = run_week(conn, scheduled) if options.week else None
    # N/10 in a fresh database generated the same way: the same distribution at a
    # tenth of the size, the same first run, so only N differs.
    tenth = max(1, options.duties // 10)
    with (
        fresh_database(server_dsn, "tenth", options.layout) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        tenth_data = generate(
            conn,
            tenth,
            max(1, options.backfill_duties * tenth // options.duties),
            MIXES[options.mix],
        )
        tenth_first = run_child(conn, dataclasses.replace(scheduled, dsn=dsn))
    results = Results(
        **{**phases_of(measured), "week": week},
        server={"version": version, "where": server_label},
        backfill=backfill,
        backfill_again=backfill_again,
        naive=naive,
        tenth_data=tenth_data,
        tenth_first=tenth_first,
    )
    results.verdicts = judge(results, options.duties, options.chunk_size)
    return results


def run_comparison(options: Options, server_dsn: str, disk: DiskCheck | None = None) -> Pass:
    """A comparison pass: the phases the ratios against the floor need, judged by them."""
    if disk is None:
        disk = check_disks([options], server_dsn)[0]
    parameters = _parameters(options, "comparison")
    with _measured(options, server_dsn, disk, parameters) as (conn, spec, measured):
        if options.week:
            measured.week = run_week(conn, spec)
    measured.verdicts = judge_pass(measured, options.duties, options.chunk_size)
    return measured


@contextmanager
def _measured(
    options: Options, server_dsn: str, disk: DiskCheck, parameters: dict[str, Any]
) -> Iterator[tuple[Conn, ChildSpec, Pass]]:
    """The phases every pass makes, in a fresh database, kept open for the caller's block.

    Generate; the first run's request made dry (a0); the first run, then
    again at once (a retry) and after the vacuum autovacuum would make (the
    no-op); stage the first run's rows; the floor, then again at once and
    after the same vacuum; then the further no-op rounds, each the
    dispatcher's then the floor's, back to back (the first round's two no-ops
    each follow their own vacuum). Every run is recorded in the ledger, as the
    deployed function records it, so a re-run knows from its first page that
    its rows exist (page_plan); a dry run never counts as one.
    """
    with (
        fresh_database(server_dsn, "n", options.layout) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        data = generate(conn, options.duties, options.backfill_duties, MIXES[options.mix])
        prepare_floor_tables(conn)
        settled = settle(conn)
        scheduled = ChildSpec(
            dsn=dsn,
            now=CLOCK.isoformat(),
            chunk_size=options.chunk_size,
            workers=options.workers,
            prepare=not options.rds_proxy,
            trace=options.trace_round_trips,
            recorded=True,
        )
        # The same request, dry, while no task exists: what working the rows
        # out costs without writing them. Recorded like any run; a dry run is
        # never the clock a later run counts from: the first run makes the same statements.
        dry = run_child(conn, dataclasses.replace(scheduled, dry_run=True))
        first = run_child(conn, scheduled)
        retry = run_child(conn, scheduled)
        vacuum(conn, DISPATCH_TABLES)
        noop = run_child(conn, scheduled)
        staged = stage_floor(conn)
        floor = run_floor(conn)
        floor_retry = run_floor(conn)
        vacuum(conn, FLOOR_TABLES)
        floor_noop = run_floor(conn)
        noop_again = tuple(
            NoopRound(run_child(conn, scheduled), run_floor(conn))
            for _ in range(options.noop_rounds - 1)
        )
        yield (
            conn,
            scheduled,
            Pass(
                parameters=parameters,
                disk=disk,
                data=data,
                settled=settled,
                dry=dry,
                first=first,
                retry=retry,
                noop=noop,
                staged_rows=staged,
                floor=floor,
                floor_retry=floor_retry,
                floor_noop=floor_noop,
                noop_again=noop_again,
            ),
        )


def _parameters(options: Options, kind: str) -> dict[str, Any]:
    return {
        "pass": kind,
        "duties": options.duties,
        "backfill_duties": options.backfill_duties,
        "chunk_size": options.chunk_size,
        "workers": options.workers,
        "mix": options.mix,
        "layout": options.layout,
        "clock": CLOCK.isoformat(),
        "rds_proxy": options.rds_proxy,
        "noop_rounds": options.noop_rounds,
        "week": options.week,
        "recorded": True,
        "cpus": os.cpu_count(),
    }
