"""Whether the server's disk holds the benchmark at N, estimated from a small N first.

A probe generates a few thousand duties in a database of its own, makes the
first run and the backfill on them, and reads back what a duty and a task
cost on disk, indexes and the first run's dead duty versions included. The
bench at N needs that many bytes per row times the rows of every table it
fills at once, plus the WAL the server may keep between checkpoints; a run
that would fill the disk halfway through is refused before it starts.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psycopg

from bench.dispatch.child import ChildSpec
from bench.dispatch.data import BACKFILL_FROM, BACKFILL_TO, CLOCK, generate
from bench.dispatch.dispatcher import run_child
from bench.dispatch.mix import BIG_ORG, Mix
from bench.dispatch.server import BenchError, Conn, fresh_database, scalar

PROBE_DUTIES: Final = 20_000
# What the estimate leaves for what it does not count: the catalog, the free
# space map, a vacuum's temporary growth, other users of the filesystem.
MARGIN: Final = 1.25
# The server may hold up to about max_wal_size of WAL between checkpoints, and
# more while one runs; twice it is the allowance.
WAL_ALLOWANCE: Final = 2


class DiskTooSmallError(BenchError):
    """The filesystem of the server's data directory cannot hold the benchmark at N."""


@dataclass(frozen=True, slots=True)
class Footprint:
    """What one duty and one task cost on disk, as measured on the probe's tables."""

    probe_duties: int
    bytes_per_duty: float  # duly_duty with its indexes, after the first run's updates
    bytes_per_task: float  # duly_task with its indexes
    tasks_per_duty: float  # the first run's tasks per generated duty
    backfill_tasks_per_duty: float  # the backfill's tasks per duty of its organisation


@dataclass(frozen=True, slots=True)
class Tables:
    """How many full copies of the duties and of the first run's tasks a bench keeps at once."""

    duty_copies: int
    task_copies: int
    backfill: bool


# The full bench: duly_duty and floor_duty; duly_task, floor_stage and
# floor_task; and the backfill's tasks in duly_task. The week drops
# floor_stage and copies the tables afresh; the days then add about half the
# first run's tasks to each side, within the third copy.
FULL_BENCH: Final = Tables(duty_copies=2, task_copies=3, backfill=True)
# A comparison pass of the full bench (another mix or layout): the same, less
# the backfill it does not run.
COMPARISON_BENCH: Final = Tables(duty_copies=2, task_copies=3, backfill=False)
# The scale bench: the duties and the first run's tasks, and the week's copies
# of them for its floor, each side growing by the week's tasks (about half
# the first run's).
SCALE_BENCH: Final = Tables(duty_copies=2, task_copies=3, backfill=False)


@dataclass(frozen=True, slots=True)
class DiskCheck:
    """The estimate at N against the free space, and where it was read."""

    footprint: Footprint
    needed_bytes: int
    free_bytes: int | None  # None: the data directory is not on this machine
    data_directory: str | None

    @property
    def fits(self) -> bool:
        """Whether the bench fits (or the free space could not be read here)."""
        return self.free_bytes is None or self.needed_bytes <= self.free_bytes


def needed_bytes(
    footprint: Footprint,
    duties: int,
    backfill_duties: int,
    tables: Tables,
    max_wal_bytes: int,
) -> int:
    """Bytes the bench at ``duties`` fills at its peak, with the WAL allowance and the margin."""
    tasks = footprint.tasks_per_duty * duties
    rows = tables.duty_copies * duties * footprint.bytes_per_duty
    rows += tables.task_copies * tasks * footprint.bytes_per_task
    if tables.backfill:
        rows += backfill_duties * footprint.backfill_tasks_per_duty * footprint.bytes_per_task
    return math.ceil((rows + WAL_ALLOWANCE * max_wal_bytes) * MARGIN)


def probe(server_dsn: str, mix: Mix, chunk_size: int, duties: int = PROBE_DUTIES) -> Footprint:
    """Measure a duty's and a task's bytes on ``duties`` duties of ``mix``."""
    backfill_duties = max(1, duties // 20)
    with (
        fresh_database(server_dsn, "probe") as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        generate(conn, duties, backfill_duties, mix)
        scheduled = ChildSpec(dsn=dsn, now=CLOCK.isoformat(), chunk_size=chunk_size, workers=1)
        first = run_child(conn, scheduled)
        first_bytes = _total_bytes(conn)
        backfill = run_child(
            conn,
            dataclasses.replace(
                scheduled,
                window=(BACKFILL_FROM.isoformat(), BACKFILL_TO.isoformat()),
                organization_id=BIG_ORG,
            ),
        )
    if first.tasks_created == 0:
        raise BenchError(f"the probe's first run on {duties:,} duties created no task")
    duty_bytes, task_bytes = first_bytes
    return Footprint(
        probe_duties=duties,
        bytes_per_duty=duty_bytes / duties,
        bytes_per_task=task_bytes / first.tasks_created,
        tasks_per_duty=first.tasks_created / duties,
        backfill_tasks_per_duty=backfill.tasks_created / backfill_duties,
    )


def _total_bytes(conn: Conn) -> tuple[int, int]:
    row = conn.execute(
        "SELECT pg_total_relation_size('duly_duty'), pg_total_relation_size('duly_task')"
    ).fetchone()
    if row is None:
        raise BenchError("no sizes of duly_duty and duly_task")
    return int(row[0]), int(row[1])


def free_space(server_dsn: str) -> tuple[int | None, str | None]:
    """Free bytes on the filesystem of the server's data directory, and the directory.

    None for the bytes when the directory cannot be read from here (a remote
    server, or a role without pg_read_all_settings).
    """
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        try:
            directory = str(scalar(conn, "SHOW data_directory"))
        except psycopg.errors.InsufficientPrivilege:
            return None, None
    if not Path(directory).is_dir():
        return None, directory
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize, directory


def max_wal_bytes(server_dsn: str) -> int:
    """The server's max_wal_size, in bytes."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        wal = scalar(
            conn,
            "SELECT pg_size_bytes(setting || ' ' || unit) FROM pg_settings"
            " WHERE name = 'max_wal_size'",
        )
    return int(wal)


def check_disk(
    server_dsn: str,
    mix: Mix,
    *,
    duties: int,
    backfill_duties: int,
    tables: Tables,
    chunk_size: int,
    footprint: Footprint | None = None,
) -> DiskCheck:
    """Probe, estimate the bench at ``duties``, and refuse it if the disk is short.

    ``footprint`` is a probe of ``mix`` already made, for another bench of it.
    Raises ``DiskTooSmallError`` naming the estimate, the free space and the
    directory when the bench would not fit.
    """
    if footprint is None:
        footprint = probe(server_dsn, mix, chunk_size, min(PROBE_DUTIES, duties))
    free, directory = free_space(server_dsn)
    needed = needed_bytes(footprint, duties, backfill_duties, tables, max_wal_bytes(server_dsn))
    checked = DiskCheck(footprint, needed, free, directory)
    if not checked.fits:
        raise DiskTooSmallError(
            f"the bench at {duties:,} duties needs about {needed / 2**30:.1f} GiB "
            f"({footprint.bytes_per_duty:.0f} B a duty, {footprint.bytes_per_task:.0f} B a task, "
            f"{footprint.tasks_per_duty:.2f} tasks a duty, measured on {footprint.probe_duties:,} "
            f"duties; WAL and a {MARGIN:g}x margin included), but the filesystem of the "
            f"PostgreSQL data directory {directory} has {(free or 0) / 2**30:.1f} GiB free: "
            "free some space, or pass --database-url for a server with more"
        )
    return checked
