"""Builders and readers shared by the planner, database and handler tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import psycopg

EVENTS_DIR = Path(__file__).resolve().parent.parent / "events"

# The clock most tests run at: the schedule's own hour on an ordinary day.
CLOCK = "2026-08-21T01:00:00Z"

type Conn = psycopg.Connection[Any]
type Invoke = Callable[..., dict[str, Any]]

DUTY_COLUMNS = (
    "id", "organization_id", "name", "form", "status", "owner_id", "business_unit_id", "source",
    "frequency", "due_anchor", "due_offset_days", "lead_days", "timezone",
    "effective_from", "effective_to", "last_dispatched_period",
    "review_status", "grace_days", "due_offset_months", "due_roll", "holiday_calendar",
)  # fmt: skip

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


def load_event(name: str) -> dict[str, Any]:
    """An event from the repository's events/ folder, as `sam local invoke -e` would send it."""
    loaded: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text("utf-8"))
    return loaded


def day(text: str) -> date:
    return date.fromisoformat(text)
