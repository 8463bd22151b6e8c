"""One duty with a very long lead does not make every duty of its group owe its periods."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg

from dispatch_fn import dispatch, plan
from dispatch_fn.plan import Schedule, plan_dispatch
from support import duty, insert_duties, multiset, task_rows

CLOCK = datetime(2026, 8, 21, 1, 0, tzinfo=UTC)
WILD_LEAD = 3_660

type Conn = psycopg.Connection[Any]


def _candidates(conn: Conn, request: dispatch.RunRequest) -> int:
    # The (duty, candidate period) pairs the page statement joins before each
    # duty's own lead cuts them: every duty of a group meets every period its
    # group's schedule holds.
    return sum(
        group.duties * len(outcome.periods)
        for group, outcome in dispatch._plan_groups(conn, request)
        if isinstance(outcome, Schedule)
    )


def test_one_wild_lead_does_not_widen_the_schedule_of_the_other_duties(conn: Conn) -> None:
    tame = [duty(f"d{n:03}", frequency="daily") for n in range(100)]
    request = dispatch.RunRequest(now=CLOCK)
    insert_duties(conn, tame)
    alone = _candidates(conn, request)
    wild = duty("wild", frequency="daily", lead_days=WILD_LEAD)
    insert_duties(conn, [wild])

    together = _candidates(conn, request)
    report = dispatch.run([conn], request)

    # The wild duty's own 3,661 days, and the others' 8 days each, as without it.
    assert (alone, together) == (100 * 8, 100 * 8 + WILD_LEAD + 1)
    planned = plan_dispatch([*tame, wild], CLOCK)
    assert multiset(task_rows(conn)) == multiset(planned.drafts)
    assert report.tasks_created == 100 * 8 + WILD_LEAD + 1


def test_the_lead_buckets_of_python_and_sql_are_one_rule(conn: Conn) -> None:
    leads = [-(2**31), -3_660, -1, 0, 1, 2, 3, 4, 7, 8, 9, 365, 366, 3_660, 2**30, 2**31 - 1]
    rows = conn.execute(
        "SELECT lead, width_bucket(lead, %s::int[]) FROM unnest(%s::int[]) AS lead",
        (list(plan.LEAD_THRESHOLDS), leads),
    ).fetchall()
    assert [(lead, plan.lead_bucket(lead)) for lead in leads] == [tuple(row) for row in rows]
