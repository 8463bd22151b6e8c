"""The server the benchmark runs on, its throwaway databases, and the pauses between phases."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.abc import Params, QueryNoTemplate
from psycopg.conninfo import make_conninfo
from psycopg.rows import TupleRow

from dispatch_fn.cli import embedded
from dispatch_fn.db import apply_migrations
from dispatch_fn.db.layout import PLAIN, apply_layout

type Conn = psycopg.Connection[TupleRow]

# The tables whose writes a run is judged by.
DISPATCH_TABLES: Final = ("duly_task", "duly_duty")
FLOOR_TABLES: Final = ("floor_task", "floor_duty")


class BenchError(RuntimeError):
    """The benchmark could not measure what it set out to."""


@contextmanager
def server(database_url: str | None) -> Iterator[tuple[str, str]]:
    """``(dsn, description)`` of the server to benchmark on, started if need be."""
    if database_url:
        yield database_url, "DATABASE_URL"
        return
    with embedded.throwaway("duly-bench-pg-") as started:
        yield started.dsn, f"embedded pgserver in {started.data_dir}"


@contextmanager
def fresh_database(
    server_dsn: str, label: str, layout: str = PLAIN, *, until: str | None = None
) -> Iterator[str]:
    """DSN of a new, migrated, empty database of ``layout``, dropped on the way out.

    ``until`` stops the migrations at that version: the database an older
    release left, for a bench of what the next migrations cost. Layouts are
    made for the tables the last migration leaves, so such a database is plain.
    """
    if until is not None and layout != PLAIN:
        raise BenchError(f"a database migrated until {until} has the {PLAIN} layout only")
    name = f"duly_bench_{label}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = make_conninfo(server_dsn, dbname=name)
    try:
        with psycopg.connect(dsn) as conn:
            apply_migrations(conn, until=until)
            apply_layout(conn, layout)
        yield dsn
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def scalar(
    conn: psycopg.Connection[Any], query: QueryNoTemplate, params: Params | None = None
) -> Any:
    """The first column of the first row ``query`` returns."""
    row = conn.execute(query, params).fetchone()
    if row is None:
        raise BenchError(f"no row from {query!r}")
    return row[0]


def leaves(conn: Conn, table: str) -> list[str]:
    """The tables that hold ``table``'s rows: itself, or each of its partitions.

    Storage options and row counters belong to those, not to a partitioned
    table (the partitioned layout, ``--layout partitioned``).
    """
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' AND (c.oid = %(t)s::regclass"
        " OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = %(t)s::regclass))"
        " ORDER BY 1",
        {"t": table},
    ).fetchall()
    return [str(row[0]) for row in rows]


def settle(conn: Conn) -> bool:
    """Start a timed phase from a clean slate: no dirty buffers left by the last one.

    Without it, a checkpoint triggered by one phase's WAL lands inside the
    next, and which side of a ratio pays for it is luck. Needs superuser or
    pg_checkpoint; without them the phases simply run unsettled.
    """
    try:
        conn.execute("CHECKPOINT")
    except pg_errors.InsufficientPrivilege:
        return False
    return True


def vacuum(conn: Conn, tables: Sequence[str]) -> None:
    """What autovacuum does to ``tables`` between two daily runs.

    The bench switches autovacuum off so that no background pass lands inside
    a timed phase; this is its pass, made between phases instead. A first run
    leaves a dead version of every duty it advanced and a new row per task:
    autovacuum's thresholds (20 % of a table changed) are crossed many times
    over, so the next day's run finds both tables vacuumed and analysed.
    """
    for table in tables:
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
