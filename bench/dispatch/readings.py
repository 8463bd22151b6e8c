"""What the server says a phase did: rows written (``pg_stat_user_tables``), CPU (``/proc``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench.dispatch.server import BenchError

type Counters = dict[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Written:
    """Rows inserted and updated per table between two readings of pg_stat_user_tables."""

    inserted: dict[str, int]
    updated: dict[str, int]

    @property
    def total(self) -> int:
        """Every row inserted or updated, all tables together."""
        return sum(self.inserted.values()) + sum(self.updated.values())


def table_counters(conn: psycopg.Connection[Any], tables: Sequence[str]) -> Counters:
    """``n_tup_ins`` and ``n_tup_upd`` of each table, as of now.

    Statistics are flushed asynchronously (PostgreSQL 15+ batches them per
    backend), so this backend flushes its own first; the writing child
    flushes before it exits (``pg_stat_force_next_flush`` takes effect before
    the statement's ReadyForQuery, so the figures are final when it returns).
    """
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    # A partitioned table has no counters of its own: its partitions' are summed.
    rows = conn.execute(
        "SELECT t.name, sum(s.n_tup_ins), sum(s.n_tup_upd)"
        " FROM unnest(%s::text[]) t(name) JOIN pg_stat_user_tables s"
        "   ON s.relid = to_regclass(t.name) OR s.relid IN ("
        "      SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(t.name))"
        " GROUP BY t.name",
        (list(tables),),
    ).fetchall()
    found = {str(name): (int(ins), int(upd)) for name, ins, upd in rows}
    if set(found) != set(tables):
        raise BenchError(f"pg_stat_user_tables lacks {sorted(set(tables) - set(found))}")
    return found


def written(before: Counters, after: Counters) -> Written:
    """The rows written between two readings of the same tables."""
    return Written(
        inserted={table: after[table][0] - before[table][0] for table in before},
        updated={table: after[table][1] - before[table][1] for table in before},
    )


def backend_cpu_seconds(conns: Sequence[psycopg.Connection[Any]]) -> float | None:
    """CPU seconds the server processes behind ``conns`` have used so far.

    Read from /proc, so only for a server on this machine (a Unix socket or
    loopback address); None elsewhere. It shows what a run cost the database
    in work, beside the wall time the bar judges: several connections shorten
    the wall time, not the work.
    """
    total_ticks = 0
    for conn in conns:
        host = conn.info.host
        if not (host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")):
            return None
        stat = Path(f"/proc/{conn.info.backend_pid}/stat")
        try:
            # Fields after the ")" closing the command name start at field 3;
            # utime and stime are fields 14 and 15.
            fields = stat.read_text(encoding="ascii").rsplit(")", 1)[1].split()
        except OSError:
            return None
        total_ticks += int(fields[11]) + int(fields[12])
    return total_ticks / os.sysconf("SC_CLK_TCK")


def cpu_spent(before: float | None, after: float | None) -> float | None:
    """The CPU seconds between two readings, when both could be read."""
    return None if before is None or after is None else after - before
