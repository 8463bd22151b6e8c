"""The floor of one day: exactly the rows a day's run wrote, written set-based into copies.

The copies (``floor_duty``, ``floor_task``) are made once, as the tables
stand after the first run, and then follow the dispatcher day by day: each
day's floor writes that day's rows into them, so before every day they hold
what ``duly_duty`` and ``duly_task`` held before it, and both sides have
been through the same days' writes and vacuums.

What a day wrote is read back from the dispatcher's tables after it: the
tasks whose id is past the largest before it (the id is one identity, in
every layout), and the duties whose row version a transaction of the day
made (``xmin``). The floor stages them and writes them with one ``INSERT …
SELECT … ON CONFLICT DO NOTHING`` and one ``UPDATE … FROM`` of the columns
the day changed, whatever they are (``last_dispatched_period``, the account,
any column a later migration gives the dispatcher to keep), to the very
values the run left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from psycopg import sql

from bench.dispatch.floor import TASK_COLUMNS, FloorRun, copy_table, timed_floor
from bench.dispatch.server import BenchError, Conn, scalar

# The day's rows, staged for the floor; dropped once it has written them.
DAY_TASKS: Final = "floor_day_task"
DAY_DUTIES: Final = "floor_day_duty"
# The duty's key in every layout (plain: id alone is unique too).
_DUTY_KEY: Final = ("organization_id", "id")
# Transaction ids as xmin holds them: 32 bits, wrapping around.
_XID_SPAN: Final = 2**32


def copy_tables_as_they_stand(conn: Conn) -> None:
    """Replace the floor's copies with ``duly_duty`` and ``duly_task`` as they are now.

    The first run's floor (``floor.prepare_floor_tables``) is dropped with
    what was built on it; the copies are made as that one's are (columns,
    indexes, fillfactor, partitions), then filled in the tables' own order,
    the tasks by id so the floor's index inserts keep the dispatcher's
    locality, and vacuumed and analysed as autovacuum would leave them.
    """
    conn.execute("DROP TABLE IF EXISTS floor_stage, floor_task, floor_duty CASCADE")
    copy_table(conn, "duly_duty", "floor_duty")
    conn.execute("INSERT INTO floor_duty SELECT * FROM duly_duty")
    copy_table(conn, "duly_task", "floor_task")
    # Without the id: the copy's own identity numbers the rows in the same
    # order and goes on from there for the days' inserts.
    columns = sql.SQL(", ").join(map(sql.Identifier, _columns(conn, "duly_task", skip=("id",))))
    conn.execute(
        sql.SQL("INSERT INTO floor_task ({0}) SELECT {0} FROM duly_task ORDER BY id").format(
            columns
        )
    )
    conn.execute(
        "ALTER TABLE floor_task ADD FOREIGN KEY (organization_id, duty_id)"
        " REFERENCES floor_duty (organization_id, id)"
    )
    conn.execute("VACUUM (ANALYZE) floor_duty")
    conn.execute("VACUUM (ANALYZE) floor_task")


@dataclass(frozen=True, slots=True)
class DayMark:
    """Where the dispatcher's tables stood just before a day's run."""

    last_task_id: int
    xact_id: int  # a transaction id taken then; every later one is the day's or after


def mark_day(conn: Conn) -> DayMark:
    """Read the mark a day's rows are told apart by, just before its run."""
    return DayMark(
        last_task_id=int(scalar(conn, "SELECT coalesce(max(id), 0) FROM duly_task")),
        xact_id=int(scalar(conn, "SELECT pg_current_xact_id()::text::bigint")),
    )


@dataclass(frozen=True, slots=True)
class StagedDay:
    """A day's new task rows and changed duty rows, staged for the floor."""

    tasks: int
    duties: int
    # The duty columns whose value the day changed on some row: what the
    # floor's UPDATE sets.
    changed_columns: tuple[str, ...]


def stage_day(conn: Conn, mark: DayMark) -> StagedDay:
    """Stage the rows the day's run wrote, right after it; say how many and which columns."""
    task_columns = sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS))
    conn.execute(
        sql.SQL("CREATE TABLE {} AS SELECT {} FROM duly_task WHERE id > %s ORDER BY id").format(
            sql.Identifier(DAY_TASKS), task_columns
        ),
        (mark.last_task_id,),
    )
    # A row version made after the mark: its xmin is at most as far past the
    # mark's transaction (modulo the 32-bit wrap) as the transactions made
    # since. Every older version is further, by nearly the whole span.
    since = int(scalar(conn, "SELECT pg_current_xact_id()::text::bigint")) - mark.xact_id
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} AS SELECT * FROM duly_duty"
            " WHERE (xmin::text::bigint - %(mark)s + %(span)s) %% %(span)s BETWEEN 1 AND %(since)s"
        ).format(sql.Identifier(DAY_DUTIES)),
        {"mark": mark.xact_id % _XID_SPAN, "span": _XID_SPAN, "since": since},
    )
    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(DAY_TASKS)))
    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(DAY_DUTIES)))
    return StagedDay(
        tasks=int(
            scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(DAY_TASKS)))
        ),
        duties=int(
            scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(DAY_DUTIES)))
        ),
        changed_columns=_changed_columns(conn),
    )


def _changed_columns(conn: Conn) -> tuple[str, ...]:
    """The duty columns the staged rows hold another value in than the floor's copy.

    The copy holds the rows as they were before the day. A day that rewrote
    rows without changing a value still wrote them: the floor then sets
    ``last_dispatched_period`` to itself, writing the same rows.
    """
    columns = _columns(conn, "duly_duty", skip=_DUTY_KEY)
    differs = sql.SQL(", ").join(
        sql.SQL("coalesce(bool_or(s.{0} IS DISTINCT FROM f.{0}), false)").format(
            sql.Identifier(column)
        )
        for column in columns
    )
    row = conn.execute(
        sql.SQL(
            "SELECT {} FROM {} s JOIN floor_duty f"
            " ON f.organization_id = s.organization_id AND f.id = s.id"
        ).format(differs, sql.Identifier(DAY_DUTIES))
    ).fetchone()
    if row is None:
        raise BenchError("no answer on the columns the day changed")
    changed = tuple(column for column, flag in zip(columns, row, strict=True) if flag)
    return changed or ("last_dispatched_period",)


def run_day_floor(conn: Conn, staged: StagedDay) -> FloorRun:
    """Time the floor's day on the staged rows."""
    insert = sql.SQL(
        "INSERT INTO floor_task ({columns}) SELECT {columns} FROM {stage}"
        # The dispatcher's arbiter: the dispatch identity, not every unique index.
        " ON CONFLICT (organization_id, duty_id, owner_id, period_key) DO NOTHING"
    ).format(
        columns=sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS)),
        stage=sql.Identifier(DAY_TASKS),
    )
    update = sql.SQL(
        "UPDATE floor_duty d SET {} FROM {} s"
        " WHERE d.organization_id = s.organization_id AND d.id = s.id"
    ).format(
        sql.SQL(", ").join(
            sql.SQL("{0} = s.{0}").format(sql.Identifier(column))
            for column in staged.changed_columns
        ),
        sql.Identifier(DAY_DUTIES),
    )
    return timed_floor(conn, insert, update)


def drop_day_stage(conn: Conn) -> None:
    """Drop the day's staged rows, once the floor has written them (or the day was refused)."""
    conn.execute(
        sql.SQL("DROP TABLE IF EXISTS {}, {}").format(
            sql.Identifier(DAY_TASKS), sql.Identifier(DAY_DUTIES)
        )
    )


def _columns(conn: Conn, table: str, skip: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``table``'s columns that a statement may write, in order, less ``skip``."""
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
        " AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        (table,),
    ).fetchall()
    return tuple(str(name) for (name,) in rows if str(name) not in skip)
