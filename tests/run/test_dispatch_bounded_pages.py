"""Pages are bounded in rows and in time: a long backfill is many short pages, none stuck."""

from __future__ import annotations

from datetime import date
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dispatch_fn.db import store
from dispatch_fn.planning import RunRequest, Scope, Window, plan_dispatch
from dispatch_fn.run import Deadline, RunReport, dispatch
from runtimes import runtime
from support import (
    NOW,
    duty,
    insert_duties,
    multiset,
    record_statement_rows,
    refuse_tasks,
    task_count,
    task_rows,
)

FIFTY_DAYS = Window(date(2026, 6, 1), date(2026, 7, 20))

type Conn = psycopg.Connection[Any]


def _slow_inserts(conn: Conn, seconds: str) -> None:
    # Each task row costs the inserting statement this much (a SQL expression
    # of the row: NEW.duty_id), on the server, as a slow page would.
    conn.execute(
        "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS"
        f" $$ BEGIN PERFORM pg_sleep({seconds}); RETURN NEW; END $$"
    )
    conn.execute(
        "CREATE TRIGGER slow_insert BEFORE INSERT ON duly_task"
        " FOR EACH ROW EXECUTE FUNCTION slow_insert()"
    )


@pytest.mark.parametrize(
    ("page_rows", "pages"), [(120, [100] * 6), (30, [50] * 12)], ids=["two-a-page", "one-too-big"]
)
def test_a_backfill_over_the_row_budget_is_split_into_pages_within_it(
    conn: Conn, helpers: list[Conn], page_rows: int, pages: list[int]
) -> None:
    duties = [duty(f"d{n:02}", frequency="daily") for n in range(12)]
    insert_duties(conn, duties)
    statement_rows = record_statement_rows(conn)

    report = dispatch(
        [conn, helpers[0]],
        RunRequest(now=NOW, window=FIFTY_DAYS),
        runtime(page_rows=page_rows),
    )

    # 12 duties of 50 days each: within the budget, or one duty alone above it.
    assert statement_rows() == pages
    assert multiset(task_rows(conn)) == multiset(plan_dispatch(duties, NOW, FIFTY_DAYS).drafts)
    assert (report.tasks_created, report.pages, report.complete) == (600, len(pages), True)
    assert report.last_duty_id == "d11"


@given(
    heaviest=st.integers(0, 5_000),
    chunk_size=st.integers(1, 20_000),
    page_rows=st.none() | st.integers(1, 2_000_000),
)
def test_a_page_is_weighed_only_where_its_duties_could_pass_the_budget(
    heaviest: int, chunk_size: int, page_rows: int | None
) -> None:
    statement = store.PageStatement(params={}, heaviest=heaviest)

    size = statement.page_size(chunk_size, page_rows)
    budget = statement.budget(size, page_rows)

    assert max(1, chunk_size // 2) <= size <= chunk_size
    if budget is None:
        # Unweighed: not even a page of the heaviest duties could pass it.
        assert page_rows is None or size * heaviest <= page_rows
    else:
        # Weighed: a page could pass it, and the page keeps its whole size.
        assert (budget, size) == (page_rows, chunk_size)
        assert size * heaviest > budget
    if size < chunk_size:
        # Pages are made smaller only so that they need no weighing.
        assert budget is None


def test_pages_a_little_smaller_than_the_chunk_keep_within_the_budget_unweighed(
    conn: Conn, helpers: list[Conn]
) -> None:
    duties = [duty(f"d{n:02}", frequency="daily") for n in range(11)]
    insert_duties(conn, duties)
    statement_rows = record_statement_rows(conn)

    # Four duties of 50 rows would pass 160; three never can, so pages take three.
    report = dispatch(
        [conn, helpers[0]],
        RunRequest(now=NOW, window=FIFTY_DAYS),
        runtime(chunk_size=4, page_rows=160),
    )

    assert sorted(statement_rows()) == [100, 150, 150, 150]
    assert multiset(task_rows(conn)) == multiset(plan_dispatch(duties, NOW, FIFTY_DAYS).drafts)
    assert (report.tasks_created, report.pages, report.complete) == (550, 4, True)


def test_a_page_past_statement_timeout_is_split_and_a_duty_that_alone_times_out_waits(
    conn: Conn, invoke: Any
) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(6)] + [duty("slow")])
    _slow_inserts(conn, "CASE WHEN NEW.duty_id = 'slow' THEN 2 ELSE 0.1 END")

    # 7 rows of 0.1 s (and one of 2 s) in a 400 ms statement_timeout: only
    # pages of at most 3 ordinary duties fit.
    report = invoke({"now": NOW.isoformat()}, statement_timeout_ms=400)

    assert task_count(conn) == 6
    assert (report["tasks_created"], report["complete"], report["degraded"]) == (6, True, True)
    # Slow is not a fault (its values are fine): set aside, as a locked duty is.
    assert (report["faults"], report["set_aside_count"]) == ([], 1)
    assert [(s["duty_id"], s["reason"]) for s in report["set_aside"]] == [("slow", "timed_out")]
    assert (report["duties_read"], report["last_duty_id"]) == (7, "slow")
    # The next run tries it again, and once it is fast enough, dispatches it.
    conn.execute("DROP TRIGGER slow_insert ON duly_task")
    again = invoke({"now": NOW.isoformat()}, statement_timeout_ms=400)
    assert (again["tasks_created"], again["set_aside"], task_count(conn)) == (1, [], 7)


def test_past_the_timeouts_a_run_may_spend_it_stops_where_it_settled_and_the_next_goes_on(
    conn: Conn,
) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(6)] + [duty("slow")])
    _slow_inserts(conn, "CASE WHEN NEW.duty_id = 'slow' THEN 2 ELSE 0.1 END")
    conn.execute("SET statement_timeout = 400")

    # One timeout a run: the page that times out is halved once, its first
    # half stored, and the second half's timeout ends the run there; each
    # continuation resumes from the run's mark.
    marks: list[str | None] = []
    reports: list[RunReport] = []
    resume = None
    while (not reports or not reports[-1].complete) and len(reports) < 8:
        request = RunRequest(now=NOW, scope=Scope(resume_after=resume))
        reports.append(dispatch([conn], request, runtime(max_timeouts=1)))
        resume = reports[-1].last_duty_id
        marks.append(resume)

    assert marks == ["d2", "d4", "d5", "slow"]
    assert [r.tasks_created for r in reports] == [3, 2, 1, 0]
    assert [r.complete for r in reports] == [False, False, False, True]
    assert [r.degraded for r in reports] == [False, False, False, True]
    assert (reports[-1].set_aside_ids, task_count(conn)) == (("slow",), 6)


def test_a_duty_made_dispatchable_inside_a_settled_page_that_the_budget_ends_on_is_no_error(
    conn: Conn, helpers: list[Conn]
) -> None:
    # Monthly duties over three months: three rows each, two duties a page.
    window = Window(date(2026, 6, 1), date(2026, 8, 31))
    insert_duties(conn, [duty("a1"), duty("a3")])
    conn.execute("CREATE TABLE refusing ()")
    conn.execute("INSERT INTO refusing DEFAULT VALUES")
    refuse_tasks(conn, "EXISTS (SELECT FROM refusing)")
    asked = 0

    def time_left_ms() -> float:
        # Asked before each statement: after the first page failed and its ids
        # (a1, a3) were read, a2 arrives between them and the refusal ends.
        nonlocal asked
        asked += 1
        if asked == 2:
            helpers[0].execute("DELETE FROM refusing")
            insert_duties(helpers[0], [duty("a2")])
        return 60_000

    report = dispatch(
        [conn],
        RunRequest(now=NOW, window=window),
        runtime(page_rows=6, deadline=Deadline(time_left_ms, statement_timeout_ms=300_000)),
    )

    assert (report.tasks_created, report.faults, report.complete) == (9, (), True)
    assert report.last_duty_id == "a3"
    assert task_count(conn) == 9


def test_the_deadline_cancels_a_long_page_and_the_run_ends_incomplete_at_an_exact_mark(
    conn: Conn,
) -> None:
    duties = [duty(f"d{n}") for n in range(6)]
    insert_duties(conn, duties)
    _slow_inserts(conn, "0.3")
    asked = 0

    def time_left_ms() -> float:
        # Ample for the first page; 250 ms for the next, which needs 600 ms.
        nonlocal asked
        asked += 1
        return 60_000 if asked == 1 else 250

    report = dispatch(
        [conn],
        RunRequest(now=NOW),
        runtime(chunk_size=2, deadline=Deadline(time_left_ms, statement_timeout_ms=300_000)),
    )

    assert (report.complete, report.last_duty_id, report.tasks_created) == (False, "d1", 2)
    assert task_count(conn) == 2
    # The lowered timeout was the page's alone; the next run picks up the rest.
    assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)
    rest = dispatch([conn], RunRequest(now=NOW), runtime(chunk_size=2))
    assert (rest.tasks_created, task_count(conn)) == (4, 6)
    assert multiset(task_rows(conn)) == multiset(plan_dispatch(duties, NOW).drafts)
