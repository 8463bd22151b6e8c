"""The planner reads a null cadence field as the column default the schema itself declares."""

from __future__ import annotations

from typing import Any

import psycopg

from dispatch_fn.planning import plan


def test_the_planner_defaults_are_the_schema_column_defaults(
    conn: psycopg.Connection[Any],
) -> None:
    declared = {
        "timezone": plan.DEFAULT_TIMEZONE,
        "due_anchor": plan.DEFAULT_ANCHOR,
        "due_offset_days": plan.DEFAULT_OFFSET_DAYS,
        "lead_days": plan.DEFAULT_LEAD_DAYS,
        "due_offset_months": plan.DEFAULT_OFFSET_MONTHS,
        "due_roll": plan.DEFAULT_ROLL,
        "grace_days": plan.DEFAULT_GRACE_DAYS,
        "review_status": plan.APPROVED,
        "holiday_calendar": None,
    }
    conn.execute(
        "INSERT INTO duly_duty (id, organization_id, name, owner_id, source)"
        " VALUES ('d', 'o', 'n', 'u', 'self')"
    )
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        stored = cursor.execute(
            "SELECT timezone, due_anchor, due_offset_days, lead_days, due_offset_months,"
            " due_roll, grace_days, review_status, holiday_calendar FROM duly_duty"
        ).fetchone()
    assert stored == declared
