"""The dispatcher's runs as the benchmark measures them: from the child, and from the server."""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.dispatch import child
from bench.dispatch.readings import (
    Written,
    cpu_spent,
    server_cpu_seconds,
    table_counters,
    written,
)
from bench.dispatch.server import DISPATCH_TABLES, Conn, settle


@dataclass(frozen=True, slots=True)
class ChildRun:
    """A dispatcher run made in a child process, as it and the database saw it."""

    seconds: float
    # The whole server's CPU from just before the child starts to just after it
    # ends (readings.server_cpu_seconds): its backends, their parallel workers,
    # the background processes, and its connecting and closing too.
    server_cpu_seconds: float | None
    # Its backends' own CPU around the run alone, read in the child.
    backend_cpu_seconds: float | None
    process_seconds: float
    # The dispatching process's own CPU (user and system) around the run, as
    # the child read it (None from a child older than the field), and the
    # whole child's, its start-up and connecting included.
    client_cpu_seconds: float | None
    process_cpu_seconds: float
    tasks_created: int
    tasks_existing: int
    duties_advanced: int
    duties_read: int
    pages: int
    round_trips: int
    statements: int
    transactions: int
    prepared: int
    traced_round_trips: int | None
    rss_baseline_mib: float
    rss_peak_mib: float
    written: Written
    code: str
    report: dict[str, Any]


def run_child(
    conn: Conn,
    spec: child.ChildSpec,
    tables: Sequence[str] = DISPATCH_TABLES,
    root: Path | None = None,
) -> ChildRun:
    """Run the dispatcher in a child process; read its figures, the rows it wrote, the CPU.

    The whole server's CPU is read here, around the whole child, not in it:
    the parallel workers of its statements and, once the child has closed
    its connections, its backends too are gone from /proc, and only the
    postmaster's record of its exited children (readings) still holds them.
    ``root``: the checkout whose dispatcher runs (``child.spawn``).
    """
    settle(conn)
    before = table_counters(conn, tables)
    cpu_before = server_cpu_seconds(conn)
    process_before = _children_cpu()
    started = time.perf_counter()
    figures = child.run(spec, root=root)
    process_seconds = time.perf_counter() - started
    process_cpu_seconds = _children_cpu() - process_before
    cpu_after = server_cpu_seconds(conn)
    rows = written(before, table_counters(conn, tables))
    report = figures["report"]
    return ChildRun(
        seconds=figures["seconds"],
        server_cpu_seconds=cpu_spent(cpu_before, cpu_after),
        backend_cpu_seconds=figures["backend_cpu_seconds"],
        process_seconds=process_seconds,
        client_cpu_seconds=figures.get("client_cpu_seconds"),
        process_cpu_seconds=process_cpu_seconds,
        tasks_created=report["tasks_created"],
        tasks_existing=report["tasks_existing"],
        duties_advanced=report["duties_advanced"],
        duties_read=report["duties_read"],
        pages=report["pages"],
        round_trips=figures["round_trips"],
        statements=figures["statements"],
        transactions=figures["transactions"],
        prepared=figures["prepared"],
        traced_round_trips=figures["traced_round_trips"],
        rss_baseline_mib=figures["rss_baseline_kib"] / 1024,
        rss_peak_mib=figures["rss_peak_kib"] / 1024,
        written=rows,
        code=figures["code"],
        report=report,
    )


def _children_cpu() -> float:
    # The reaped children's CPU: the child is reaped inside child.run, and no
    # other child of this process runs meanwhile.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
