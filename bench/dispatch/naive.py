"""The naive path: one INSERT round trip (and transaction) per task, on a sample."""

from __future__ import annotations

import time
from dataclasses import dataclass

from psycopg import errors as pg_errors
from psycopg import sql

from bench.dispatch.floor import TASK_COLUMNS, copy_table
from bench.dispatch.server import BenchError, Conn, settle


@dataclass(frozen=True, slots=True)
class NaiveRun:
    """One INSERT per task on a sample, then the same sample again (all refused)."""

    sample: int
    seconds: float
    inserted: int
    refused: int
    extrapolated_seconds: float
    noop_seconds: float
    noop_refused: int
    noop_extrapolated_seconds: float


def run_naive(conn: Conn, sample: int, total_rows: int) -> NaiveRun:
    """Time one round trip and one transaction per task, catching the unique violation.

    The sample is spread evenly over the staged rows, into another empty copy
    of duly_task. Only the INSERTs are timed (no reading of duties, no
    planning, no advancing), and the statement is prepared after five uses: the
    kindest version of the naive path, so its ratio is a lower bound.
    """
    copy_table(conn, "duly_task", "naive_task")
    conn.execute("ALTER TABLE naive_task ADD FOREIGN KEY (duty_id) REFERENCES floor_duty (id)")
    columns = sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS))
    step = max(1, total_rows // sample)
    rows = conn.execute(
        sql.SQL(
            "SELECT {columns} FROM (SELECT *, row_number() OVER () AS k FROM floor_stage) s"
            " WHERE mod(k, %s) = 0 LIMIT %s"
        ).format(columns=columns),
        (step, sample),
    ).fetchall()
    if not rows:
        raise BenchError(f"no staged rows to sample for the naive path (of {total_rows})")
    insert = sql.SQL("INSERT INTO naive_task ({}) VALUES ({})").format(
        columns, sql.SQL(", ").join(sql.Placeholder() * len(TASK_COLUMNS))
    )

    def one_by_one() -> tuple[float, int, int]:
        settle(conn)
        inserted = refused = 0
        started = time.perf_counter()
        for row in rows:
            try:
                conn.execute(insert, row)
                inserted += 1
            except pg_errors.UniqueViolation:
                refused += 1
        return time.perf_counter() - started, inserted, refused

    seconds, inserted, refused = one_by_one()
    noop_seconds, _, noop_refused = one_by_one()
    return NaiveRun(
        sample=len(rows),
        seconds=seconds,
        inserted=inserted,
        refused=refused,
        extrapolated_seconds=seconds / len(rows) * total_rows,
        noop_seconds=noop_seconds,
        noop_refused=noop_refused,
        noop_extrapolated_seconds=noop_seconds / len(rows) * total_rows,
    )
