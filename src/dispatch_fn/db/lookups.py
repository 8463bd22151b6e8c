"""The reads a person's question and a run make beside its pages: rows by id, a scope's match.

``explain`` judges the stored rows of the duties it names and looks up which
of their candidate tasks exist (explain_duties.sql, explain_tasks.sql); a
scoped run says whether its scope names any duty at all (scope_matches.sql);
a run judges the periods older than its candidates of the duties its pages
flagged (lapse_probe_duties.sql).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from dispatch_fn.db.sql import Connection, named_row, named_rows, statement
from dispatch_fn.db.store import scope_params
from dispatch_fn.planning import Scope


@dataclass(frozen=True, slots=True)
class ExistingTask:
    """A task that already holds a candidate period's identity: its id and when it was made."""

    task_id: int
    created_at: datetime


def duty_rows(
    conn: Connection, duty_ids: Sequence[str], organization_id: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The stored ``duly_duty`` rows of ``duty_ids``, every column, by id (absent: no such duty).

    One per organisation that holds the id (of ``organization_id`` alone, if given).
    """
    found: dict[str, list[dict[str, Any]]] = {}
    with conn.cursor(row_factory=dict_row) as cursor:
        cursor.execute(
            statement("explain_duties"),
            {"duty_ids": list(duty_ids), "organization_id": organization_id},
        )
        for row in cursor.fetchall():
            found.setdefault(str(row["id"]), []).append(row)
    return found


def duty_rows_by_key(
    conn: Connection, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """The stored rows of the duties keyed ``(organization_id, id)``, every column, by key."""
    with conn.cursor(row_factory=dict_row) as cursor:
        cursor.execute(
            statement("lapse_probe_duties"),
            {
                "organization_ids": [organization for organization, _ in keys],
                "duty_ids": [duty_id for _, duty_id in keys],
            },
        )
        return {(str(row["organization_id"]), str(row["id"])): row for row in cursor.fetchall()}


def existing_tasks(
    conn: Connection, duty: Mapping[str, Any], period_keys: Sequence[str]
) -> dict[str, ExistingTask]:
    """The tasks of duty row ``duty``'s owner for these periods that exist, by period key."""
    if not period_keys:
        return {}
    count = len(period_keys)
    found = conn.execute(
        statement("explain_tasks"),
        {
            "organization_ids": [duty["organization_id"]] * count,
            "duty_ids": [str(duty["id"])] * count,
            "owner_ids": [duty["owner_id"]] * count,
            "period_keys": list(period_keys),
        },
    )
    return {
        str(row["period_key"]): ExistingTask(int(row["task_id"]), row["created_at"])
        for row in named_rows(found)
    }


def any_task_missing(conn: Connection, duty: Mapping[str, Any], period_keys: Sequence[str]) -> bool:
    """Whether duty row ``duty``'s owner lacks a task of any of these periods."""
    return len(existing_tasks(conn, duty, period_keys)) < len(set(period_keys))


def scope_matches(conn: Connection, scope: Scope) -> bool:
    """Whether any duty at all, dispatchable or not, lies in ``scope``."""
    row = named_row(conn.execute(statement("scope_matches"), scope_params(scope)))
    return bool(row and row["matched"])
