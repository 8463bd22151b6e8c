"""Builders and readers shared by the planner, database and handler tests."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

if TYPE_CHECKING:  # the pure layers import this module without the run loop
    from dispatch_fn.planning.plan import Plan
    from dispatch_fn.run import RunReport

EVENTS_DIR = Path(__file__).resolve().parent.parent / "events"

# The clock most tests run at: the schedule's own hour on an ordinary day.
NOW = datetime(2026, 8, 21, 1, 0, tzinfo=UTC)
# The same instant as an event spells it.
CLOCK = NOW.isoformat().replace("+00:00", "Z")

type Conn = psycopg.Connection[Any]
type Invoke = Callable[..., dict[str, Any]]

DUTY_COLUMNS = (
    "id", "organization_id", "name", "form", "status", "owner_id", "business_unit_id", "source",
    "frequency", "due_anchor", "due_offset_days", "lead_days", "timezone",
    "effective_from", "effective_to", "last_dispatched_period",
    "review_status", "grace_days", "due_offset_months", "due_roll", "holiday_calendar",
)  # fmt: skip


def clock_event(at: datetime) -> dict[str, str]:
    """A scheduled run's event at clock ``at``."""
    return {"now": at.astimezone(UTC).isoformat().replace("+00:00", "Z")}


def set_aside(holder: Conn, invoke: Invoke, at: datetime, duty_id: str) -> None:
    """The run at ``at`` finds ``duty_id``'s row locked by ``holder`` and sets it aside."""
    holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (duty_id,))
    locked = invoke(clock_event(at), lock_timeout_ms=200)
    holder.rollback()
    assert [each["duty_id"] for each in locked["set_aside"]] == [duty_id]


def session_layout() -> str:
    """The layout of duly_duty and duly_task the session's databases have (``DULY_LAYOUT``)."""
    return os.environ.get("DULY_LAYOUT") or "plain"


TASK_COLUMNS = (
    "organization_id", "duty_id", "owner_id", "business_unit_id", "subject", "source",
    "period_key", "due_date", "visible_from", "late_after", "status",
)  # fmt: skip


def duty(duty_id: str, **fields: Any) -> dict[str, Any]:
    """A valid active recurring monthly UTC duty, with ``fields`` overriding."""
    row: dict[str, Any] = {
        "id": duty_id,
        "organization_id": "org-1",
        "name": f"Duty {duty_id}",
        "form": "recurring",
        "status": "active",
        "owner_id": "owner-1",
        "business_unit_id": "bu-1",
        "source": "catalog",
        "frequency": "monthly",
        "due_anchor": "period_start",
        "due_offset_days": 0,
        "lead_days": 7,
        "timezone": "UTC",
        "effective_from": None,
        "effective_to": None,
        "last_dispatched_period": None,
        "review_status": "approved",
        "grace_days": 0,
        "due_offset_months": 0,
        "due_roll": "none",
        "holiday_calendar": None,
    }
    unknown = set(fields) - set(row)
    if unknown:
        raise KeyError(f"not duly_duty columns: {sorted(unknown)}")
    row.update(fields)
    return row


def insert_duties(conn: psycopg.Connection[Any], duties: list[dict[str, Any]]) -> None:
    """Insert duty rows as given (nulls become column defaults where NOT NULL)."""
    with conn.cursor() as cursor:
        for row in duties:
            present = {k: v for k, v in row.items() if v is not None or k not in _DEFAULTED}
            columns = ", ".join(present)
            values = ", ".join(f"%({k})s" for k in present)
            cursor.execute(f"INSERT INTO duly_duty ({columns}) VALUES ({values})", present)


_DEFAULTED = {
    "due_anchor", "due_offset_days", "lead_days", "timezone",
    "grace_days", "due_offset_months", "due_roll",
}  # fmt: skip


def task_rows(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """Every task row's dispatch columns, sorted by identity."""
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        cursor.execute(
            f"SELECT {', '.join(TASK_COLUMNS)} FROM duly_task"
            " ORDER BY organization_id, duty_id, owner_id, period_key"
        )
        return list(cursor.fetchall())


def task_keys(conn: psycopg.Connection[Any], duty_id: str | None = None) -> list[str]:
    """Period keys of the tasks (of one duty), ascending."""
    rows = conn.execute(
        "SELECT period_key FROM duly_task WHERE %(duty)s::text IS NULL OR duty_id = %(duty)s"
        " ORDER BY duty_id, period_key",
        {"duty": duty_id},
    ).fetchall()
    return [str(row[0]) for row in rows]


def task_count(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM duly_task").fetchone()
    assert row is not None
    return int(row[0])


def last_dispatched(conn: psycopg.Connection[Any]) -> dict[str, str | None]:
    rows = conn.execute("SELECT id, last_dispatched_period FROM duly_duty ORDER BY id").fetchall()
    return {str(duty_id): key for duty_id, key in rows}


def multiset(rows: Iterable[Mapping[str, Any]]) -> Counter[tuple[Any, ...]]:
    """Task rows (or planned drafts) as a multiset of their ``TASK_COLUMNS`` tuples.

    A multiset, not a set, so that a row written twice shows as twice.
    """
    return Counter(tuple(row[column] for column in TASK_COLUMNS) for row in rows)


def latest_keys(
    duty_ids: Iterable[str], rows: Iterable[Mapping[str, Any]]
) -> dict[str, str | None]:
    """Each duty's greatest period key among ``rows`` (None for a duty without one).

    What ``last_dispatched_period`` should read once ``rows`` are dispatched.
    """
    latest: dict[str, str | None] = dict.fromkeys(duty_ids)
    for row in rows:
        current = latest[row["duty_id"]]
        if current is None or row["period_key"] > current:
            latest[row["duty_id"]] = row["period_key"]
    return latest


def load_event(name: str) -> dict[str, Any]:
    """An event from the repository's events/ folder, as `sam local invoke -e` would send it."""
    loaded: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text("utf-8"))
    return loaded


def day(text: str) -> date:
    return date.fromisoformat(text)


def assert_run_is_the_plan(conn: psycopg.Connection[Any], report: RunReport, plan: Plan) -> None:
    """The database path wrote and reported exactly what the pure planner planned.

    ``plan`` is the planner's answer for every stored duty, at the run's clock and window.
    """
    summary = report.as_json()
    assert multiset(task_rows(conn)) == multiset(plan.drafts)
    assert summary["tasks_created"] == len(plan.drafts)
    assert {k: v for k, v in summary["skipped"].items() if v} == plan.skip_counts()
    assert sorted((f["duty_id"], f["reason"], f["detail"]) for f in summary["faults"]) == sorted(
        (f.duty_id, f.reason, f.detail) for f in plan.faults
    )
    assert summary["duties_read"] == len(plan.skipped) + len(
        {draft["duty_id"] for draft in plan.drafts}
    )
    stored = last_dispatched(conn)
    assert stored == latest_keys(stored, plan.drafts)


def refuse_tasks(conn: psycopg.Connection[Any], condition: str) -> None:
    """Make the server refuse (SQLSTATE 22023) every task row for which ``condition`` holds.

    ``condition`` is a SQL expression of the row (``NEW``), e.g. ``NEW.duty_id = 'd2'``:
    a value the server judges out of range, as one row's content would be.
    """
    conn.execute(
        "CREATE FUNCTION refuse_task() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" IF {condition} THEN RAISE EXCEPTION 'refused: %', NEW.duty_id"
        " USING ERRCODE = '22023'; END IF; RETURN NEW; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_task BEFORE INSERT ON duly_task"
        " FOR EACH ROW EXECUTE FUNCTION refuse_task()"
    )


def record_statement_rows(conn: psycopg.Connection[Any]) -> Callable[[], list[int]]:
    """The rows each statement inserts into duly_task, as the server counts them: one per page."""
    conn.execute("CREATE TABLE page_rows (n bigint, at serial)")
    conn.execute(
        "CREATE FUNCTION count_page_rows() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN INSERT INTO page_rows (n) SELECT count(*) FROM new_rows; RETURN NULL; END $$"
    )
    conn.execute(
        "CREATE TRIGGER count_page_rows AFTER INSERT ON duly_task REFERENCING NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION count_page_rows()"
    )
    return lambda: [int(row[0]) for row in conn.execute("SELECT n FROM page_rows ORDER BY at")]


def cli(*argv: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m dispatch_fn ARGV`` in a child process, with ``env`` added to this one's."""
    return subprocess.run(
        [sys.executable, "-m", "dispatch_fn", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
        timeout=120,
    )


@contextmanager
def cloned_database(server_dsn: str, template: str) -> Iterator[str]:
    """A fresh database cloned from ``template`` on ``server_dsn``, dropped on leaving.

    For tests that need a new database per hypothesis example, where the
    function-scoped ``db_url`` fixture would give one per test.
    """
    name = f"duly_x_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    try:
        yield make_conninfo(server_dsn, dbname=name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True
