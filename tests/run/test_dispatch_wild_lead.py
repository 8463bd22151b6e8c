"""One duty with a very long lead does not make every duty of its group owe its periods."""

from __future__ import annotations

from typing import Any

import psycopg

from dispatch_fn.planning import RunRequest, plan, plan_dispatch
from dispatch_fn.run import dispatch
from dispatch_fn.settings import DEFAULT_CATCH_UP_DAYS
from runtimes import runtime
from support import NOW, duty, insert_duties, multiset, record_statement_rows, task_rows

WILD_LEAD = 3_660

type Conn = psycopg.Connection[Any]


def test_one_wild_lead_does_not_widen_the_schedule_of_the_other_duties(conn: Conn) -> None:
    tame = [duty(f"d{n:03}", frequency="daily") for n in range(100)]
    wild = duty("wild", frequency="daily", lead_days=WILD_LEAD)
    insert_duties(conn, [*tame, wild])
    statement_rows = record_statement_rows(conn)

    # A page weighs each duty by the candidate periods its group's schedule
    # holds, as the server received them: within a budget of 1,600 rows the
    # 100 tame duties (17 days each: the catch-up horizon's 7, the day before
    # it, whose lapsed period is counted, 8 ahead, as without the wild one,
    # and the day after them, which tells the next owed day) make one page and
    # the wild duty (its own 3,669 days) the next. Planned for the wild lead,
    # each tame duty would weigh 3,669 and fill a page alone: 101 pages.
    tame_weight = DEFAULT_CATCH_UP_DAYS + 10
    report = dispatch([conn], RunRequest(now=NOW), runtime(page_rows=100 * tame_weight))

    assert statement_rows() == [100 * 8, WILD_LEAD + 1]
    planned = plan_dispatch([*tame, wild], NOW)
    assert multiset(task_rows(conn)) == multiset(planned.drafts)
    assert report.tasks_created == 100 * 8 + WILD_LEAD + 1


def test_the_lead_buckets_of_python_and_sql_are_one_rule(conn: Conn) -> None:
    leads = [-(2**31), -3_660, -1, 0, 1, 2, 3, 4, 7, 8, 9, 365, 366, 3_660, 2**30, 2**31 - 1]
    rows = conn.execute(
        "SELECT lead, width_bucket(lead, %s::int[]) FROM unnest(%s::int[]) AS lead",
        (list(plan.LEAD_THRESHOLDS), leads),
    ).fetchall()
    assert [(lead, plan.lead_bucket(lead)) for lead in leads] == [tuple(row) for row in rows]
