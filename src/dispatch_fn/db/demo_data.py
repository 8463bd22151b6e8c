"""The demo organisation's rows: seeded afresh, counted, shown, its broken duty paused.

``python -m dispatch_fn demo`` (``cli.demo``) decides what to seed and what to
print; these functions read and write its rows (statements/demo_*.sql). The
demo keeps to its own: it deletes only the duties it seeds, by id, and their
tasks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from dispatch_fn.db.sql import AnyConnection, named_row, named_rows, statement


def seed(
    conn: AnyConnection, organization_id: str, duties: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Replace ``duties`` (the columns demo_insert_duty.sql names) and their tasks, at once.

    Returns the ids of the organisation's other duties, which are kept.
    """
    seeded = {"organization_id": organization_id, "seeded": [duty["id"] for duty in duties]}
    with conn.transaction():
        others = [
            str(row["id"])
            for row in named_rows(conn.execute(statement("demo_other_duties"), seeded))
        ]
        conn.execute(statement("demo_delete_tasks"), seeded)
        conn.execute(statement("demo_delete_duties"), seeded)
        with conn.cursor() as cursor:
            cursor.executemany(statement("demo_insert_duty"), list(duties))
    return others


def tasks_by_group(conn: AnyConnection, organization_id: str) -> Counter[tuple[str, str]]:
    """The organisation's tasks, counted by their duty's (zone, frequency)."""
    found = conn.execute(statement("demo_tasks_by_group"), {"organization_id": organization_id})
    return Counter(
        {
            (str(row["timezone"]), str(row["frequency"])): int(row["tasks"])
            for row in named_rows(found)
        }
    )


def pause(conn: AnyConnection, organization_id: str, duty_ids: Sequence[str]) -> None:
    """Pause these duties of the organisation."""
    params = {"organization_id": organization_id, "duty_ids": list(duty_ids)}
    conn.execute(statement("demo_pause"), params)


@dataclass(frozen=True, slots=True)
class DutyPeriods:
    """One duty's frequency and zone, and the period keys of its tasks, space-separated in order."""

    frequency: str
    timezone: str
    period_keys: str


def duty_periods(conn: AnyConnection, duty_id: str) -> DutyPeriods | None:
    """Duty ``duty_id``'s frequency, zone and task periods; None: no such duty."""
    row = named_row(conn.execute(statement("demo_duty_periods"), {"duty_id": duty_id}))
    if row is None:
        return None
    return DutyPeriods(str(row["frequency"]), str(row["timezone"]), str(row["period_keys"]))


def task_count(conn: AnyConnection, organization_id: str) -> int:
    """How many tasks the organisation holds."""
    row = named_row(
        conn.execute(statement("demo_task_count"), {"organization_id": organization_id})
    )
    return 0 if row is None else int(row["tasks"])


@dataclass(frozen=True, slots=True)
class LatestTask:
    """A duty's latest task: its period, due date and the day after which it is late."""

    duty_id: str
    period_key: str
    due_date: date
    late_after: date


def latest_tasks(
    conn: AnyConnection, organization_id: str, duty_ids: Sequence[str]
) -> list[LatestTask]:
    """The latest task of each of these duties that has one, in duty id order."""
    params = {"organization_id": organization_id, "duty_ids": list(duty_ids)}
    return [
        LatestTask(str(row["duty_id"]), str(row["period_key"]), row["due_date"], row["late_after"])
        for row in named_rows(conn.execute(statement("demo_latest_tasks"), params))
    ]
