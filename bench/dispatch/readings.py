"""What the server says a phase did: rows written (``pg_stat_user_tables``), CPU (``/proc``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
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


@dataclass(frozen=True, slots=True)
class ProcStat:
    """What ``/proc/<pid>/stat`` says of a process's parent and CPU, in clock ticks."""

    pid: int
    ppid: int
    utime: int
    stime: int
    # The CPU of children it has waited for: exited ones, no longer in /proc.
    cutime: int
    cstime: int

    @property
    def own_ticks(self) -> int:
        """The process's own CPU."""
        return self.utime + self.stime

    @property
    def ticks(self) -> int:
        """Its own CPU and that of every child it has reaped."""
        return self.own_ticks + self.cutime + self.cstime


def parse_stat(text: str) -> ProcStat:
    """One ``/proc/<pid>/stat`` line as a ``ProcStat``.

    The command name (field 2) is in parentheses and may hold spaces and
    parentheses itself, so the fields are counted from the last ")": field 3
    (the state) is the first after it; ppid is field 4, utime to cstime 14-17.
    """
    pid, _, rest = text.partition(" (")
    fields = rest.rsplit(")", 1)[1].split()
    return ProcStat(
        pid=int(pid),
        ppid=int(fields[1]),
        utime=int(fields[11]),
        stime=int(fields[12]),
        cutime=int(fields[13]),
        cstime=int(fields[14]),
    )


def server_ticks(postmaster: ProcStat, processes: Iterable[ProcStat]) -> int:
    """The CPU of a whole server: its postmaster's and every process it has started.

    The postmaster's cutime and cstime hold its children that have exited
    (closed backends, finished parallel workers); the live ones are read one
    by one among ``processes``, which may hold any other process too.
    """
    children = (each.ticks for each in processes if each.ppid == postmaster.pid)
    return postmaster.ticks + sum(children)


def server_cpu_seconds(conn: psycopg.Connection[Any]) -> float | None:
    """CPU seconds the whole server behind ``conn`` has used so far.

    The dispatcher's backends, any parallel workers their statements start,
    every other backend, and the background processes (WAL
    writer, checkpointer, ...): what a user pays for on the writer. On a
    server shared with other databases' work, theirs too. Read from /proc,
    so only for a server on this machine; None elsewhere, or where /proc
    cannot be read.
    """
    if not _local(conn):
        return None
    try:
        backend = parse_stat(_read_stat(conn.info.backend_pid))
        postmaster = parse_stat(_read_stat(backend.ppid))
    except OSError:
        return None
    return server_ticks(postmaster, _processes()) / os.sysconf("SC_CLK_TCK")


def _processes() -> Iterator[ProcStat]:
    """Every process /proc shows now; one that ends while it is read is passed over."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                yield parse_stat(_read_stat(int(entry.name)))
            except OSError:
                continue


def _read_stat(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")


def _local(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn``'s server runs on this machine: a Unix socket or a loopback address."""
    host = conn.info.host
    return host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")


def backend_cpu_seconds(conns: Sequence[psycopg.Connection[Any]]) -> float | None:
    """CPU seconds the backends behind ``conns`` themselves have used so far.

    Their own processes only: not their parallel workers nor the server's
    background processes (``server_cpu_seconds`` counts those). Kept beside
    it to show how much of a phase's server CPU is the statements' own.
    Read from /proc, so only for a server on this machine; None elsewhere.
    """
    total_ticks = 0
    for conn in conns:
        if not _local(conn):
            return None
        try:
            total_ticks += parse_stat(_read_stat(conn.info.backend_pid)).own_ticks
        except OSError:
            return None
    return total_ticks / os.sysconf("SC_CLK_TCK")


def cpu_spent(before: float | None, after: float | None) -> float | None:
    """The CPU seconds between two readings, when both could be read."""
    return None if before is None or after is None else after - before
