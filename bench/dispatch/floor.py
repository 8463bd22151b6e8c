"""PostgreSQL's floor: the first run's very rows, written by one INSERT … SELECT and one UPDATE."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from psycopg import sql
from psycopg.abc import QueryNoTemplate

from bench.dispatch.readings import (
    Written,
    backend_cpu_seconds,
    cpu_spent,
    server_cpu_seconds,
    table_counters,
    written,
)
from bench.dispatch.server import FLOOR_TABLES, Conn, scalar, settle

TASK_COLUMNS: Final = (
    "organization_id", "duty_id", "owner_id", "business_unit_id", "subject", "source",
    "period_key", "due_date", "visible_from", "late_after",
)  # fmt: skip


def stage_floor(conn: Conn) -> int:
    """Copy the rows the first run created into ``floor_stage``; return how many.

    Called right after the first run, so duly_task holds exactly its rows. They
    keep the order the dispatcher inserted them in, so the floor's index
    inserts have the same locality.
    """
    columns = sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS))
    conn.execute(
        sql.SQL("CREATE TABLE floor_stage AS SELECT {} FROM duly_task ORDER BY id").format(columns)
    )
    conn.execute("ANALYZE floor_stage")
    return int(scalar(conn, "SELECT count(*) FROM floor_stage"))


def copy_table(conn: Conn, source: str, target: str) -> None:
    """Create ``target`` empty, shaped as ``source``, partitioned as it is.

    LIKE … INCLUDING ALL brings columns, defaults, identity, indexes and
    constraints; the partition key, the partitions and each table's storage
    options (fillfactor, autovacuum) are copied from the catalog, as LIKE
    leaves them behind, so the floor writes through the same partitions as
    the dispatcher (``--layout partitioned``). Foreign keys and triggers are
    not copied: callers add the one foreign key duly_task has.
    """
    key = scalar(conn, "SELECT pg_get_partkeydef(%s::regclass)", (source,))
    conn.execute(
        sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL){}").format(
            sql.Identifier(target),
            sql.Identifier(source),
            sql.SQL(f" PARTITION BY {key}") if key else sql.SQL(""),
        )
    )
    if not key:
        _copy_options(conn, source, target)
        return
    partitions = conn.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
        " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass ORDER BY 1",
        (source,),
    ).fetchall()
    for name, bound in partitions:
        part = target + str(name).removeprefix(source)
        conn.execute(
            sql.SQL("CREATE TABLE {} PARTITION OF {} {}").format(
                sql.Identifier(part), sql.Identifier(target), sql.SQL(str(bound))
            )
        )
        _copy_options(conn, str(name), part)


def _copy_options(conn: Conn, source: str, target: str) -> None:
    options = scalar(conn, "SELECT reloptions FROM pg_class WHERE oid = %s::regclass", (source,))
    if options:
        settings = sql.SQL(", ").join(
            sql.SQL("{} = {}").format(sql.Identifier(name), sql.Literal(value))
            for name, _, value in (str(option).partition("=") for option in options)
        )
        conn.execute(sql.SQL("ALTER TABLE {} SET ({})").format(sql.Identifier(target), settings))


def prepare_floor_tables(conn: Conn) -> None:
    """An identical copy of ``duly_duty`` as it is now, and an empty ``duly_task``.

    Called before the first run: ``floor_duty`` starts where the dispatcher's
    duties started (every ``last_dispatched_period`` null, loaded in the same
    order, vacuumed and analysed alike), so the floor's UPDATE advances exactly
    as many duties, through the same indexes, as the first run did.
    ``floor_task`` has duly_task's shape and the same foreign key, with the
    organisation (migration 0011), to ``floor_duty``.
    """
    copy_table(conn, "duly_duty", "floor_duty")
    conn.execute("INSERT INTO floor_duty SELECT * FROM duly_duty")
    copy_table(conn, "duly_task", "floor_task")
    conn.execute(
        "ALTER TABLE floor_task ADD FOREIGN KEY (organization_id, duty_id)"
        " REFERENCES floor_duty (organization_id, id)"
    )
    conn.execute("VACUUM (ANALYZE) floor_duty")
    conn.execute("VACUUM (ANALYZE) floor_task")


@dataclass(frozen=True, slots=True)
class FloorRun:
    """One pass of the floor: the INSERT and the UPDATE in one transaction."""

    seconds: float
    # The whole server's CPU from BEGIN to COMMIT (readings.server_cpu_seconds).
    server_cpu_seconds: float | None
    # The floor's backend's own CPU, as the dispatcher's runs keep theirs.
    backend_cpu_seconds: float | None
    insert_seconds: float
    update_seconds: float
    inserted: int
    advanced: int
    written: Written


_FLOOR_INSERT: Final = sql.SQL(
    "INSERT INTO floor_task ({columns}) SELECT {columns} FROM floor_stage"
    # The dispatcher's arbiter: the dispatch identity, not every unique index.
    " ON CONFLICT (organization_id, duty_id, owner_id, period_key) DO NOTHING"
).format(columns=sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS)))

# The dispatcher's own never-regress comparison, in "C" collation.
_FLOOR_UPDATE: Final = """
    UPDATE floor_duty d SET last_dispatched_period = s.latest
    FROM (SELECT duty_id, max(period_key COLLATE "C") AS latest
          FROM floor_stage GROUP BY duty_id) s
    WHERE d.id = s.duty_id
      AND (d.last_dispatched_period IS NULL OR d.last_dispatched_period COLLATE "C" < s.latest)
"""


def run_floor(conn: Conn) -> FloorRun:
    """Time one pass of the first run's floor, from BEGIN to COMMIT."""
    return timed_floor(conn, _FLOOR_INSERT, _FLOOR_UPDATE)


def timed_floor(conn: Conn, insert: QueryNoTemplate, update: QueryNoTemplate) -> FloorRun:
    """Time ``insert`` then ``update`` in one transaction, from BEGIN to COMMIT.

    The first run's floor and each day's (``day_floor``) are timed alike, so
    their ratios against the dispatcher's runs mean the same thing.
    """
    settle(conn)
    before = table_counters(conn, FLOOR_TABLES)
    cpu_before, backend_before = server_cpu_seconds(conn), backend_cpu_seconds([conn])
    started = time.perf_counter()
    with conn.transaction():
        inserted = conn.execute(insert).rowcount
        after_insert = time.perf_counter()
        advanced = conn.execute(update).rowcount
        after_update = time.perf_counter()
    seconds = time.perf_counter() - started
    cpu_after, backend_after = server_cpu_seconds(conn), backend_cpu_seconds([conn])
    return FloorRun(
        seconds=seconds,
        server_cpu_seconds=cpu_spent(cpu_before, cpu_after),
        backend_cpu_seconds=cpu_spent(backend_before, backend_after),
        insert_seconds=after_insert - started,
        update_seconds=after_update - after_insert,
        inserted=inserted,
        advanced=advanced,
        written=written(before, table_counters(conn, FLOOR_TABLES)),
    )
