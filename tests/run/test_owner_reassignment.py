"""A duty reassigned mid-period: the task's identity holds its owner (docs/contract.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg

from dispatch_fn.planning import RunRequest
from dispatch_fn.run import dispatch
from support import duty, insert_duties, last_dispatched


def _tasks(conn: psycopg.Connection[Any]) -> list[tuple[str, str, str]]:
    rows = conn.execute(
        "SELECT duty_id, period_key, owner_id FROM duly_task ORDER BY period_key, owner_id"
    ).fetchall()
    return [(str(d), str(k), str(o)) for d, k, o in rows]


def test_reassigning_a_duty_mid_period_gives_the_new_owner_a_task_and_keeps_the_old_one(
    conn: psycopg.Connection[Any],
) -> None:
    insert_duties(conn, [duty("d1", lead_days=0, owner_id="alice")])
    dispatch([conn], RunRequest(now=datetime(2026, 8, 3, 1, tzinfo=UTC)))
    assert _tasks(conn) == [("d1", "2026-08", "alice")]
    assert last_dispatched(conn) == {"d1": "2026-08"}

    conn.execute("UPDATE duly_duty SET owner_id = 'bob' WHERE id = 'd1'")
    report = dispatch([conn], RunRequest(now=datetime(2026, 8, 17, 1, tzinfo=UTC)))

    # The same duty and period, one task per owner: the new owner owes it too,
    # and the old owner's task is left as it was.
    assert _tasks(conn) == [("d1", "2026-08", "alice"), ("d1", "2026-08", "bob")]
    assert report.tasks_created == 1
    # The period was already the latest dispatched; it stays the latest.
    assert last_dispatched(conn) == {"d1": "2026-08"}

    # A later run in the same period creates nothing more for either owner:
    # the duty's account says the period is dispatched (docs/contract.md#account).
    again = dispatch([conn], RunRequest(now=datetime(2026, 8, 28, 1, tzinfo=UTC)))
    assert (again.tasks_created, again.tasks_existing) == (0, 0)
    assert len(_tasks(conn)) == 2


def test_a_reassignment_back_to_the_first_owner_creates_nothing_new(
    conn: psycopg.Connection[Any],
) -> None:
    insert_duties(conn, [duty("d1", lead_days=0, owner_id="alice")])
    for owner, day in (("alice", 3), ("bob", 10), ("alice", 17)):
        conn.execute("UPDATE duly_duty SET owner_id = %s WHERE id = 'd1'", (owner,))
        dispatch([conn], RunRequest(now=datetime(2026, 8, day, 1, tzinfo=UTC)))
    assert _tasks(conn) == [("d1", "2026-08", "alice"), ("d1", "2026-08", "bob")]
