"""The naive path: one round trip and one transaction per task, and one per duty advanced.

What a per-task implementation costs at N is one single-row INSERT per task
into a table that already holds about N's tasks with all its indexes, and one
UPDATE of ``last_dispatched_period`` per duty. It is measured on a sample of
duties spread over the whole id range, in the floor's tables once the floor is
done: ``floor_task`` then holds exactly the first run's rows, so the sample's
tasks are taken out (and vacuumed away, so their index slots are free again)
and put back one by one, into indexes of the full size the dispatcher's last
pages met. Each statement is timed on its own; the median time of an INSERT
times the first run's tasks, plus the median time of an UPDATE times the
duties it advanced, is the extrapolation. The median, not the mean: the
sample runs on a shared machine, and one stall must not decide the figure.

No reading of duties, no planning, and the statements are prepared after
five uses: the kindest version of the naive path, so its ratio is a lower
bound. The same INSERTs into an empty copy of the table are timed beside it,
to show what a sample that does not meet the full-size indexes would claim.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import errors as pg_errors
from psycopg import sql

from bench.dispatch.floor import TASK_COLUMNS, copy_table
from bench.dispatch.server import BenchError, Conn, settle, vacuum


@dataclass(frozen=True, slots=True)
class NaivePass:
    """One pass over the sample, every statement timed on its own: counts, sums, medians."""

    inserts: int
    insert_seconds: float
    insert_median_ms: float
    updates: int
    update_seconds: float
    update_median_ms: float  # zero when the pass made no UPDATE
    inserted: int
    refused: int
    advanced: int

    @property
    def seconds(self) -> float:
        """The pass's statements' time together."""
        return self.insert_seconds + self.update_seconds


def _timed_pass(
    inserts: Sequence[float], updates: Sequence[float], inserted: int, refused: int, advanced: int
) -> NaivePass:
    return NaivePass(
        inserts=len(inserts),
        insert_seconds=sum(inserts),
        insert_median_ms=statistics.median(inserts) * 1000,
        updates=len(updates),
        update_seconds=sum(updates),
        update_median_ms=statistics.median(updates) * 1000 if updates else 0.0,
        inserted=inserted,
        refused=refused,
        advanced=advanced,
    )


@dataclass(frozen=True, slots=True)
class NaiveRun:
    """The sample's passes, and the first run's cost extrapolated from them."""

    sample_duties: int
    sample_tasks: int
    total_tasks: int
    total_duties: int
    first: NaivePass  # into the full-size tables: every row new
    noop: NaivePass  # the same again: every INSERT refused, every UPDATE a no-op
    empty: NaivePass  # the same INSERTs into an empty copy of the table

    @property
    def extrapolated_seconds(self) -> float:
        """Median INSERT x the first run's tasks + median UPDATE x its advanced duties."""
        return _extrapolate(self.first, self.total_tasks, self.total_duties)

    @property
    def mean_extrapolated_seconds(self) -> float:
        """The same from the means: the sample's time scaled to the first run's rows."""
        per_task = self.first.insert_seconds / self.first.inserts
        per_duty = self.first.update_seconds / max(1, self.first.updates)
        return per_task * self.total_tasks + per_duty * self.total_duties

    @property
    def noop_extrapolated_seconds(self) -> float:
        """The no-op pass's medians scaled the same way."""
        return _extrapolate(self.noop, self.total_tasks, self.total_duties)

    @property
    def empty_extrapolated_seconds(self) -> float:
        """INSERTs alone, into an empty table, scaled to the first run's tasks."""
        return self.empty.insert_median_ms / 1000 * self.total_tasks


def _extrapolate(run: NaivePass, tasks: int, duties: int) -> float:
    return run.insert_median_ms / 1000 * tasks + run.update_median_ms / 1000 * duties


# The dispatcher's own never-regress comparison, one duty at a time.
# By the duty's whole key: on the partitioned layout the only index on id is
# (organization_id, id), which an UPDATE by id alone reads whole.
_UPDATE = """
    UPDATE floor_duty SET last_dispatched_period = %s
    WHERE (organization_id, id) = (%s, %s)
      AND (last_dispatched_period IS NULL OR last_dispatched_period COLLATE "C" < %s)
"""


def run_naive(conn: Conn, sample_duties: int, total_tasks: int, total_duties: int) -> NaiveRun:
    """Take a sample of advanced duties out of the floor's tables, then put it back row by row."""
    step = max(1, total_duties // sample_duties)
    duty_rows = conn.execute(
        "SELECT id, last_dispatched_period, organization_id FROM"
        " (SELECT id, last_dispatched_period, organization_id,"
        "  row_number() OVER (ORDER BY id) AS k"
        "  FROM floor_duty WHERE last_dispatched_period IS NOT NULL) d"
        " WHERE mod(k, %s) = 0 LIMIT %s",
        (step, sample_duties),
    ).fetchall()
    if not duty_rows:
        raise BenchError(f"no advanced duties to sample for the naive path (of {total_duties})")
    duty_ids = [str(row[0]) for row in duty_rows]
    columns = sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS))
    task_rows = conn.execute(
        sql.SQL("SELECT {} FROM floor_stage WHERE duty_id = ANY(%s) ORDER BY duty_id").format(
            columns
        ),
        (duty_ids,),
    ).fetchall()
    by_duty: dict[str, list[tuple[Any, ...]]] = {duty: [] for duty in duty_ids}
    duty_at = TASK_COLUMNS.index("duty_id")
    for row in task_rows:
        by_duty[str(row[duty_at])].append(tuple(row))
    sample = [
        (str(organization), duty, str(latest), by_duty[duty])
        for duty, latest, organization in duty_rows
    ]
    # Back to the state before the first run, for the sample only; vacuumed so
    # the rows' index entries are gone and their space free, as before.
    conn.execute("DELETE FROM floor_task WHERE duty_id = ANY(%s)", (duty_ids,))
    conn.execute(
        "UPDATE floor_duty SET last_dispatched_period = NULL WHERE id = ANY(%s)", (duty_ids,)
    )
    vacuum(conn, ("floor_task", "floor_duty"))
    copy_table(conn, "duly_task", "naive_task")
    conn.execute(
        "ALTER TABLE naive_task ADD FOREIGN KEY (organization_id, duty_id)"
        " REFERENCES floor_duty (organization_id, id)"
    )
    first = _one_by_one(conn, "floor_task", sample, update=True)
    noop = _one_by_one(conn, "floor_task", sample, update=True)
    empty = _one_by_one(conn, "naive_task", sample, update=False)
    return NaiveRun(
        sample_duties=len(sample),
        sample_tasks=len(task_rows),
        total_tasks=total_tasks,
        total_duties=total_duties,
        first=first,
        noop=noop,
        empty=empty,
    )


def _one_by_one(
    conn: Conn,
    table: str,
    sample: Sequence[tuple[str, str, str, Sequence[tuple[Any, ...]]]],
    *,
    update: bool,
) -> NaivePass:
    """Each duty's tasks, one INSERT (and transaction) each, then its UPDATE; each timed."""
    insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS)),
        sql.SQL(", ").join(sql.Placeholder() * len(TASK_COLUMNS)),
    )
    settle(conn)
    inserts: list[float] = []
    updates: list[float] = []
    inserted = refused = advanced = 0
    for organization, duty, latest, rows in sample:
        for row in rows:
            started = time.perf_counter()
            try:
                conn.execute(insert, row)
                inserted += 1
            except pg_errors.UniqueViolation:
                refused += 1
            inserts.append(time.perf_counter() - started)
        if update:
            started = time.perf_counter()
            advanced += conn.execute(_UPDATE, (latest, organization, duty, latest)).rowcount
            updates.append(time.perf_counter() - started)
    if not inserts:
        raise BenchError("the naive sample's duties have no tasks")
    return _timed_pass(inserts, updates, inserted, refused, advanced)
